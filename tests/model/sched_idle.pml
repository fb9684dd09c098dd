/* sched_idle.pml - the worker pool's sleep/wake protocol
 * (runtime/sched/qf_scheduler.c: worker_main(), search(), found_work(),
 * idle_wait(), signal_work(), pop_global(), with NAGAIN > 0
 * qf__push_again() and find_local(), and with NEXTSLOT=1 qf__schedule()'s
 * next slot, pick_local(), before_next() and rescue()), model-checked with
 * spin for lost wakes.
 *
 * NW workers take tasks from the global queue (`queued`) and from the
 * workers' local rings (`inring`, one count: a ring's tasks can be taken
 * by its owner or stolen by any other worker; only the quiet push below
 * needs to know whose ring a task is in). A look takes one task, or
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
 * Timers (NT > 0; qf_task_sleep_until(), fire_timers(), idle_wait()'s
 * deadline). NT armers each arm one timer: timer i falls due at time
 * i + 1 of a clock that a Clock process moves from 0 to NT + 1 whenever
 * it likes (time passing, abstracted). Arming is one step under
 * timer_lock: the heap changes and next_timer (the earliest armed
 * deadline, 255 for none) is published; after the unlock, an armer whose
 * timer became the earliest reads each worker's published sleep deadline
 * (sdl[], one read a step) and, if one is later than its timer, notifies
 * every sleeper (qf_eventcount_notify with all: the fence, then sleepers?
 * seq++ and wake all). A look fires the earliest due timer when the
 * published next_timer says one is due (fire_timers(): its task is woken
 * into the looking worker's next slot, which the worker runs next: here
 * the look finds it). idle_wait()'s last look counts a due timer as work;
 * after it the worker reads next_timer, publishes that as its deadline
 * (sdl), reads next_timer again and takes the earlier; its futex wait
 * also ends when the clock reaches that deadline (a wake the kernel sends
 * to a waiter that is timing out is lost with it, the worse case). Seeded
 * bugs: TNOTIFY=0 arms the earliest timer without the notify; TNORELOAD=1
 * leaves out the second read, so an arm that read the worker's old
 * deadline (earlier than its timer: no notify) is missed by a worker that
 * then sleeps with a later one. check.sh expects spin to find both.
 *
 * With EARLYSTOP=1 the clock may stop at any time, and the check is that
 * no timer due by then is unfired: a sleeper whose deadline is later than
 * a due timer's is caught too, not only one that sleeps for good.
 *
 * With ARMED=1 the NT timers are armed before the workers start: no
 * armers, a smaller state space, for runs that add the quiet push below
 * to timers (check.sh checks the arm's protocol with the quiet push too,
 * with armers, in a bitstate run).
 *
 * Runs again and the quiet push (NAGAIN > 0: that many runs again, all
 * workers together; qf__task_run(), qf__push_again(), qf__push_yielded(),
 * find_local()). A task that ran briefly may run again: it was woken
 * while it ran (qf__push_again()), or it yielded (qf__push_yielded():
 * behind the global queue, with its wake, when that holds tasks, else
 * qf__push_again()). qf__push_again() reads its worker's ring and, if it
 * is empty, pushes the task there without the wake (the quiet push) and
 * sets the worker's `quiet`; else it pushes with the wake (push_local).
 * Whose ring a task is in matters here, so each worker's ring is counted
 * (ring[], inring their sum): search()'s look takes from its own ring or
 * steals from another's (at these counts half and one more: a single
 * task, or two, one run and one kept in the stealer's ring), and
 * find_local()'s pick (pick()) fires a due timer and takes its task, takes
 * from the global queue (the fairness tick, or after an empty ring), from
 * its own ring (`from_ring`), or rescues another worker's ring (all of it:
 * one to run, the rest into its own). The ticks are not counted: any pick
 * may be a tick's, so these come in any order. Another worker may steal
 * the pushed task at any time. A worker whose `quiet` pick found a task,
 * but not in its ring, signals before it runs that task (which may run
 * for ever), as find_local() does: the pushed task then waits behind it,
 * and only a woken worker would take it. Without next slots (NEXTSLOT=0)
 * the quiet push asks only for an empty ring: no task wakes another and a
 * fired timer's task is taken by the pick that fired it, so a slot would
 * always be empty; NEXTSLOT=1 below adds the slots. Without runs again
 * and next slots (the runs of the sections above) the rings stay one
 * count.
 *
 * Seeded bug: QUIETWAKE=0 leaves out find_local()'s wake, and spin finds
 * the pushed task waiting for good: the other worker's last look comes
 * while the task runs (nothing in the rings, the next timer not yet due),
 * then the task is pushed quietly, the clock reaches the timer, the
 * worker's pick fires it and runs its task for ever, and the other worker
 * reads next_timer only now, finds none armed, and sleeps with no
 * deadline. The same race with a task from the global queue loses
 * nothing (spin finds no counterexample without timers): that task's
 * push had its own wake, and the worker it woke looks after that push, so
 * it finds the global task or, taken, the pushed one. check.sh runs the
 * seeded bug and expects spin to find it.
 *
 * Next slots (NEXTSLOT=1; qf__schedule(), next_take(), pick_local(),
 * before_next(), rescue(), search(), found_work()). Each worker has a next
 * slot holding at most one task (slot[]; inslot their sum), and the rings
 * are counted per worker, as for runs again. A task made runnable on a
 * worker thread goes into that worker's slot, and the slot's previous
 * task into its ring with a signal (qf__push_local()): the task of every
 * timer the worker fires (fire_timers(), at the start of each pick and of
 * each search round), and, NWAKE times in all, a parked task woken by a
 * task that ran briefly. A pick keeps pick_local()'s order: the timers;
 * then the fairness tick's look at the global queue, a rescue, or neither
 * (the ticks are not counted, so either may come on any pick); then the
 * slot (or, its streak used up while other work waits, the slot's task
 * behind the ring and the ring's oldest); the own ring; the global queue.
 * A rescue takes another worker's ring and its slot. When the tick or a
 * rescue supplied the task, before_next() moves the slot's task to the
 * ring with a signal. A search round takes the slot first. No steal, no
 * last look before the sleep (work_visible()) and no hand-over look sees a
 * slot: that is why a task left in one waits for good once its worker
 * runs a task for ever while the others sleep. The hand-over leaves the
 * found task in the slot during its wake, where a rescue may take it (the
 * worker then picks again); the quiet push also asks for an empty slot;
 * and the final check counts a task in a slot as waiting.
 *
 * Seeded bug: BEFORENEXT=0 is the old pick_local(), which ran the tick's
 * or the rescue's task and left the slot's task where it was. spin finds
 * it three ways (check.sh runs each): with a timer (NT=1), a worker's
 * pick fires the due timer into its slot, then, on the tick, takes the
 * pushed task from the global queue, which runs for ever, while the other
 * worker, which found nothing and read next_timer after the fire, sleeps
 * with no deadline; with a wake (NP=2 NWAKE=1), the slot's task was woken
 * by the task that ran before the tick's (tests/sched/test_next_slot.c's
 * case); with two wakes (NWAKE=2), a worker rescues the other's slot,
 * whose task runs for ever, and leaves its own slot's task behind it.
 *
 * Not modelled with next slots: rescues only of a stalled worker, and only
 * every RESCUE_EVERY-th pick (here any worker on any pick: more runs, not
 * fewer); the rescue's two steps, the other's ring then its slot (one
 * step here); the wakes past QF__NEXT_SLOT_WAKES in one poll, whose
 * displaced task goes to the global queue (here all to the ring; both
 * signal); and a task that wakes another into its slot and then runs for
 * ever: the woken task waits behind it and no sleeping worker is woken
 * for it. That is the design (a waker and the task it wakes run back to
 * back; a rescue reaches the slot only while other workers pick), and the
 * model with such a wake finds the stranded task at once, so it has none.
 *
 * Checked: once every pusher and armer is done and nothing can move
 * (spin's `timeout`, the clock at its end, so every armed timer is due),
 * no task is left waiting (in the global queue, a ring or, with
 * NEXTSLOT=1, a next slot) and every timer has fired, unless every worker
 * is inside a task that runs for ever: no task waits while a worker
 * sleeps, and no due timer waits while a worker sleeps.
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
#ifndef NT
#define NT 0 /* timers (armers) */
#endif
#ifndef TNOTIFY
#define TNOTIFY 1 /* 0: a seeded bug, arming the earliest timer wakes no sleeper */
#endif
#ifndef TNORELOAD
#define TNORELOAD 0 /* 1: a seeded bug, no second read of next_timer after publishing the deadline */
#endif
#ifndef EARLYSTOP
#define EARLYSTOP 0 /* 1: the clock may stop at any time; then no due timer may wait */
#endif
#ifndef NAGAIN
#define NAGAIN 0 /* runs again (qf__push_again(), qf__push_yielded()), all workers together */
#endif
#ifndef ARMED
#define ARMED 0 /* 1: the NT timers are armed before the workers start (no armers) */
#endif
#ifndef QUIETWAKE
#define QUIETWAKE 1 /* 0: a seeded bug, find_local() leaves out the quiet push's wake */
#endif
#ifndef NEXTSLOT
#define NEXTSLOT 0 /* 1: each worker's next slot (see "Next slots" above) */
#endif
#ifndef NWAKE
#define NWAKE 0 /* NEXTSLOT: wakes of a parked task into the waker's next slot, all workers together */
#endif
#ifndef BEFORENEXT
#define BEFORENEXT 1 /* 0: a seeded bug, the old pick_local(): a tick's or rescue's task leaves the slot's task behind it */
#endif
#if NW > 3
#error "at most 3 workers: a steal names the others as me + 1 and me + 2"
#endif
#define FOREVER 255
#define TEND (NT + 1) /* the clock's last time: every timer due */

