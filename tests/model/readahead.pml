/* readahead.pml - the read-ahead helper's requests, their ownership and the
 * two event counts that put the helper and the requesters to sleep
 * (runtime/io/qf_readahead.c: helper(), take_batch(), qf__ahead_start(),
 * qf__ahead_finish(); the event count of coord/qf_waker.c), model-checked
 * with spin.
 *
 * NRQ requesters, ROUNDS rounds each, a fresh request every round (NRQ *
 * ROUNDS slots, nothing reused). A round: the request is made QUEUED and
 * pushed on the stack `pending` (the CAS loop as one step, the link store
 * before it included: nobody else sees the request before the push), then
 * notify(submitted, one); then finish: CAS QUEUED -> TAKEN (won: the
 * requester reads for itself and forgets the request), else, while the
 * state is RUNNING: prepare(done), load the state (not RUNNING: cancel),
 * wait(done, ticket), load the state again. Then it reads got/err, frees
 * the request and uses dst. The one helper, for ever: exchanges `pending`
 * with NULL (one step) and reverses the list it got into its batch (one
 * step per request: it reads and writes that request's `next`); with an
 * empty batch it prepares `submitted`, re-checks `pending` (non-empty:
 * cancel) and waits; else, for each request of the batch: reads its
 * `next`, CAS QUEUED -> RUNNING; won: the read (dst, got and err written,
 * one step), DONE stored, notify(done, all); lost: the request is TAKEN
 * and the helper frees it.
 *
 * The event count as in sched_idle.pml: prepare is sleepers++ then the
 * ticket load (two steps); cancel sleepers--; wait is the futex wait (its
 * load of seq and the kernel's check that seq still equals the ticket and
 * the sleep, one step: seq only grows, so the first check adds nothing;
 * the sleeper then blocks until a futex wake clears its in-kernel flag),
 * then sleepers--; notify is the fence and the load of sleepers (0: return,
 * no syscall), seq++, then the futex wake: of every sleeper in the kernel
 * for `done` (all), of the one (the helper) for `submitted`. Spurious
 * futex returns are not modelled (every wait is in a re-checking loop).
 * The helper's wait is a valid end state (it waits for work for ever); a
 * requester left in its wait is not.
 *
 * Not modelled: fork(). A child finishes the requests made before the
 * fork without looking at their state (qf_readahead.c: their generation is
 * older than the child's), so no interleaving with the parent's helper is
 * involved: that is a sequential argument, not a protocol.
 *
 * Memory model: one shared access per statement in an interleaving order
 * (sequential consistency). The C code relies on it for two store-then-
 * load pairs: pushing and loading `sleepers` (notify's fence) against
 * announcing and re-loading `pending` (prepare's seq_cst RMW); storing
 * DONE and loading `sleepers` against announcing and re-loading `state`.
 *
 * Checked: no requester asleep for good (no invalid end state); at the
 * end, once nothing can move, every request is freed and `pending` is
 * empty (nothing stranded while the helper sleeps); a request is freed at
 * most once, by its requester after DONE or by the helper after TAKEN, and
 * never touched after that (an assertion on every access); dst is written
 * only by the helper while the request is RUNNING, once, and used by the
 * requester only after it loaded DONE; a request taken back was never
 * written.
 *
 * Seeded bugs (BUG=n), each of which spin must find (check.sh):
 *   1 the helper notifies `done` before it stores DONE: a requester that
 *     announces itself in between sleeps for ever;
 *   2 a requester frees a request it took back (TAKEN) as well: the helper
 *     touches it after the free, or frees it twice;
 *   3 the helper sleeps without re-checking `pending` after its prepare: a
 *     request pushed in between (whose notify saw no sleeper) stays on the
 *     stack while it sleeps (its requester takes it back and does not
 *     wait, so the end check finds it, not a deadlock);
 *   4 a requester sleeps without re-loading the state after its prepare:
 *     a DONE stored and notified (to no sleeper) in between is missed;
 *   5 the helper reads the request's `next` after its DONE store, when
 *     the requester may have freed it.
 */
#ifndef NRQ
#define NRQ 2
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef BUG
#define BUG 0
#endif

#define NREQ (NRQ * ROUNDS)
#define NIL 255

/* request states (0: not made yet) */
#define QUEUED 1
#define RUNNING 2
#define DONE 3
#define TAKEN 4

byte state[NREQ];
byte next[NREQ];  /* link in `pending`, then in the helper's batch */
bit freed[NREQ];
bit wrote[NREQ];  /* dst, got and err written by the helper */
byte pending = NIL;

/* The event counts: announced sleepers, each sleeper's ticket and whether
 * it is in the futex wait. seq itself is not kept: it only grows (no wrap
 * at these bounds), so all that matters of a ticket is whether seq has
 * moved since it was taken: TK_NONE no ticket, TK_CUR seq still equals
 * it, TK_OLD a notify advanced seq since. */
#define TK_NONE 0
#define TK_CUR 1
#define TK_OLD 2
byte sub_sleepers = 0;
byte sub_tk = TK_NONE; /* the helper's ticket on `submitted` */
bit sub_inkern = 0;    /* the helper, asleep on `submitted` */
byte done_sleepers = 0;
byte done_tk[NRQ];
bit done_inkern[NRQ];

byte finished = 0;  /* requesters through all their rounds */

/* qf_eventcount_notify(&submitted, false) */
inline notify_submitted()
{
    if
    :: sub_sleepers > 0 ->
        atomic { /* seq++ */
            if
            :: sub_tk == TK_CUR -> sub_tk = TK_OLD
            :: else
            fi
        };
        sub_inkern = 0 /* futex wake of one: the helper is the only sleeper */
    :: else
    fi
}

