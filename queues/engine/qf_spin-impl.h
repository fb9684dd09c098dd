/* qf_spin-impl.h - internal: when a queue waiter whose adaptive spin budget
 * fell to zero probes again.
 *
 * A waiter spins before it sleeps only while spinning pays: the budget
 * halves each time a spin ends in a sleep anyway (a loaded machine, a
 * partner that is descheduled) and doubles when a spin catches its partner.
 * At zero every wait sleeps. The way back must not depend on one side
 * alone: in a ping-pong each side's wait is only short if the *other* side
 * spins too, and a lone probe, however long, meets a partner that sleeps
 * and so always fails. So probes happen in windows the whole process
 * agrees on, read off the monotonic clock: about 1 ms in every 16 ms, a
 * waiter at zero spins for its queue's whole spin limit, long enough to
 * see a sleeping partner woken and answer. Once one side catches its
 * partner it spins again in its next wait, so the other side's probe meets
 * a spinning partner and catches too, and both budgets grow back. While
 * the load lasts, a probe costs at most the limit per wait, in one window
 * of sixteen.
 *
 * After its spin, before it sleeps, a waiter yields the CPU a few times,
 * looking again after each (qf__yield_once()). With more threads on a
 * queue than cores (queue.tput.p16c16: 32 threads on 2 cores) the partner
 * a waiter waits for is usually runnable but not running, and a yield runs
 * it for a context switch, where a futex sleep cost the waiter its place
 * and the partner a wake-up call: queue.tput p8c8 10-17 -> 22-25 M items/s,
 * p16c16 5.6-9 -> 14-23 M (qflow-bench --quick, turn about with the build
 * before). With another process's busy thread on the core, though, a
 * yield hands it a whole time slice, where a sleeper woken by the futex
 * call would have preempted it (p4c4 21-23 -> 6-14 M with a `yes` per
 * core, yielding always). So a yield that kept the CPU away for longer
 * than QF__YIELD_SLOW_NS turns yielding off for the queue (its yield hint
 * 0), and, like a spin budget at zero, it comes back in the probe windows,
 * once a probe's yields are quick (p4c4 16-19 -> 16-18 M with the `yes`).
 * A slow yield counts even when the look after it succeeds: beside a busy
 * process the partner on the other core has usually acted by then, and
 * what cost was the waiter's lost slice, which the next wait would lose
 * again. (A partner of ours that ran over 20 us in the slice we gave it
 * turns yields off too, until the next probe window.)
 */
#ifndef QF_SPIN_IMPL_H
#define QF_SPIN_IMPL_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qf_time.h"

static inline bool qf__spin_probe_window(int64_t now_ns)
{
    return (((uint64_t)now_ns >> 20) & 15) == 0;
}

#define QF__YIELDS_MAX 16
#define QF__YIELD_SLOW_NS 20000

/* One yield of a waiter whose spin is over. *yields counts this wait's
 * yields (0 before the first; -1: no more); `hint` is the queue's yield
 * hint (relaxed: a hint). True: look again (the condition may hold now);
 * false: go to sleep. */
static inline bool qf__yield_once(_Atomic int32_t *hint, int *yields)
{
    if (*yields < 0)
        return false;
    int64_t t0 = qf_now_ns();
    if ((*yields == 0 && atomic_load_explicit(hint, memory_order_relaxed) <= 0 &&
         !qf__spin_probe_window(t0)) ||
        *yields >= QF__YIELDS_MAX) {
        *yields = -1;
        return false;
    }
    (*yields)++;
    sched_yield();
    bool slow = qf_now_ns() - t0 > QF__YIELD_SLOW_NS;
    int32_t want = slow ? 0 : QF__YIELDS_MAX;
    if (atomic_load_explicit(hint, memory_order_relaxed) != want)
        atomic_store_explicit(hint, want, memory_order_relaxed);
    if (slow)
        *yields = -1; /* sleep next: a futex wake preempts whoever has the core */
    return true;
}

#endif