byte queued = 0;   /* in the global queue */
byte inring = 0;   /* in local rings (all of them: ring[]'s sum) */
byte ring[NW];     /* in each worker's ring (NAGAIN > 0 only; else unused, all in inring) */
byte searching = 0;
bool waking = 0;
byte sleepers = 0; /* the event count's announced sleepers */
byte seq = 0;      /* the event count (mod 256; small here) */
byte in_kernel = 0; /* waiters inside futex_wait */
byte tokens = 0;   /* futex wakes not yet taken by a waiter */
byte pushed = 0;
byte taken = 0;
byte longs = 0;
byte now = 0;              /* the clock */
byte tstate[NT + 1];       /* timer i: 0 not armed, 1 armed, 2 fired */
byte next_timer = FOREVER; /* published under timer_lock: earliest armed deadline */
byte armed = 0;
byte fired = 0;
byte armers_done = 0;
byte sdl[NW];     /* each worker's published sleep deadline (FOREVER at first) */
byte allgen = 0; /* futex_wake(all) calls: each wakes the waiters then in the kernel */
byte again = 0;  /* runs again so far (up to NAGAIN) */
#if NEXTSLOT
byte slot[NW];    /* each worker's next slot: 1 when it holds a task */
byte inslot = 0;  /* slot[]'s sum: tasks waiting in next slots, seen by no look */
byte wakes = 0;   /* wakes into a next slot so far (up to NWAKE) */
#endif

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

