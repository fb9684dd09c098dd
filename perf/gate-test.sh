#!/bin/sh
# gate-test.sh QFLOW_BENCH WORK_DIR - the regression gate with real runs of
# the whole --quick suite, as a CI runs it, under a background load.
#
#   - GATE_RUNS runs of the same binary are saved (run 1 is the base); run i
#     is compared with run i-1 as it runs (`--quick --compare`, the CI
#     recipe), and afterwards every saved run with every other one
#     (`--from`): GATE_RUNS x (GATE_RUNS - 1) same-binary compares, each
#     must exit 0 (never WORSE, never "too few rows judged");
#   - for each factor in GATE_FACTORS (1.3 and 3.5), GATE_SLOW_RUNS runs of
#     a slowed qflow (QFLOW_BENCH_SLOWDOWN: its FIFO path does that many
#     times the work, perf/impl_qflow.c) are compared with the base as they
#     run, and afterwards with every other saved run: each compare must exit
#     1 (at least one row WORSE).
#   - the load: one `yes` per CPU online for the whole test (GATE_LOAD=0:
#     none), so the gate is tested on a machine busier than a CI's.
#
# Every run uses qflow-bench's defaults (5 repetitions, threshold 10%, a
# cut qflow repetition run again with a larger budget). The wall time of
# each run is printed; each must stay under GATE_RUN_LIMIT seconds (300).
#
# Counts. Default (CI, .ci/run): GATE_RUNS=2, GATE_SLOW_RUNS=1: 4 runs of
# the suite, 2 same-binary compares, 2 catches per factor; about 10 minutes
# on 2 loaded cores. GATE_FULL=1 (the full strength): GATE_RUNS=5
# (20 same-binary compares), GATE_SLOW_RUNS=5 (5 live catches per factor,
# 25 in all): 15 runs, about an hour; not for a shared machine's every
# build. Every run's JSON and output stay in WORK_DIR; the report of the
# first compare of each kind is WORK_DIR/report-*/index.html.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 QFLOW_BENCH WORK_DIR" >&2
    exit 2
fi
bench=$1
work=$2
mkdir -p "$work"
if [ "${GATE_FULL:-0}" = 1 ]; then
    runs=${GATE_RUNS:-5}
    slow_runs=${GATE_SLOW_RUNS:-5}
else
    runs=${GATE_RUNS:-2}
    slow_runs=${GATE_SLOW_RUNS:-1}
fi
factors=${GATE_FACTORS:-1.3 3.5}
limit=${GATE_RUN_LIMIT:-300}
status=0
same_ok=0
same_n=0
slowest=0
start=$(date +%s)

load_pids=""
stop_load() {
    for p in $load_pids; do
        kill "$p" 2>/dev/null
    done
    load_pids=""
}
trap 'stop_load' EXIT
trap 'stop_load; exit 2' INT TERM
if [ "${GATE_LOAD:-1}" != 0 ]; then
    n=$(getconf _NPROCESSORS_ONLN)
    i=0
    while [ "$i" -lt "$n" ]; do
        yes >/dev/null &
        load_pids="$load_pids $!"
        i=$((i + 1))
    done
    echo "gate-test: background load: $n x yes (pids$load_pids)"
fi
echo "gate-test: $runs runs of the same binary, $slow_runs slowed run(s) per factor ($factors)"

# run NAME [ARGS...]: one whole --quick run; output in $work/NAME.log, its
# results in $work/NAME.json; sets rc and secs.
run() {
    name=$1
    shift
    t0=$(date +%s)
    "$bench" --quick --json "$work/$name.json" "$@" >"$work/$name.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    [ "$secs" -gt "$slowest" ] && slowest=$secs
    if [ "$secs" -gt "$limit" ]; then
        echo "gate-test: FAILED: run $name took $secs s (limit $limit s)"
        status=1
    fi
}

