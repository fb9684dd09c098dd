if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 900,540 noenhanced
} else {
    set terminal png size 900,540 noenhanced
}
set output 'perf/results/priority_tput.png'
set title 'priority.tput: throughput against threads (median, min..max)'
set ylabel 'items/s'
set logscale y
set grid ytics
set key outside right
set datafile missing 'NaN'
set xlabel 'threads (producers + consumers)'
set xtics (2, 8)
set logscale x 2
set offsets graph 0.05, graph 0.05
plot 'perf/results/priority_tput.dat' using 1:2:3:4 with yerrorlines lw 2 title 'qflow', \
     'perf/results/priority_tput.dat' using 1:5:6:7 with yerrorlines lw 2 title 'mutex_cond'
