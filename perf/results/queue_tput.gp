if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 900,540 noenhanced
} else {
    set terminal png size 900,540 noenhanced
}
set output 'perf/results/queue_tput.png'
set title 'queue.tput: throughput against threads (median, min..max)'
set ylabel 'items/s'
set logscale y
set grid ytics
set key outside right
set datafile missing 'NaN'
set xlabel 'threads (producers + consumers)'
set xtics (2, 4, 8)
set logscale x 2
set offsets graph 0.05, graph 0.05
plot 'perf/results/queue_tput.dat' using 1:2:3:4 with yerrorlines lw 2 title 'qflow', \
     'perf/results/queue_tput.dat' using 1:5:6:7 with yerrorlines lw 2 title 'mutex_cond', \
     'perf/results/queue_tput.dat' using 1:8:9:10 with yerrorlines lw 2 title 'gasyncqueue', \
     'perf/results/queue_tput.dat' using 1:11:12:13 with yerrorlines lw 2 title 'ck_ring_spin'
