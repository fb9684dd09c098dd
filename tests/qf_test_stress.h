/* qf_test_stress.h - what the stress suites share: the stress scale
 * (QF_STRESS_SCALE) that divides their counts, and a watchdog that turns a
 * hang into a failure. Static functions: each test file includes it once. */
#ifndef QF_TEST_STRESS_H
#define QF_TEST_STRESS_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "qflow.h"

/* ------------------------------------------------------------ stress scale */

/* n divided by QF_STRESS_SCALE (a whole number; unset, or 1 or less, leaves
 * n as it is), and never below at_least: the sanitizer and CI runs divide
 * the counts of the stress suites without editing them. */
static inline long qft_stress_scale(long n, long at_least)
{
    const char *s = getenv("QF_STRESS_SCALE");
    long d = s ? atol(s) : 1;
    n = d > 1 ? n / d : n;
    return n < at_least ? at_least : n;
}

/* ---------------------------------------------------------------- watchdog */

/* A thread that calls report(arg) and aborts when qft_watchdog_stop() has
 * not come within limit_s seconds: a hang becomes a failure that says
 * where it stood, not a run that never ends. */
typedef struct qft_watchdog {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    pthread_t thread;
    struct timespec until; /* CLOCK_REALTIME, for pthread_cond_timedwait */
    void (*report)(void *arg);
    void *arg;
} qft_watchdog;

static inline void *qft_watchdog_main(void *a)
{
    qft_watchdog *wd = a;
    pthread_mutex_lock(&wd->mu);
    while (!wd->done)
        if (pthread_cond_timedwait(&wd->cv, &wd->mu, &wd->until) != 0 && !wd->done) {
            wd->report(wd->arg);
            abort();
        }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

static inline void qft_watchdog_start(qft_watchdog *wd, long limit_s, void (*report)(void *arg),
                                      void *arg)
{
    wd->done = false;
    wd->report = report;
    wd->arg = arg;
    pthread_mutex_init(&wd->mu, NULL);
    pthread_cond_init(&wd->cv, NULL);
    clock_gettime(CLOCK_REALTIME, &wd->until);
    wd->until.tv_sec += limit_s;
    cr_assert_eq(pthread_create(&wd->thread, NULL, qft_watchdog_main, wd), 0);
}

static inline void qft_watchdog_stop(qft_watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
    wd->done = true;
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->cv);
    pthread_mutex_destroy(&wd->mu);
}

/* ------------------------------------------------ poll forms from a thread */

/* A poll-form enqueue (dequeue) of one pointer by a plain thread: its own
 * thread waker, waited on until the queue wakes it, then polled again. */
static inline qf_code qft_poll_enqueue_ptr(qf_queue *q, void *p)
{
    qf_waker w;
    for (;;) {
        qf_waker_init_thread(&w);
        qf_code rc = qf_queue_poll_enqueue_ptr(q, p, &w);
        if (rc != QF_PENDING)
            return rc;
        qf_waker_wait(&w, QF_FOREVER);
    }
}

static inline qf_code qft_poll_dequeue_ptr(qf_queue *q, void **p)
{
    qf_waker w;
    for (;;) {
        qf_waker_init_thread(&w);
        qf_code rc = qf_queue_poll_dequeue_ptr(q, &w, p);
        if (rc != QF_PENDING)
            return rc;
        qf_waker_wait(&w, QF_FOREVER);
    }
}

#endif
