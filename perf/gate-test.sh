#!/bin/sh
# gate-test.sh QFLOW_BENCH WORK_DIR - the regression gate with real runs.
#
# One run of the same-run pair queue.tput.batch32 qflow/mutex_cond is
# saved as the base; then
#   - the same binary is compared with the base 10 times in a row: every
#     compare must exit 0 (same, better or inconclusive; never WORSE);
#   - a qflow slowed down 2x (QFLOW_BENCH_SLOWDOWN=2: its FIFO path does
#     twice the work, see perf/impl_qflow.c) is compared 3 times: every
#     compare must exit 1 (WORSE).
# The defaults of --compare (threshold 10%, alpha 0.01) are what is tested.
# Time budgets are raised 20x (--budget-scale 20): a repetition cut by its
# budget is never judged, and at load 20 on 2 cores a quick batch32
# repetition of the slowed qflow takes over 2 s against a budget of 1 s.
# GATE_REPS (default 13) repetitions per run; measured on a 2-core machine
# at load 8 (debugoptimized): p(worse) of the same binary 0.28-0.97, of the
# slowed one 0.001-0.003; at load 16 (release): 0.27-1.0 and < 0.001. About 2 minutes (7 at load 20); run in
# release builds by .ci/run (suite 'perfgate'). Every run's JSON and output
# stay in WORK_DIR.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 QFLOW_BENCH WORK_DIR" >&2
    exit 2
fi
bench=$1
work=$2
mkdir -p "$work"
filter='queue.tput.batch32/(qflow|mutex_cond)$'
reps=${GATE_REPS:-13}
threshold=${GATE_THRESHOLD:-10%}
status=0

run() { # run NAME [ARGS...]: run the bench, output in $work/NAME.log; returns its status
    name=$1
    shift
    "$bench" --quick --filter "$filter" --reps "$reps" --threshold "$threshold" --budget-scale 20 \
        --json "$work/$name.json" "$@" >"$work/$name.log" 2>&1
}

verdict() { # the verdict lines of a compare
    grep -E '^  queue\.tput\.batch32 +(mutex_cond|=>)' "$work/$1.log" | sed 's/^ */    /'
}

if ! run base; then
    cat "$work/base.log"
    echo "gate-test: FAILED: the base run"
    exit 1
fi
grep -E '^  (qflow|mutex_cond) ' "$work/base.log" | sed 's/^/  base: /'

i=1
while [ $i -le 10 ]; do
    run "same-$i" --compare "$work/base.json"
    rc=$?
    echo "  same binary, compare $i: exit $rc"
    verdict "same-$i"
    if [ $rc -ne 0 ]; then
        cat "$work/same-$i.log"
        echo "gate-test: FAILED: the same binary compared with itself exited $rc"
        status=1
    fi
    i=$((i + 1))
done

i=1
while [ $i -le 3 ]; do
    QFLOW_BENCH_SLOWDOWN=2 run "slow-$i" --compare "$work/base.json"
    rc=$?
    echo "  qflow slowed down 2x, compare $i: exit $rc"
    verdict "slow-$i"
    if [ $rc -ne 1 ]; then
        cat "$work/slow-$i.log"
        echo "gate-test: FAILED: a 2x slower qflow was not judged worse (exit $rc)"
        status=1
    fi
    i=$((i + 1))
done

[ $status -eq 0 ] && echo "gate-test: OK (10 same-binary compares passed, 3 slowed compares failed)"
exit $status
