/* sched_idle.pml - the worker pool's sleep/wake protocol
 * (runtime/sched/qf_scheduler.c: worker_main(), search(), found_work(),
 * idle_wait(), signal_work(), pop_global()), model-checked with spin for
 * lost wakes.
 *
 * NW workers take tasks from the global queue (`queued`) and from the
 * workers' local rings (`inring`, one count: a ring's tasks can be taken
 * by its owner or stolen by any other worker). A look takes one task, or
 * two from the global queue: one to run, one into the taker's ring (its
 * batch), after which pop_global() signals. A worker with nothing to do
 * searches (counted in `searching` unless half the workers already are;
 * one look here stands for the search's rounds, however many its adaptive
 * budget allows: the protocol's safety rests on the last look below, not
 * on how long a search lasts), then prepares the idle event count
 * (sleepers++, ticket = seq), clears
 * `waking`, looks once more and sleeps in a futex wait on seq. NP pushers
 * each publish one task, then signal: unless a worker is searching or a
 * wake is under way (`waking`), they claim `waking` and notify the event
 * count: seq++, then a futex wake of ONE waiter in the kernel (`tokens`),
 * not of every sleeper. Which one is not modelled: the C code prefers a
 * tagged sleeper (the last to sleep on the pusher's CPU) and wakes any one
 * when that one is not in the kernel, so one is woken if any is there,
 * as here. The push and its signal are separate steps here, so a signal
 * run later than the push (after a waker's DONE) is covered too; one
 * deferred signal covering two pushes (qf_scheduler.c, push_from_outside)
 * is not modelled: the worker it wakes hands over for what it leaves.
 *
 * A task run may take for ever (up to NLONG of them): the worker never
 * comes back. A worker that has found a task and came back from the idle
 * wait clears `waking` before it runs the task; then it, or the last
 * counted searcher that found one, looks again and signals if work waits
 * (the hand-over). Seeded bugs: CLEAR=0 is the old behaviour, `waking`
 * kept set while the found task runs; HANDOVER=0 clears it but wakes no
 * one for the work that is left. check.sh runs both and expects spin to
 * find the lost wake.
 *
 * Memory model: as in fifo_consumers.pml, one shared access per statement
 * in an interleaving order; the C code orders each store-then-load pair
 * here with seq_cst operations or full fences.
 *
 * Checked: once every pusher is done and nothing can move (spin's
 * `timeout`), no task is left waiting unless every worker is inside a task
 * that runs for ever: no task waits while a worker sleeps.
 */
#ifndef NW
#define NW 2
#endif
#ifndef NP
#define NP 3
#endif
#ifndef NLONG
#define NLONG 1 /* tasks that run for ever */
#endif
#ifndef CLEAR
#define CLEAR 1 /* 0: a seeded bug, the old behaviour: waking kept while the task runs */
#endif
#ifndef HANDOVER
#define HANDOVER 1 /* 0: a seeded bug, waking cleared but no hand-over wake */
#endif

byte queued = 0;   /* in the global queue */
byte inring = 0;   /* in local rings */
byte searching = 0;
bool waking = 0;
byte sleepers = 0; /* the event count's announced sleepers */
byte seq = 0;      /* the event count (mod 256; small here) */
byte in_kernel = 0; /* waiters inside futex_wait */
byte tokens = 0;   /* futex wakes not yet taken by a waiter */
byte pushed = 0;
byte taken = 0;
byte longs = 0;

/* qf_eventcount_notify(one): fence, sleepers? then seq++, futex_wake(1) */
inline notify()
{
    if
    :: sleepers > 0 ->
        seq++;
        atomic {
            if
            :: in_kernel > tokens -> tokens++
            :: else
            fi
        }
    :: else
    fi
}

/* signal_work(): fence, then the looks at searching and waking, the CAS */
inline signal()
{
    if
    :: searching == 0 ->
        if
        :: waking == 0 ->
            atomic {
                if
                :: waking == 0 -> waking = 1; claimed = 1
                :: else -> claimed = 0
                fi
            };
            if
            :: claimed -> claimed = 0; notify()
            :: else
            fi
        :: else
        fi
    :: else
    fi
}

/* A look: one task (global queue or a ring), or a batch of two from the
 * global queue (one kept in the taker's ring). */
inline look()
{
    atomic {
        if
        :: queued > 1 -> queued = queued - 2; inring++; taken++; got = 1; batch = 1
        :: queued > 0 -> queued--; taken++; got = 1
        :: inring > 0 -> inring--; taken++; got = 1
        :: else -> got = 0
        fi
    };
    if
    :: batch -> batch = 0; signal() /* pop_global: more than one worker can start */
    :: else
    fi
}

proctype Worker()
{
    byte ticket;
    bool got, batch, claimed, woken, counted, last;
loop:
    /* find_local */
    look();
    if
    :: got -> goto found
    :: else
    fi;
    /* search: counted unless half the workers already search */
    atomic {
        counted = searching == 0 || 2 * searching < NW;
        if
        :: counted -> searching++
        :: else
        fi
    };
    look();
    if
    :: counted -> atomic { searching--; last = got && searching == 0; counted = 0 }
    :: else
    fi;
    if
    :: got -> goto found
    :: else
    fi;
    /* idle_wait: announce, clear waking, last look, sleep */
    atomic { sleepers++; ticket = seq };
    waking = 0;
    if
    :: queued + inring > 0 -> atomic { sleepers--; woken = 1; ticket = 0 }; goto loop /* cancel */
    :: else
    fi;
    /* qf_eventcount_wait: futex_wait(&seq, ticket) */
    if
    :: atomic { seq == ticket -> in_kernel++ };
end_sleep:
        atomic { tokens > 0 -> tokens--; in_kernel-- }
    :: atomic { seq != ticket -> skip }
    fi;
    atomic { sleepers--; ticket = 0; woken = 1 };
    goto loop;
found:
    /* found_work: the clear, then the hand-over */
#if CLEAR
    if
    :: woken -> atomic { woken = 0; waking = 0; last = 1 }
    :: else
    fi;
#endif
#if HANDOVER
    if
    :: last ->
        last = 0;
        if
        :: queued + inring > 0 -> signal()
        :: else
        fi
    :: else
    fi;
#endif
    last = 0;
    /* run it: briefly, or for ever */
    if
    :: longs < NLONG -> longs++;
end_long:
        false
    :: true
    fi;
    goto loop
}

proctype Pusher()
{
    bool claimed;
    queued++; /* publish */
    signal();
    pushed++
}

init
{
    byte k;
    atomic {
        k = 0;
        do
        :: k < NW -> run Worker(); k++
        :: else -> break
        od;
        k = 0;
        do
        :: k < NP -> run Pusher(); k++
        :: else -> break
        od
    };
    (pushed == NP);
    timeout -> assert(queued + inring == 0 || longs == NW)
}
