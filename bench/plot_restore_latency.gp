# Restore throughput under injected read latency: fixed --jobs N as lines over
# N, one per latency, and --jobs auto as a dashed horizontal line of the same
# colour.
#   gnuplot -e "datafile='restore_latency.dat'; autofile='restore_latency_auto.dat'; outfile='restore_latency.png'; subtitle='...'" bench/plot_restore_latency.gp
# Both files are written by bench/restore_report.py.
if (!exists("datafile")) datafile = 'restore_latency.dat'
if (!exists("autofile")) autofile = 'restore_latency_auto.dat'
if (!exists("outfile")) outfile = 'restore_latency.png'
if (!exists("subtitle")) subtitle = ''
set terminal pngcairo size 900,560 font ',11'
set output outfile
set title "cairn restore under injected read latency: fixed --jobs N (solid) vs --jobs auto (dashed)\n{/*0.8 ".subtitle."}"
set xlabel 'reads in flight (--jobs N)'
set ylabel 'MiB/s (median, wall clock, image bytes)'
set logscale x 2
set yrange [0:*]
set grid
set key outside right top
set key autotitle columnhead
stats datafile skip 1 nooutput
cols = STATS_columns
stats datafile using 1 skip 1 nooutput
set xrange [0.8:STATS_max * 1.25]
set xtics 2
plot for [i=2:cols] datafile using 1:i with linespoints linewidth 2 pointtype 7 linecolor i-1, \
     for [i=2:cols] autofile using 1:i with lines dashtype 2 linewidth 2 linecolor i-1
