#!/bin/sh
# gate-test.sh QFLOW_BENCH WORK_DIR - the regression gate with real runs of
# the whole --quick suite, as a CI runs it, under a background load.
#
#   - run1, a whole --quick run, is saved as the base; GATE_RUNS - 1 more
#     runs of the same binary are compared with it as they run (the CI
#     recipe: `qflow-bench --quick --compare run1.json`): each must exit 0
#     (never WORSE, never too few rows judged);
#   - for each factor in GATE_FACTORS (1.3 and 3.5), GATE_SLOW_RUNS runs of
#     a slowed qflow (QFLOW_BENCH_SLOWDOWN: its FIFO path does that many
#     times the work, perf/impl_qflow.c) are compared with run1 as they run:
#     each must exit 1 (a row or a family WORSE, and WORSE again when it
#     runs again beside the old build) for the factors in GATE_REQUIRE
#     (below: all by default); the others are reported;
#   - the load: one `yes` per CPU online for the whole test (GATE_LOAD=0:
#     none), so the gate is tested on a machine busier than a CI's.
#
# Every run uses qflow-bench's defaults (5 repetitions, threshold 10%, a cut
# qflow repetition run again with a larger budget) and the CI recipe's
# --base-bin: a WORSE row is confirmed by running the old build (here the
# same binary, without the test knob) beside the new one, turn about, so a
# change of the machine's regime between the saved run and this one fails
# nothing. Each run's wall time is printed against the target of
# GATE_RUN_LIMIT seconds (300): a run over it is reported, not failed (the
# load of other jobs here moves a whole run from 217 to 305 s between two
# runs of one binary); a run over GATE_RUN_HARD_LIMIT (900) fails the test.
#
# Counts. Default (CI, .ci/run): GATE_RUNS=2, GATE_SLOW_RUNS=1, and the
# slowed runs limited to the rows the knob slows (GATE_SLOW_FILTER='^queue\.':
# qflow's FIFO path is what it slows; a slowed whole run adds minutes of
# rows that do not change): 1 same-binary compare and 1 catch per factor,
# two whole runs and two of the queue rows: 1069 s measured on 2 cores at
# load 30-87 (the whole runs took 323 and 365 s there, over the limit).
# GATE_FULL=1, the issue's full strength: GATE_RUNS=11 (10 same-binary
# compares), GATE_SLOW_RUNS=5 of the whole suite per factor: 21 runs, about
# two hours here; not for a shared machine's every build. Every run's JSON and output stay in WORK_DIR; the HTML reports of
# the first compare of each kind are WORK_DIR/report-*/index.html.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 QFLOW_BENCH WORK_DIR" >&2
    exit 2
fi
bench=$1
work=$2
mkdir -p "$work"
if [ "${GATE_FULL:-0}" = 1 ]; then
    runs=${GATE_RUNS:-11}
    slow_runs=${GATE_SLOW_RUNS:-5}
    slow_filter=${GATE_SLOW_FILTER:-}
else
    runs=${GATE_RUNS:-2}
    slow_runs=${GATE_SLOW_RUNS:-1}
    slow_filter=${GATE_SLOW_FILTER-'^queue\.'}
fi
factors=${GATE_FACTORS:-1.3 3.5}
# The factors a miss of fails the test: all of them. Ratios to baselines
# alone could not separate a 1.3x change from the noise on this 2-core
# machine under load (perf/README.md, "need"); qflow's own CPU time per
# item, judged beside the old build run live (--base-bin), does: caught 4 of
# 4, the same binary passing 3 of 3 (README, "The regression gate"). Four
# catches bound the catch rate only loosely (above about 50% at 95%
# confidence): a red gate from a missed 1.3x stays possible, and its log
# says which factor and row. GATE_REQUIRE=3.5 reports 1.3x without
# requiring it.
require=${GATE_REQUIRE-$factors}
required() {
    for r in $require; do
        [ "$r" = "$1" ] && return 0
    done
    return 1
}
limit=${GATE_RUN_LIMIT:-300}
hard_limit=${GATE_RUN_HARD_LIMIT:-900}
over_target=0
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
echo "gate-test: $runs runs of the same binary, $slow_runs slowed run(s) per factor ($factors)${slow_filter:+, slowed runs filtered to '$slow_filter'}"

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
    if [ "$secs" -gt "$hard_limit" ]; then
        echo "gate-test: FAILED: run $name took $secs s (hard limit $hard_limit s)"
        status=1
    elif [ "$secs" -gt "$limit" ]; then
        echo "gate-test: over the target: run $name took $secs s (target $limit s; load" \
            "average $(uptime | sed 's/.*load average: //'))"
        over_target=$((over_target + 1))
    fi
}

summary() { # the verdict counts, WORSE and not judged rows, confirmations of a log
    grep -E '^  qflow rows:|=> (WORSE|NOT JUDGED)|WORSE, then|confirmed:' "$1" |
        sed 's/^ */      /'
}

run run1
echo "  run1 (the base): exit $rc, $secs s"
if [ "$rc" -ne 0 ]; then
    tail -30 "$work/run1.log"
    echo "gate-test: FAILED: the base run"
    exit 1
fi
i=2
while [ "$i" -le "$runs" ]; do
    [ "$i" -eq 2 ] && rep="--report $work/report-same" || rep=""
    # shellcheck disable=SC2086 # rep is two words or none
    run "run$i" --compare "$work/run1.json" --base-bin "$bench" $rep
    same_n=$((same_n + 1))
    if [ "$rc" -eq 0 ]; then
        same_ok=$((same_ok + 1))
        echo "  same binary, run$i against run1: exit 0, $secs s"
    else
        echo "  same binary, run$i against run1: exit $rc: FAILED, $secs s"
        status=1
    fi
    summary "$work/run$i.log"
    i=$((i + 1))
done

catch_report=""
for f in $factors; do
    caught=0
    k=1
    while [ "$k" -le "$slow_runs" ]; do
        name=slow$f-$k
        [ "$k" -eq 1 ] && rep="--report $work/report-slow$f" || rep=""
        # shellcheck disable=SC2086
        if [ -n "$slow_filter" ]; then
            QFLOW_BENCH_SLOWDOWN=$f run "$name" --filter "$slow_filter" \
                --compare "$work/run1.json" --base-bin "$bench" $rep
        else
            QFLOW_BENCH_SLOWDOWN=$f run "$name" --compare "$work/run1.json" --base-bin "$bench" \
                $rep
        fi
        if [ "$rc" -eq 1 ]; then
            caught=$((caught + 1))
            echo "  qflow ${f}x slower, $name against run1: exit 1 (caught), $secs s"
        elif required "$f"; then
            echo "  qflow ${f}x slower, $name against run1: exit $rc: NOT CAUGHT, $secs s"
            status=1
        else
            echo "  qflow ${f}x slower, $name against run1: exit $rc: not caught (not" \
                "required: GATE_REQUIRE='$require'), $secs s"
        fi
        summary "$work/$name.log"
        k=$((k + 1))
    done
    catch_report="$catch_report, ${f}x caught $caught of $slow_runs"
done
stop_load

echo "gate-test: same binary $same_ok of $same_n compares passed$catch_report;" \
    "slowest run $slowest s ($over_target over the $limit s target)," \
    "whole test $(($(date +%s) - start)) s" \
    "(background load: $([ "${GATE_LOAD:-1}" != 0 ] && echo "one yes per CPU" || echo none);" \
    "load average $(uptime | sed 's/.*load average: //'))"
[ "$status" -eq 0 ] && echo "gate-test: OK"
[ "$status" -ne 0 ] && echo "gate-test: FAILED"
exit $status
