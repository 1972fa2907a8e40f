# Verify throughput per tool (median logical MiB/s, warm cache), with the
# decode limit (verify's CPU work on chunks in memory, all CPUs) as the last bar.
#   gnuplot -e "datadir='DIR/plots'; outfile='verify_compare.png'; subtitle='...'" bench/plot_verify_compare.gp
# datadir/verify_compare.dat (written by bench/verify_report.py): a header,
# then one row per tool: "name" MiB/s.
if (!exists("datadir")) datadir = '.'
if (!exists("outfile")) outfile = 'verify_compare.png'
if (!exists("subtitle")) subtitle = ''
datafile = datadir.'/verify_compare.dat'
set terminal pngcairo size 900,520 font ',11'
set output outfile
set title "verify: logical MiB/s (distinct chunks' plaintext ÷ wall clock), median\n{/*0.8 ".subtitle."}"
set ylabel 'logical MiB/s'
set yrange [0:*]
set grid ytics
set style fill solid 0.8 border -1
set boxwidth 0.6
set xtics nomirror
unset key
plot datafile using 0:2:xticlabels(1) skip 1 with boxes linecolor rgb '#4a7ab5', \
     '' using 0:2:(sprintf('%.0f', $2)) skip 1 with labels offset 0,0.8
