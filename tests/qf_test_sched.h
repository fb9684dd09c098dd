/* qf_test_sched.h - tests: read and set the calling thread's scheduling
 * attributes the way the kernel reports them, independently of
 * qf_thread.c (raw sched_getattr/sched_setattr, prctl). */
#ifndef QF_TEST_SCHED_H
#define QF_TEST_SCHED_H

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qf_test_park.h"
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

/* Another thread's slice (0 when it cannot be read). */
static inline uint64_t qft_slice_of(int tid)
{
    qft_attr a = {0};
    if (syscall(SYS_sched_getattr, tid, &a, (unsigned)sizeof(a), 0u) != 0)
        return 0;
    return a.runtime;
}

/* The id of this process's thread named `name` (pthread_setname_np), or
 * -1. */
static inline int qft_thread_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char comm[32];
        if (qft_thread_comm(e->d_name, comm) && strcmp(comm, name) == 0)
            found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

/* qft_thread_named(), waiting (yielding) up to 20 s for a thread that has
 * just started to name itself. */
static inline int qft_wait_thread_named(const char *name)
{
    qf_deadline limit = qf_deadline_in_s(20);
    int tid;
    while ((tid = qft_thread_named(name)) < 0 && !qf_deadline_passed(limit))
        sched_yield();
    return tid;
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
