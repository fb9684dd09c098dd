/* qf_test_sched.h - tests: read and set the calling thread's scheduling
 * attributes the way the kernel reports them, independently of
 * qf_thread.c (raw sched_getattr/sched_setattr, prctl). */
#ifndef QF_TEST_SCHED_H
#define QF_TEST_SCHED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qflow.h"

typedef struct qft_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
} qft_attr;

static inline qft_attr qft_sched_get(void)
{
    qft_attr a = {0};
    (void)syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof(a), 0u);
    return a;
}

/* Set the calling thread's policy, nice and slice (0: the default). */
static inline int qft_sched_set(uint32_t policy, int nice, uint64_t slice_ns)
{
    qft_attr a = {.size = sizeof(a), .policy = policy, .nice = nice, .runtime = slice_ns};
    return (int)syscall(SYS_sched_setattr, 0, &a, 0u);
}

static inline uint64_t qft_slice_ns(void)
{
    return qft_sched_get().runtime;
}

static inline uint64_t qft_timer_slack_ns(void)
{
    return (uint64_t)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
}

/* Whether this kernel keeps a per-thread slice (Linux 6.12 or later): asks
 * for one on the calling thread and puts the default back. */
static inline bool qft_kernel_has_slices(void)
{
    qft_attr cur = qft_sched_get();
    if (qft_sched_set(cur.policy, cur.nice, 300000) != 0)
        return false;
    bool has = qft_slice_ns() == 300000;
    (void)qft_sched_set(cur.policy, cur.nice, 0);
    return has;
}

#endif