/* The earliest armed timer's deadline, or FOREVER (under timer_lock). */
inline publish_next_timer()
{
    next_timer = FOREVER;
    ti = 0;
    do
    :: ti < NT ->
        if
        :: tstate[ti] == 1 && ti + 1 < next_timer -> next_timer = ti + 1
        :: else
        fi;
        ti++
    :: else -> break
    od;
    ti = 0
}

/* fire_timers() under timer_lock: the earliest armed timer (due, as the
 * caller saw next_timer <= now) fires: its task is woken into the firing
 * worker's next slot, and that worker runs it next. */
inline fire_earliest()
{
    tstate[next_timer - 1] = 2;
    fired++;
    publish_next_timer()
}

#if NEXTSLOT
/* v: another worker whose ring holds tasks, any one (NW <= 3). */
#define OTHER_RING(k) (NW > k && ring[(me + k) % NW] > 0) -> v = (me + k) % NW
/* v: another worker with tasks in its ring or its next slot: what a
 * rescue takes. */
#define OTHER_HOLDS(k) (NW > k && (ring[(me + k) % NW] > 0 || slot[(me + k) % NW])) -> v = (me + k) % NW

/* The pushes (qf__push_local(): into this worker's ring) counted in pend,
 * each with its signal, after the atomic step that made them. */
