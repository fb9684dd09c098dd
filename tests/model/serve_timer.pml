/* serve_timer.pml - the serving batcher's level timer going to sleep when
 * no request is at a level with a timeout, and the submitters that wake it
 * (runtime/serve/qf_serve_policy.c, "An idle batcher costs no wakes"),
 * model-checked with spin.
 *
 * The timer, for ever: sweeps (nothing to model: the requests it times out
 * are what the taker below takes); stores idle = 1; reads the depth; at 0
 * it waits on the condition variable while idle == 1 (the check under the
 * mutex, the wait releasing it in one step, as pthread_cond_wait does),
 * else it takes idle back with a CAS and goes round again (its timed sleep
 * always ends, so it is not modelled). NS submitters, ROUNDS requests each:
 * depth += 1 (the request is in its ring from here on), then the kick:
 * load idle; 1 -> CAS it to 0, and if that won, signal under the mutex. A
 * taker (consumers and the timer's timeouts) takes requests while there
 * are some and may stop at any moment, so that runs end with requests
 * still queued.
 *
 * Memory model: one shared access per statement in an interleaving order,
 * which is sequential consistency: the C code makes the four accesses that
 * matter (idle store and depth load in the timer, depth increment and idle
 * load in a submitter) seq_cst for that reason.
 *
 * Checked: when nothing can move any more (spin's timeout), the timer is
 * not asleep on the condition variable while requests are queued: a
 * submitter always woke it. Seeded bugs: BUG=1, the timer reads the depth
 * before it stores idle; BUG=2, a submitter kicks before its increment.
 * check.sh expects spin to find both.
 */
#ifndef NS
#define NS 2
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef BUG
#define BUG 0
#endif

byte depth = 0;
bit idle = 0;
bool mu = 0;      /* the timer's mutex */
bool waiting = 0; /* the timer is in pthread_cond_wait */
bool sig = 0;     /* a signal delivered to it */

inline lock()
{
    atomic { !mu -> mu = 1 }
}

inline unlock()
{
    mu = 0
}

inline kick()
{
    if
    :: idle == 1 ->
        atomic {
            if
            :: idle == 1 -> idle = 0; won = 1
            :: else -> won = 0
            fi
        };
        if
        :: won ->
            lock();
            if
            :: waiting -> sig = 1
            :: else -> skip
            fi;
            unlock()
        :: else -> skip
        fi
    :: else -> skip
    fi
}

active [NS] proctype submitter()
{
    byte r = 0;
    bool won = 0;
    do
    :: r < ROUNDS ->
#if BUG == 2
        kick();
        depth++;
#else
        depth++;
        kick();
#endif
        r++
    :: else -> break
    od
}

active proctype taker()
{
    do
    :: atomic { depth > 0 -> depth-- }
    :: break
    od
}

active proctype timer()
{
    bool quiet;
end:
    do
    :: true ->
#if BUG == 1
        quiet = (depth == 0);
        idle = 1;
#else
        idle = 1;
        quiet = (depth == 0);
#endif
        if
        :: !quiet ->
            atomic {
                if
                :: idle == 1 -> idle = 0
                :: else -> skip
                fi
            }
        :: else -> skip
        fi;
        lock();
        if
        :: quiet ->
            do
            :: idle == 1 ->
                atomic { waiting = 1; mu = 0 };
end_wait:       atomic { sig -> sig = 0; waiting = 0 };
                lock()
            :: else -> break
            od
        :: else -> skip
        fi;
        unlock()
    od
}

active proctype watcher()
{
end:
    timeout -> assert(!(waiting && depth > 0))
}