# from NEW OLD [ARGS...]: compare two saved runs; sets rc; output in
# $work/NEW-vs-OLD.log.
from() {
    new=$1
    old=$2
    shift 2
    "$bench" --from "$work/$new.json" --compare "$work/$old.json" "$@" \
        >"$work/$new-vs-$old.log" 2>&1
    rc=$?
}

summary() { # the verdict counts and the WORSE rows of a log
    grep -E '^  qflow rows:' "$1" | sed 's/^ */      /'
    grep -E '=> (WORSE|NOT JUDGED)' "$1" | sed 's/^ */      /'
}

same() { # same NEW OLD LOG RC: a same-binary verdict
    same_n=$((same_n + 1))
    if [ "$4" -eq 0 ]; then
        same_ok=$((same_ok + 1))
        echo "  same binary, $1 against $2: exit 0"
    else
        echo "  same binary, $1 against $2: exit $4: FAILED"
        status=1
    fi
    summary "$3"
}

i=1
while [ "$i" -le "$runs" ]; do
    if [ "$i" -eq 1 ]; then
        run run1
        echo "  run1 (base): exit $rc, $secs s"
        if [ "$rc" -ne 0 ]; then
            tail -30 "$work/run1.log"
            echo "gate-test: FAILED: the base run"
            exit 1
        fi
    else
        prev=run$((i - 1))
        [ "$i" -eq 2 ] && rep="--report $work/report-same" || rep=""
        # shellcheck disable=SC2086 # rep is two words or none
        run "run$i" --compare "$work/$prev.json" $rep
        echo "  run$i: $secs s"
        same "run$i" "$prev" "$work/run$i.log" "$rc"
    fi
    i=$((i + 1))
done
# Every other ordered pair of saved runs (the live compares above are
# i against i-1).
i=1
while [ "$i" -le "$runs" ]; do
    j=1
    while [ "$j" -le "$runs" ]; do
        if [ "$i" -ne "$j" ] && [ "$j" -ne $((i - 1)) ]; then
            from "run$i" "run$j"
            same "run$i" "run$j" "$work/run$i-vs-run$j.log" "$rc"
        fi
        j=$((j + 1))
    done
    i=$((i + 1))
done

catch_report=""
for f in $factors; do
    caught=0
    tried=0
    k=1
    while [ "$k" -le "$slow_runs" ]; do
        name=slow$f-$k
        [ "$k" -eq 1 ] && rep="--report $work/report-slow$f" || rep=""
        # shellcheck disable=SC2086
        QFLOW_BENCH_SLOWDOWN=$f run "$name" --compare "$work/run1.json" $rep
        tried=$((tried + 1))
        if [ "$rc" -eq 1 ]; then
            caught=$((caught + 1))
            echo "  qflow ${f}x slower, $name against run1: exit 1 (caught), $secs s"
        else
            echo "  qflow ${f}x slower, $name against run1: exit $rc: NOT CAUGHT, $secs s"
            status=1
        fi
        summary "$work/$name.log"
        j=2
        while [ "$j" -le "$runs" ]; do
            from "$name" "run$j"
            tried=$((tried + 1))
            if [ "$rc" -eq 1 ]; then
                caught=$((caught + 1))
                echo "  qflow ${f}x slower, $name against run$j: exit 1 (caught)"
            else
                echo "  qflow ${f}x slower, $name against run$j: exit $rc: NOT CAUGHT"
                summary "$work/$name-vs-run$j.log"
                status=1
            fi
            j=$((j + 1))
        done
        k=$((k + 1))
    done
    catch_report="$catch_report, ${f}x caught $caught of $tried"
done
stop_load

echo "gate-test: same binary $same_ok of $same_n compares passed$catch_report;" \
    "slowest run $slowest s, whole test $(($(date +%s) - start)) s" \
    "(load: ${GATE_LOAD:-1} yes per CPU; uptime: $(uptime | sed 's/.*load average: //'))"
[ "$status" -eq 0 ] && echo "gate-test: OK"
[ "$status" -ne 0 ] && echo "gate-test: FAILED"
exit $status