inline signals()
{
    do
    :: pend > 0 -> pend--; signal()
    :: else -> break
    od
}

/* fire_timers(): every due timer fires (the C wakes at most 32 per turn
 * and loops), and qf_task_wake() of its task, on a worker thread, is
 * qf__schedule(): into this worker's next slot, whose occupant, if any,
 * goes to the ring with a signal. Under timer_lock the due timers are
 * taken; the wakes come after the unlock, one by one; one atomic step
 * here, then the signals. */
inline fire_timers()
{
    atomic {
        do
        :: next_timer <= now ->
            tstate[next_timer - 1] = 2;
            fired++;
            publish_next_timer();
            if
            :: slot[me] -> ring[me]++; inring++; pend++ /* the occupant: qf__push_local() */
            :: else -> slot[me] = 1; inslot++
            fi
        :: else -> break
        od
    };
    signals()
}

/* A round of search(): fire_timers(), then the next slot first (a timer
 * that fired here put its task there), then, in any order, one task or a
 * batch of two from the global queue (pop_global: one kept in the taker's
 * ring), one from its own ring, or a steal (half of a ring and one more: a
 * single task, or two of which one is kept). No steal sees a next slot. */
inline look()
{
    fire_timers();
    atomic {
        if
        :: slot[me] -> slot[me] = 0; inslot--; got = 1
        :: else ->
            if
            :: queued > 1 -> queued = queued - 2; ring[me]++; inring++; got = 1; batch = 1
            :: queued > 0 -> queued--; got = 1
            :: ring[me] > 0 -> ring[me]--; inring--; got = 1
            :: OTHER_RING(1)
            :: OTHER_RING(2)
            :: else -> got = 0
            fi;
            if
            :: v < NW && ring[v] > 1 -> ring[v] = ring[v] - 2; ring[me]++; inring--; got = 1
            :: v < NW && ring[v] == 1 -> ring[v] = 0; inring--; got = 1
            :: else
            fi
        fi;
        v = NW
    };
    if
    :: batch -> batch = 0; signal() /* pop_global: more than one worker can start */
    :: else
    fi
}

/* pick_local(), in its order: fire_timers(); then the fairness tick's look
 * at the global queue, or a rescue, or neither (the ticks are not counted:
 * either may come on any pick, and a rescue may take any other worker,
 * stalled or not); then the next slot (or, its streak used up while
 * other work waits, the slot's task goes behind the ring and the ring's
 * oldest is taken); then its own ring; then the global queue. A rescue
 * takes the other worker's ring (one to run, the rest into this worker's
 * ring) and its next slot (behind them, with a signal; the task to run
 * when the ring was empty). When the tick or a rescue supplied the task,
 * before_next() moves the next slot's task to the ring with a signal
 * (BEFORENEXT=0 leaves it in the slot: the seeded bug). The C takes the
 * other's ring and its slot in two steps; one here. */