/* qf_eventcount_notify(&done, true) */
inline notify_done()
{
    if
    :: done_sleepers > 0 ->
        atomic { /* seq++ */
            j = 0;
            do
            :: j < NRQ ->
                if
                :: done_tk[j] == TK_CUR -> done_tk[j] = TK_OLD
                :: else
                fi;
                j++
            :: else -> j = 0; break
            od
        };
        atomic {
            j = 0;
            do
            :: j < NRQ -> done_inkern[j] = 0; j++
            :: else -> j = 0; break
            od
        }
    :: else
    fi
}

active proctype helper()
{
    byte p = NIL, fifo = NIL, nx = NIL, a = NIL, j = 0;
    bit won = 0;
top:
    /* take_batch(): the exchange, then the reversal */
    atomic { p = pending; pending = NIL };
    do
    :: p != NIL ->
        atomic {
            assert(!freed[p] && state[p] != 0);
            nx = next[p];
            next[p] = fifo;
            fifo = p;
            p = nx;
            nx = NIL
        }
    :: else -> break
    od;
    if
    :: fifo == NIL ->
        /* prepare, re-check, wait */
        sub_sleepers++;
        sub_tk = TK_CUR; /* the ticket: seq now */
#if BUG != 3
        if
        :: pending != NIL -> atomic { sub_sleepers--; sub_tk = TK_NONE }; goto top /* cancel */
        :: else
        fi;
#endif
        if
        :: atomic { sub_tk == TK_CUR -> sub_inkern = 1 };
end_idle:
            (sub_inkern == 0)
        :: atomic { sub_tk == TK_OLD -> skip }
        fi;
        atomic { sub_sleepers--; sub_tk = TK_NONE };
        goto top
    :: else
    fi;
    a = fifo;
    fifo = NIL;
    do
    :: a != NIL ->
#if BUG != 5
        atomic { assert(!freed[a]); nx = next[a] };
#endif
        atomic {
            assert(!freed[a]);
            if
            :: state[a] == QUEUED -> state[a] = RUNNING; won = 1
            :: else -> won = 0
            fi
        };
        if
        :: won ->
            won = 0;
            /* run(): pread into dst, then got and err */
            atomic {
                assert(!freed[a] && state[a] == RUNNING && !wrote[a]);
                wrote[a] = 1
            };
#if BUG == 1
            notify_done();
            atomic { assert(!freed[a]); state[a] = DONE };
#else
            atomic { assert(!freed[a]); state[a] = DONE };
#if BUG == 5
            atomic { assert(!freed[a]); nx = next[a] };
#endif
            notify_done()
#endif
        :: else ->
#if BUG == 5
            atomic { assert(!freed[a]); nx = next[a] };
#endif
            atomic {
                assert(!freed[a] && state[a] == TAKEN && !wrote[a]);
                freed[a] = 1
            }
        fi;
        atomic { a = nx; nx = NIL }
    :: else -> break
    od;
    goto top
}

proctype requester(byte me)
{
    byte r = 0, a, s = 0;
    do
    :: r < ROUNDS ->
        a = me * ROUNDS + r;
        /* qf__ahead_start: a fresh request, pushed */
        atomic {
            assert(state[a] == 0 && !freed[a] && !wrote[a]);
            state[a] = QUEUED;
            next[a] = pending;
            pending = a
        };
        notify_submitted();
        /* qf__ahead_finish */
        atomic {
            assert(!freed[a]);
            if
            :: state[a] == QUEUED -> state[a] = TAKEN; s = TAKEN
            :: else -> s = state[a]
            fi
        };
        if
        :: s == TAKEN ->
            /* not started: the requester reads for itself into dst, which
             * nobody else writes; the helper frees the request */
            assert(!wrote[a]);
#if BUG == 2
            atomic { assert(!freed[a]); freed[a] = 1 };
#endif
            goto round_end
        :: else
        fi;
        do
        :: s == RUNNING ->
            done_sleepers++;
            done_tk[me] = TK_CUR; /* the ticket: seq now */
#if BUG != 4
            atomic { assert(!freed[a]); s = state[a] };
            if
            :: s != RUNNING -> atomic { done_sleepers--; done_tk[me] = TK_NONE }; break /* cancel */
            :: else
            fi;
#endif
            if
            :: atomic { done_tk[me] == TK_CUR -> done_inkern[me] = 1 };
                (done_inkern[me] == 0)
            :: atomic { done_tk[me] == TK_OLD -> skip }
            fi;
            atomic { done_sleepers--; done_tk[me] = TK_NONE };
            atomic { assert(!freed[a]); s = state[a] }
        :: else -> break
        od;
        assert(s == DONE);
        atomic { assert(!freed[a] && wrote[a]) }; /* got and err */
        atomic { assert(!freed[a]); freed[a] = 1 };
        assert(wrote[a]); /* the use of dst */
round_end:
        atomic { s = 0; r++ }
    :: else -> break
    od;
    finished++
}

init
{
    byte i = 0;
    atomic {
        do
        :: i < NREQ -> next[i] = NIL; i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < NRQ -> run requester(i); i++
        :: else -> i = 0; break
        od
    };
    (finished == NRQ); /* a requester asleep for good: an invalid end state */
    timeout ->
    do
    :: i < NREQ -> assert(freed[i] && state[i] != 0); i++
    :: else -> break
    od;
    assert(pending == NIL)
}
