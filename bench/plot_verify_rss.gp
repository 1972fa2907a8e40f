# Peak RSS of cairn verify against the number of distinct chunks, one line
# per mode (no ledger, ledger recording, ledger skipping).
#   gnuplot -e "datadir='DIR/plots'; outfile='verify_rss.png'; subtitle='...'" bench/plot_verify_rss.gp
# datadir/verify_rss.dat (written by bench/verify_report.py): header "chunks"
# + one quoted title per mode, then one row per chunk count with MiB.
if (!exists("datadir")) datadir = '.'
if (!exists("outfile")) outfile = 'verify_rss.png'
if (!exists("subtitle")) subtitle = ''
datafile = datadir.'/verify_rss.dat'
set terminal pngcairo size 900,560 font ',11'
set output outfile
set title "cairn verify: peak RSS vs distinct chunks (64 KiB synthetic chunks)\n{/*0.8 ".subtitle."}"
set xlabel 'distinct chunks'
set ylabel 'peak RSS, MiB (median)'
set logscale x
set yrange [0:*]
set format x '%.0s%c'
set grid
set key top left
set key autotitle columnhead
plot for [i=2:*] datafile using 1:i with linespoints linewidth 2 pointtype 7
