#!/bin/sh
# Model-check the wait/wake protocols (the FIFO engine and its ring's turns,
# the engine's held wakes and the room a consumer thread leaves to a
# returning task, the worker pool with its timers and quiet pushes,
# a task's join, the wait list's cancel, the serving batcher's timer) with
# spin: every model, at the bounds below, must have no invalid end state
# (nobody asleep for good) and no assertion violation. Exhaustive search
# (bitstate where marked, see run()); each run takes seconds. A model run
# with a seeded bug (`seeded`) must fail instead.
# Usage: check.sh [models dir]. Exit 77 (skipped) without spin.
set -eu
dir=$(cd "${1:-$(dirname "$0")}" && pwd)
command -v spin >/dev/null 2>&1 || { echo "spin not installed: skipped"; exit 77; }
cc=${CC:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
# run MODEL [spin -D defines]: exhaustive. BITSTATE=1 before it: a
# bitstate (supertrace) search of a 2^25-bit table, for bounds too large to
# search exhaustively in CI's time.
run() {
    model=$1
    shift
    cp "$dir/$model.pml" "$work/"
    if [ "${BITSTATE:-0}" = 1 ]; then flags="-DBITSTATE" pan_args="-w25"; else flags="" pan_args=""; fi
    (cd "$work" && spin "$@" -a "$model.pml" >/dev/null &&
        $cc -O2 -w -DSAFETY $flags -o pan pan.c && ./pan -m1000000 $pan_args >out.txt 2>&1) || true
    line=$(grep -E 'errors: [0-9]+' "$work/out.txt" || echo "no result")
    states=$(grep -E 'states, stored' "$work/out.txt" | awk '{print $1}')
    case "$line" in
    *"errors: 0"*) echo "ok   $model $* ($states states)" ;;
    *) echo "FAIL $model $*: $line"; cat "$work/out.txt"; status=1 ;;
    esac
}
# seeded MODEL [defines]: a model with a bug seeded by its defines; spin
# must find it (a model that passes with the bug checks nothing).
seeded() {
    model=$1
    shift
    cp "$dir/$model.pml" "$work/"
    (cd "$work" && spin "$@" -a "$model.pml" >/dev/null &&
        $cc -O2 -w -DSAFETY -o pan pan.c && ./pan -m1000000 >out.txt 2>&1) || true
    line=$(grep -E 'errors: [0-9]+' "$work/out.txt" || echo "no result")
    case "$line" in
    *"errors: 0"* | "no result") echo "FAIL $model $*: the seeded bug was not found ($line)"; status=1 ;;
    *) echo "ok   $model $* (seeded bug found)" ;;
    esac
}
run fifo_consumers -DNP=1 -DNC=2
run fifo_consumers -DNP=1 -DNC=2 -DHINT=0
BITSTATE=1 run fifo_consumers -DNP=2 -DNC=2
run fifo_consumers -DNP=2 -DNC=2 -DCLOSE=0
BITSTATE=1 run fifo_consumers -DNP=3 -DNC=3 -DCLOSE=0
seeded fifo_consumers -DNP=2 -DNC=2 -DCLOSE=0 -DRUN=0
run ring_turns -DNP=2 -DNC=2 -DITER=2 -DS=2
run ring_turns -DNP=2 -DNC=2 -DITER=2 -DS=2 -DBULK=1
run ring_turns -DNP=2 -DNC=2 -DITER=3 -DS=2 -DW=8
run ring_turns -DNP=2 -DNC=2 -DITER=3 -DS=4 -DCAP=3
BITSTATE=1 run ring_turns -DNP=3 -DNC=2 -DITER=2 -DS=2 -DW=8
BITSTATE=1 run ring_turns -DNP=2 -DNC=2 -DITER=3 -DS=4 -DCAP=3 -DTMAX=3 -DBULK=1
seeded ring_turns -DEARLY_MARK=1
seeded ring_turns -DREAD_AFTER_CLAIM=1
seeded ring_turns -DFLAG_MARK=1
run ring_tombs -DNP=2 -DNC=2 -DITER=2
run ring_tombs -DNP=3 -DNC=1 -DITER=2
seeded ring_tombs -DREAD_AFTER_CLAIM=1
run fifo_requests -DNP=2 -DCAP=1
run fifo_requests -DNP=3 -DCAP=2
run fifo_refill
run fifo_refill -DNQ=1 -DNC=2
run fifo_refill -DCAP=1 -DK=3 -DNQ=1 -DCLOSE=1
seeded fifo_refill -DBUG=1
seeded fifo_refill -DBUG=2
seeded fifo_refill -DBUG=3
run fifo_holders -DNC=3 -DMIN=3
run fifo_holders -DNC=3 -DMIN=4 -DG0=1 -DG1=2 -DG2=3 -DAV=2
run fifo_held -DNP=3 -DNWD=1
run fifo_held -DNP=3 -DNWD=3 -DCLOSE=0
run fifo_held -DNP=4 -DWD=0 -DCLOSE=0
run fifo_held -DNP=2 -DNE=2 -DNWD=1
run fifo_held -DNP=2 -DNE=3 -DCLOSE=0
run fifo_held -DNC=2 -DCTASK=1 -DNWD=1 -DCLOSE=0
seeded fifo_held -DNOCLOSEREL=1 -DWD=0
seeded fifo_held -DHOLDCLOSED=1 -DWD=0
seeded fifo_held -DNOWDREL=1 -DCLOSE=0 -DNWD=1
seeded fifo_held -DUNCOUNTED=1 -DCLOSE=0 -DNWD=1 -DSTRICT=0 -DWDFIX=0
seeded fifo_held -DNOAGE=1 -DNP=4 -DCLOSE=0 -DWD=0
seeded fifo_held -DNOFINREL=1 -DNP=4 -DNC=2 -DCTASK=1 -DWD=0 -DCLOSE=0 -DHOLD_MAX=3
seeded fifo_held -DWDFIX=0 -DCLOSE=0 -DNWD=1
run fifo_held -DLEAVE=1 -DCAP=2 -DNP=2 -DNE=2 -DNWD=1
run fifo_held -DLEAVE=1 -DCAP=2 -DNP=2 -DNE=3 -DNWD=1 -DCLOSE=0
run fifo_held -DLEAVE=1 -DCAP=2 -DNP=2 -DNE=2 -DNC=2 -DCTASK=1 -DNWD=1 -DCLOSE=0
run fifo_held -DLEAVE=1 -DCAP=2 -DNP=2 -DNE=2 -DNC=2 -DCTASK=0 -DNWD=1 -DCLOSE=0
BITSTATE=1 run fifo_held -DLEAVE=1 -DCAP=2 -DNP=3 -DNE=2 -DNWD=1
BITSTATE=1 run fifo_held -DLEAVE=1 -DCAP=3 -DOWED_MAX=3 -DNP=3 -DNE=2 -DNWD=1 -DCLOSE=0
seeded fifo_held -DLEAVE=1 -DCAP=2 -DNP=2 -DNE=2 -DNWD=1 -DNOREPORTPASS=1
seeded fifo_held -DLEAVE=1 -DCAP=2 -DNP=2 -DNE=2 -DNWD=1 -DREADFIRST=1
run sched_idle -DNW=2 -DNP=2
BITSTATE=1 run sched_idle -DNW=2 -DNP=3
BITSTATE=1 run sched_idle -DNW=3 -DNP=2 -DNLONG=2
seeded sched_idle -DNW=2 -DNP=2 -DCLEAR=0
seeded sched_idle -DNW=2 -DNP=2 -DHANDOVER=0
run sched_idle -DNW=2 -DNP=0 -DNT=1
run sched_idle -DNW=1 -DNP=1 -DNT=2
BITSTATE=1 run sched_idle -DNW=2 -DNP=0 -DNT=2
BITSTATE=1 run sched_idle -DNW=2 -DNP=1 -DNT=1
run sched_idle -DNW=2 -DNP=0 -DNT=1 -DEARLYSTOP=1
run sched_idle -DNW=1 -DNP=1 -DNT=2 -DEARLYSTOP=1
seeded sched_idle -DNW=2 -DNP=0 -DNT=1 -DTNOTIFY=0
seeded sched_idle -DNW=1 -DNP=0 -DNT=2 -DEARLYSTOP=1 -DTNORELOAD=1
seeded sched_idle -DNW=2 -DNP=0 -DNT=2 -DTNORELOAD=1
run sched_idle -DNW=2 -DNP=1 -DNAGAIN=2
run sched_idle -DNW=2 -DNP=0 -DNT=2 -DARMED=1 -DNAGAIN=2
BITSTATE=1 run sched_idle -DNW=2 -DNP=2 -DNAGAIN=1
BITSTATE=1 run sched_idle -DNW=2 -DNP=0 -DNT=2 -DNAGAIN=1
BITSTATE=1 run sched_idle -DNW=3 -DNP=0 -DNT=2 -DARMED=1 -DNAGAIN=1
seeded sched_idle -DNW=2 -DNP=0 -DNT=2 -DARMED=1 -DNAGAIN=1 -DQUIETWAKE=0
BITSTATE=1 run sched_idle -DNW=2 -DNP=1 -DNT=1 -DNEXTSLOT=1
BITSTATE=1 run sched_idle -DNW=2 -DNP=2 -DNWAKE=2 -DNEXTSLOT=1
BITSTATE=1 run sched_idle -DNW=2 -DNP=1 -DNT=1 -DARMED=1 -DNAGAIN=1 -DNWAKE=1 -DNEXTSLOT=1
seeded sched_idle -DNW=2 -DNP=1 -DNT=1 -DNEXTSLOT=1 -DBEFORENEXT=0
seeded sched_idle -DNW=2 -DNP=2 -DNWAKE=1 -DNEXTSLOT=1 -DBEFORENEXT=0
seeded sched_idle -DNW=2 -DNP=2 -DNWAKE=2 -DNEXTSLOT=1 -DBEFORENEXT=0
run task_join -DNJ=3 -DND=1
run task_join -DNJ=4 -DND=0
seeded task_join -DMARK=0
run waker_cancel -DROUNDS=3
seeded waker_cancel -DROUNDS=2 -DOLD=1
run serve_timer -DNS=2 -DROUNDS=2
run serve_timer -DNS=3 -DROUNDS=2
seeded serve_timer -DBUG=1
seeded serve_timer -DBUG=2
seeded waker_cancel -DROUNDS=2 -DOLD=2
exit $status
