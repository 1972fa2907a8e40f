# Verify throughput under injected read latency: fixed --jobs N as lines over
# N, one per latency, and --jobs auto as a dashed horizontal line of the same
# colour.
#   gnuplot -e "datadir='DIR/plots'; outfile='verify_latency.png'; subtitle='...'" bench/plot_verify_latency.gp
# datadir/verify_latency.dat and verify_latency_auto.dat are written by
# bench/verify_report.py.
if (!exists("datadir")) datadir = '.'
if (!exists("outfile")) outfile = 'verify_latency.png'
if (!exists("subtitle")) subtitle = ''
datafile = datadir.'/verify_latency.dat'
autofile = datadir.'/verify_latency_auto.dat'
set terminal pngcairo size 900,560 font ',11'
set output outfile
set title "cairn verify under injected read latency: fixed --jobs N (solid) vs --jobs auto (dashed)\n{/*0.8 ".subtitle."}"
set xlabel 'reads in flight (--jobs N)'
set ylabel 'logical MiB/s (median, wall clock)'
set logscale x 2
set yrange [0:*]
set grid
set key outside right top
set key autotitle columnhead
stats datafile using 1 skip 1 nooutput
set xrange [0.8:STATS_max * 1.25]
set xtics 2
plot for [i=2:*] datafile using 1:i with linespoints linewidth 2 pointtype 7 linecolor i-1, \
     for [i=2:*] autofile using 1:i with lines dashtype 2 linewidth 2 linecolor i-1
