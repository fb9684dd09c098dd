#!/bin/sh
# lines-vs-cat.sh - qflow-lines against cat, from a file and from a pipe
# (issue 29's target: qflow-lines at >= 0.5x cat's throughput both ways).
#
#   perf/lines-vs-cat.sh [-n RUNS] [-m MB] [-q QFLOW_LINES] [-b OTHER] [FILE]
#
# Without FILE it writes MB (default 200) megabytes of text lines of 0 to
# ~150 bytes under ${TMPDIR:-/tmp} and deletes it at the end. Each round
# runs, in this order, so that load from other processes on a shared
# machine falls on all of them alike:
#   cat FILE > /dev/null              qflow-lines FILE > /dev/null
#   cat FILE | cat > /dev/null        cat FILE | qflow-lines > /dev/null
# (the pipe's baseline is cat reading the same pipe), and with -b the two
# qflow-lines commands again with another build OTHER (a before/after
# comparison in the same run). It prints the median
# wall and CPU (user + system, all processes of the command) seconds of
# each over RUNS rounds (default 7), and the ratios cat / qflow-lines:
# 1.0 means as fast as cat, 0.5 half its throughput. The file is read once
# first so every run reads it from the page cache. Output is checked once
# to be byte-identical to the input (the file ends with '\n' and has no
# '\r', so a TextLineReader gives it back as it is).
set -eu

runs=7
mb=200
q=
b=
while getopts n:m:q:b: opt; do
    case $opt in
    n) runs=$OPTARG ;;
    m) mb=$OPTARG ;;
    q) q=$OPTARG ;;
    b) b=$OPTARG ;;
    *) echo "usage: $0 [-n RUNS] [-m MB] [-q QFLOW_LINES] [FILE]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$q" ]; then
    for c in "$here/../build-rel/runtime/tools/qflow-lines" "$here/../build/runtime/tools/qflow-lines"; do
        if [ -x "$c" ]; then q=$c; break; fi
    done
fi
[ -x "$q" ] || { echo "$0: no qflow-lines binary (give -q)" >&2; exit 2; }
command -v python3 > /dev/null || { echo "$0: needs python3 (its clock)" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lines-vs-cat.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ $# -ge 1 ]; then
    f=$1
else
    f=$tmp/text
    # Deterministic text: awk's rand() with a fixed seed.
    awk -v mb="$mb" 'BEGIN {
        srand(29); total = mb * 1048576; n = 0
        while (n < total) {
            w = int(rand() * 16); line = ""
            for (i = 0; i < w; i++)
                line = line sprintf("%s%x", i ? " " : "", int(rand() * 2^31))
            print line; n += length(line) + 1
        }
    }' > "$f"
fi
cat "$f" > /dev/null
"$q" "$f" | cmp -s - "$f" || { echo "$0: qflow-lines FILE output differs from FILE" >&2; exit 1; }
cat "$f" | "$q" | cmp -s - "$f" || { echo "$0: cat FILE | qflow-lines differs from FILE" >&2; exit 1; }

# One timed run: appends "wall cpu" (seconds; CPU is user + system of the
# command and everything it ran) to $tmp/$1. Python for a microsecond
# clock and rusage: /usr/bin/time counts in 10 ms steps.
timed() {
    name=$1
    shift
    python3 -c 'import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run(sys.argv[1:], check=True)
w = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.4f %.4f" % (w, r.ru_utime + r.ru_stime))' "$@" >> "$tmp/$name"
}
i=0
while [ $i -lt "$runs" ]; do
    timed cat_file sh -c 'exec cat "$1" > /dev/null' sh "$f"
    timed lines_file sh -c 'exec "$2" "$1" > /dev/null' sh "$f" "$q"
    timed cat_pipe sh -c 'cat "$1" | cat > /dev/null' sh "$f"
    timed lines_pipe sh -c 'cat "$1" | "$2" > /dev/null' sh "$f" "$q"
    if [ -n "$b" ]; then
        timed other_file sh -c 'exec "$2" "$1" > /dev/null' sh "$f" "$b"
        timed other_pipe sh -c 'cat "$1" | "$2" - > /dev/null' sh "$f" "$b"
    fi
    i=$((i + 1))
done

# median of column $2 of file $1
median() {
    cut -d' ' -f"$2" "$tmp/$1" | sort -g | awk '{ v[NR] = $1 } END {
        print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
bytes=$(wc -c < "$f")
printf 'file: %s (%d bytes), %d rounds, medians\n' "$f" "$bytes" "$runs"
printf '%-34s %9s %9s %10s\n' command wall_s cpu_s MB/s
names="cat_file lines_file cat_pipe lines_pipe"
[ -z "$b" ] || names="$names other_file other_pipe"
for n in $names; do
    case $n in
    cat_file) label='cat FILE' ;;
    lines_file) label='qflow-lines FILE' ;;
    cat_pipe) label='cat FILE | cat' ;;
    lines_pipe) label='cat FILE | qflow-lines' ;;
    other_file) label='OTHER FILE' ;;
    other_pipe) label='cat FILE | OTHER -' ;;
    esac
    w=$(median $n 1)
    c=$(median $n 2)
    awk -v l="$label" -v w="$w" -v c="$c" -v b="$bytes" \
        'BEGIN { printf "%-34s %9.3f %9.3f %10.0f\n", l, w, c, (w > 0 ? b / w / 1e6 : 0) }'
done
pairs="file:cat_file:lines_file stdin:cat_pipe:lines_pipe"
[ -z "$b" ] || pairs="$pairs OTHER-file:cat_file:other_file OTHER-stdin:cat_pipe:other_pipe"
for pair in $pairs; do
    IFS=:
    set -- $pair
    unset IFS
    awk -v k="$1" -v cw="$(median "$2" 1)" -v lw="$(median "$3" 1)" \
        -v cc="$(median "$2" 2)" -v lc="$(median "$3" 2)" 'BEGIN {
        printf "ratio cat/qflow-lines, %-11s  wall %.2fx  cpu %.2fx  (target >= 0.5x)\n",
               k, (lw > 0 ? cw / lw : 0), (lc > 0 ? cc / lc : 0) }'
done
