/* sched_idle.pml - the worker pool's sleep/wake protocol
 * (runtime/sched/qf_scheduler.c: search(), idle_wait(), signal_work()),
 * model-checked with spin for lost wakes.
 *
 * NW workers take tasks from a shared queue (the global queue and the
 * other workers' rings, abstracted as one count). A worker with nothing to
 * do searches (counted in `searching`), then prepares the idle event count
 * (sleepers++, ticket = seq), clears `waking`, looks once more and sleeps
 * until seq moves. NP pushers each publish one task, then signal: unless a
 * worker is searching or one is already being woken (`waking`), they claim
 * `waking` and notify the event count (seq++ and wake, if anyone sleeps).
 *
 * Memory model: as in fifo_consumers.pml, one shared access per statement
 * in an interleaving order; the C code orders each store-then-load pair
 * here with seq_cst operations or full fences.
 *
 * Checked: once every pusher is done and nothing can move (spin's
 * `timeout`), no task is left in the queue: no task waits while every
 * worker sleeps.
 */
#ifndef NW
#define NW 2
#endif
#ifndef NP
#define NP 3
#endif

byte queued = 0;      /* tasks published and not taken */
byte searching = 0;
bool waking = 0;
byte sleepers = 0;
byte seq = 0;         /* the event count (mod 256; small here) */
byte pushed = 0;
byte taken = 0;

proctype Worker()
{
    byte ticket;
    bool got;
loop:
    /* look: take a task if there is one */
    atomic { if :: queued > 0 -> queued--; taken++; got = 1 :: else -> got = 0 fi };
    if
    :: got -> got = 0; goto loop          /* ran it */
    :: else
    fi;
    /* search: counted, one more look */
    searching++;
    atomic { if :: queued > 0 -> queued--; taken++; got = 1 :: else -> got = 0 fi };
    searching--;
    if
    :: got -> got = 0; goto loop
    :: else
    fi;
    /* idle_wait: announce, clear waking, last look, sleep */
    atomic { sleepers++; ticket = seq };
    waking = 0;
    if
    :: queued > 0 -> sleepers--; goto loop      /* work visible: cancel */
    :: else
    fi;
end_sleep:
    (seq != ticket);                            /* futex wait on seq */
    sleepers--;
    ticket = 0;
    goto loop
}

proctype Pusher()
{
    queued++;                                   /* publish */
    /* signal_work: fence, then the looks */
    if
    :: searching == 0 && waking == 0 ->
        atomic {
            if
            :: waking == 0 -> waking = 1        /* CAS 0 -> 1 */
            :: else -> goto done
            fi
        };
        /* qf_eventcount_notify: fence, sleepers? then seq++ and wake */
        if
        :: sleepers > 0 -> seq++
        :: else
        fi
    :: else
    fi;
done:
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
    timeout -> assert(queued == 0 && taken == NP)
}
