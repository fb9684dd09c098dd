/* qf_eventcount-impl.h - internal: an event count whose one-waiter notify
 * prefers a chosen sleeper.
 * Never installed; not exported from libqflow.so (the layers above link
 * the static archive).
 *
 * qf_eventcount_notify(ec, false) wakes the sleeper the kernel picks, which
 * for one futex word is the one that has slept longest. A worker pool
 * wants the opposite: the worker that went to sleep last still has its
 * caches, and on a virtual machine its CPU is the least likely to have
 * been halted (waking a halted vCPU cost 30-40 us on the machines this was
 * measured on, against 1-3 us for a worker placed on a running one). So a
 * sleeper may wait tagged with bits (FUTEX_WAIT_BITSET), and a notify may
 * name the bits it prefers: it wakes a sleeper with those bits if one is
 * in the kernel, else any one. Both forms keep the plain event count's
 * guarantee, which is all tests/model/sched_idle.pml relies on: the count
 * advances before any wake (so a waiter between prepare and its futex wait
 * returns at once), and if any waiter is inside its futex wait, one of
 * them is woken. Which one is free. */
#ifndef QF_EVENTCOUNT_IMPL_H
#define QF_EVENTCOUNT_IMPL_H

#include <stdint.h>

#include "qf_waker.h"

/* No preference: any sleeper (and the tag of an untagged wait). */
#define QF__EC_ANY 0xffffffffu

/* qf_eventcount_wait_until() with the sleeper tagged `bits` (not 0; a
 * plain wait is tagged QF__EC_ANY). Blocking; same returns. */
qf_code qf__eventcount_wait_tagged(qf_eventcount *ec, uint32_t ticket, uint32_t bits,
                                   qf_deadline deadline);

/* qf_eventcount_notify(ec, false), waking a sleeper tagged with any of
 * `prefer` if one is in its futex wait, else any sleeper. prefer 0 or
 * QF__EC_ANY: no preference (one futex call, as the plain notify); with a
 * preference that finds nobody, a second futex call. Lock-free; full fence
 * first. */
void qf__eventcount_notify_prefer(qf_eventcount *ec, uint32_t prefer);

#endif