inline pick()
{
    fire_timers();
    atomic {
        if
        :: queued > 1 -> queued = queued - 2; ring[me]++; inring++; got = 1; batch = 1; first = 1
        :: queued > 0 -> queued--; got = 1; first = 1
        :: OTHER_HOLDS(1)
        :: OTHER_HOLDS(2)
        :: true ->
            if
            :: slot[me] -> slot[me] = 0; inslot--; got = 1
            :: slot[me] && (ring[me] > 0 || queued > 0) -> /* the streak used up */
                slot[me] = 0; inslot--; got = 1; from_ring = 1; pend++
            :: !slot[me] && ring[me] > 0 -> ring[me]--; inring--; got = 1; from_ring = 1
            :: !slot[me] && ring[me] == 0 && queued > 1 ->
                queued = queued - 2; ring[me]++; inring++; got = 1; batch = 1
            :: !slot[me] && ring[me] == 0 && queued > 0 -> queued--; got = 1
            :: else -> got = 0
            fi
        fi;
        if
        :: v < NW -> /* rescue() */
            if
            :: ring[v] > 0 ->
                ring[me] = ring[me] + ring[v] - 1; inring--; ring[v] = 0;
                if
                :: slot[v] -> slot[v] = 0; inslot--; ring[me]++; inring++; pend++
                :: else
                fi
            :: else -> slot[v] = 0; inslot--
            fi;
            got = 1; first = 1
        :: else
        fi;
        v = NW;
#if BEFORENEXT
        if
        :: first && slot[me] -> slot[me] = 0; inslot--; ring[me]++; inring++; pend++ /* before_next() */
        :: else
        fi;
#endif
        first = 0
    };
    if
    :: batch -> batch = 0; signal() /* pop_global: more than one worker can start */
    :: else
    fi;
    signals()
}
#elif NAGAIN > 0
/* v: another worker whose ring holds tasks, any one (NW <= 3). */
#define OTHER_RING(k) (NW > k && ring[(me + k) % NW] > 0) -> v = (me + k) % NW

/* A look of search(): a due timer's task; one task, or a batch of two,
 * from the global queue (pop_global: one kept in the taker's ring); one
 * from its own ring (pop_local); or a steal from another's ring (half of
 * it and one more, at these counts: one task, or two of which one is kept
 * in the stealer's ring). */
inline look()
{
    atomic {
        if
        :: next_timer <= now -> fire_earliest(); got = 1
        :: queued > 1 -> queued = queued - 2; ring[me]++; inring++; taken++; got = 1; batch = 1
        :: queued > 0 -> queued--; taken++; got = 1
        :: ring[me] > 0 -> ring[me]--; inring--; taken++; got = 1
        :: OTHER_RING(1)
        :: OTHER_RING(2)
        :: else -> got = 0
        fi;
        if
        :: v < NW && ring[v] > 1 -> ring[v] = ring[v] - 2; ring[me]++; inring--; taken++; got = 1
        :: v < NW && ring[v] == 1 -> ring[v] = 0; inring--; taken++; got = 1
        :: else
        fi;
        v = NW
    };
    if
    :: batch -> batch = 0; signal() /* pop_global: more than one worker can start */
    :: else
    fi
}

/* find_local()'s pick_local(), in any order (the ticks and the clock are
 * not modelled: any pick may be a fairness tick's or a rescue's): a due
 * timer's task (fire_timers(), into the next slot, which this pick takes);
 * the global queue (pop_global, the fairness tick's or after an empty
 * ring); its own ring (from_ring); or a rescue of another worker's ring
 * (all of it: one to run, the rest into this worker's ring). */
