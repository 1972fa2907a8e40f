# Restore throughput against --jobs N, one line per --cpu-workers W.
#   gnuplot -e "datafile='restore_jobs.dat'; outfile='restore_jobs.png'; subtitle='...'" bench/plot_restore_jobs.gp
# datafile (written by bench/restore_report.py): header "jobs" + one quoted
# title per column, then one row per N with MiB/s per cpu-workers setting.
if (!exists("datafile")) datafile = 'restore_jobs.dat'
if (!exists("outfile")) outfile = 'restore_jobs.png'
if (!exists("subtitle")) subtitle = ''
set terminal pngcairo size 900,560 font ',11'
set output outfile
set title "cairn restore: throughput vs reads in flight (--jobs)\n{/*0.8 ".subtitle."}"
set xlabel 'reads in flight (--jobs N)'
set ylabel 'MiB/s (median, wall clock, image bytes)'
set logscale x 2
set yrange [0:*]
set grid
set key bottom right
set key autotitle columnhead
stats datafile skip 1 nooutput
cols = STATS_columns
stats datafile using 1 skip 1 nooutput
set xrange [0.8:STATS_max * 1.25]
set xtics 2
plot for [i=2:cols] datafile using 1:i with linespoints linewidth 2 pointtype 7
