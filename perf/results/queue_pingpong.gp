if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 900,540 noenhanced
} else {
    set terminal png size 900,540 noenhanced
}
set output 'perf/results/queue_pingpong.png'
set title 'queue.pingpong: latency percentiles (median over repetitions)'
set ylabel 'ns'
set logscale y
set grid ytics
set key outside right
set datafile missing 'NaN'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [100:*]
plot 'perf/results/queue_pingpong.dat' using 2:xtic(1) title 'p50', 'perf/results/queue_pingpong.dat' using 3 title 'p99'