inline pick()
{
    atomic {
        if
        :: next_timer <= now -> fire_earliest(); got = 1
        :: queued > 1 -> queued = queued - 2; ring[me]++; inring++; taken++; got = 1; batch = 1
        :: queued > 0 -> queued--; taken++; got = 1
        :: ring[me] > 0 -> ring[me]--; inring--; taken++; got = 1; from_ring = 1
        :: OTHER_RING(1)
        :: OTHER_RING(2)
        :: else -> got = 0
        fi;
        if
        :: v < NW -> ring[me] = ring[me] + ring[v] - 1; ring[v] = 0; inring--; taken++; got = 1
        :: else
        fi;
        v = NW
    };
    if
    :: batch -> batch = 0; signal() /* pop_global: more than one worker can start */
    :: else
    fi
}
#else
/* A look: a due timer's task, one task (global queue or a ring), or a batch of two from the
 * global queue (one kept in the taker's ring). Without runs again, which
 * ring a task waits in matters to nobody (every look sees every ring): one
 * count, inring, stands for them all. */
inline look()
{
    atomic {
        if
        :: next_timer <= now -> fire_earliest(); got = 1
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

inline pick()
{
    look()
}
#endif

proctype Worker(byte me)
{
    byte ticket, ti, dl = FOREVER, kgen, v = NW;
    bool got, batch, claimed, woken, counted, last, quiet, from_ring;
#if NEXTSLOT
    byte pend; /* pushes to this worker's ring whose signal is still to run */
    bool first; /* this pick's task came from the tick or a rescue */
#endif
loop:
    /* find_local: the pick, then the wake a quiet push left out when the
     * pick is not the pushed task (the pick with next slots sets
     * from_ring with or without runs again: cleared here) */
    pick();
#if NAGAIN > 0 || NEXTSLOT
#if QUIETWAKE
    if
    :: quiet && got && !from_ring -> signal()
    :: else
    fi;
#endif
    atomic { quiet = 0; from_ring = 0 };
#endif
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
    /* idle_wait: announce, clear waking, last look, the deadline, sleep */
    atomic { sleepers++; ticket = seq };
    waking = 0;
    if
    :: queued + inring > 0 || next_timer <= now ->
        atomic { sleepers--; woken = 1; ticket = 0; dl = FOREVER }; goto loop /* cancel */
    :: else
    fi;
    dl = next_timer;
    sdl[me] = dl;
#if !TNORELOAD
    if
    :: next_timer < dl -> dl = next_timer
    :: else
    fi;
#endif
    /* qf_eventcount_wait: futex_wait(&seq, ticket) until the deadline dl */
    if
    :: atomic { seq == ticket -> in_kernel++; kgen = allgen };
end_sleep:
        if
        :: atomic { tokens > 0 -> tokens--; in_kernel-- }
        :: atomic {
               kgen != allgen -> in_kernel--;
               if
               :: tokens > in_kernel -> tokens = in_kernel
               :: else
               fi
           }
        :: atomic {
               dl <= now -> in_kernel--;
               if
               :: tokens > in_kernel -> tokens = in_kernel
               :: else
               fi
           }
        fi
    :: atomic { seq != ticket -> skip }
    fi;
    atomic { sleepers--; ticket = 0; woken = 1; dl = FOREVER; kgen = 0 };
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
        :: queued + inring > 0 ->
#if NEXTSLOT
            /* found_work(): the task found waits in the next slot during
             * the wake, where a rescue may take it; then this worker
             * takes it back, or, taken, looks again. An occupied slot
             * (only with BEFORENEXT=0) keeps it in hand. */
            if
            :: slot[me] -> signal()
            :: else ->
                atomic { slot[me] = 1; inslot++ };
                signal();
                atomic {
                    if
                    :: slot[me] -> slot[me] = 0; inslot--
                    :: else -> last = 0; goto loop /* rescued: it runs elsewhere */
                    fi
                }
            fi
#else
            signal()
#endif
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
#if NEXTSLOT
    /* While it ran it may have woken a parked task (qf_task_wake() on a
     * worker thread, qf__schedule()): into this worker's next slot, whose
     * occupant goes to the ring with a signal. */
    if
    :: atomic {
           wakes < NWAKE -> wakes++;
           if
           :: slot[me] -> ring[me]++; inring++; pend++
           :: else -> slot[me] = 1; inslot++
           fi
       };
       signals()
    :: true
    fi;
#endif
#if NAGAIN > 0
    /* It ends, or it runs again (qf__task_run()): woken while it ran,
     * qf__push_again(); it yielded, qf__push_yielded(): behind the global
     * queue when that holds tasks, else qf__push_again(). Without next
     * slots the quiet push asks only for an empty ring; with them (a task
     * woken into the slot while this one ran), for an empty slot too. */
    if
    :: again < NAGAIN ->
        again++;
        if
        :: queued > 0 -> queued++; signal() /* yielded: push_global */
#if NEXTSLOT
        :: ring[me] == 0 && !slot[me] -> atomic { ring[me]++; inring++; quiet = 1 } /* the quiet push */
        :: ring[me] > 0 || slot[me] -> atomic { ring[me]++; inring++ }; signal() /* push_local */
#else
        :: ring[me] == 0 -> atomic { ring[me]++; inring++; quiet = 1 } /* the quiet push */
        :: ring[me] > 0 -> atomic { ring[me]++; inring++ }; signal() /* push_local */
#endif
        fi
    :: true
    fi;
#endif
    goto loop
}

proctype Pusher()
{
    bool claimed;
    queued++; /* publish */
    signal();
    pushed++
}

/* qf_eventcount_notify(all): fence, sleepers? then seq++, futex_wake(all):
 * every waiter in the kernel at that moment (and only those) leaves. */
inline notify_all()
{
    if
    :: sleepers > 0 ->
        seq++;
        allgen++
    :: else
    fi
}

/* qf_task_sleep_until(t, i + 1) of a task with no timer armed. */
proctype Armer(byte i)
{
    bool earliest, past;
    byte ti;
    atomic { /* timer_lock */
        tstate[i] = 1;
        armed++;
        publish_next_timer();
        earliest = next_timer == i + 1
    };
#if TNOTIFY
    if
    :: earliest ->
        /* sleeps_past(): any worker's published deadline later than i + 1 */
        ti = 0;
        past = 0;
        do
        :: ti < NW ->
            if
            :: sdl[ti] > i + 1 -> past = 1
            :: else
            fi;
            ti++
        :: else -> break
        od;
        if
        :: past -> notify_all()
        :: else
        fi
    :: else
    fi;
#endif
    armers_done++
}

/* Time passes, as far as the last deadline. */
proctype Clock()
{
    do
    :: now < TEND -> now++
#if EARLYSTOP
    :: break /* time stops here: the checks below see what is due and not fired */
#endif
    :: else -> break
    od
}

init
{
    byte k, ti;
    atomic {
        k = 0;
        do
        :: k < NW -> sdl[k] = FOREVER; run Worker(k); k++
        :: else -> break
        od;
        k = 0;
        do
        :: k < NP -> run Pusher(); k++
        :: else -> break
        od;
        k = 0;
        do
#if ARMED
        :: k < NT -> tstate[k] = 1; armed++; armers_done++; k++
#else
        :: k < NT -> run Armer(k); k++
#endif
        :: else -> break
        od;
#if ARMED
        publish_next_timer();
#endif
        if
        :: NT > 0 -> run Clock()
        :: else
        fi
    };
    (pushed == NP && armers_done == NT);
    timeout ->
#if EARLYSTOP
    /* Late, not only lost: a timer due at the time reached is fired. */
    k = 0;
    do
    :: k < NT -> assert(longs == NW || !(tstate[k] == 1 && k + 1 <= now)); k++
    :: else -> break
    od;
#if NEXTSLOT
    assert(queued + inring + inslot == 0 || longs == NW)
#else
    assert(queued + inring == 0 || longs == NW)
#endif
#else
#if NEXTSLOT
    /* A task in a next slot waits too, though no look sees it. */
    assert((queued + inring + inslot == 0 && fired == armed) || longs == NW)
#else
    assert((queued + inring == 0 && fired == armed) || longs == NW)
#endif
#endif
}
