/* qf_test_sched.h - tests: read and set the calling thread's scheduling
 * attributes the way the kernel reports them, independently of
 * qf_thread.c (raw sched_getattr/sched_setattr, prctl). */
#ifndef QF_TEST_SCHED_H
#define QF_TEST_SCHED_H

#include <pthread.h>
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

/* Set the calling thread's policy, nice and slice (0: the default), keeping
 * its reset-on-fork flag. */
static inline int qft_sched_set(uint32_t policy, int nice, uint64_t slice_ns)
{
    qft_attr a = {.size = sizeof(a),
                  .policy = policy,
                  .flags = qft_sched_get().flags & 1u,
                  .nice = nice,
                  .runtime = slice_ns};
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

static inline void *qft_probe_slices(void *arg)
{
    qft_attr cur = qft_sched_get();
    *(bool *)arg = qft_sched_set(cur.policy, cur.nice, 300000) == 0 && qft_slice_ns() == 300000;
    return NULL;
}

/* Whether this kernel keeps a per-thread slice (Linux 6.12 or later): asks
 * for one on a thread made for the question, so the caller's thread (the
 * test runner's, shared by every test under the TSan runner) is left as it
 * was. */
static inline bool qft_kernel_has_slices(void)
{
    bool has = false;
    pthread_t t;
    if (pthread_create(&t, NULL, qft_probe_slices, &has) != 0)
        return false;
    pthread_join(t, NULL);
    return has;
}

#endif
