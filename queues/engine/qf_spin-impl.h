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
 */
#ifndef QF_SPIN_IMPL_H
#define QF_SPIN_IMPL_H

#include <stdbool.h>
#include <stdint.h>

static inline bool qf__spin_probe_window(int64_t now_ns)
{
    return (((uint64_t)now_ns >> 20) & 15) == 0;
}

#endif
