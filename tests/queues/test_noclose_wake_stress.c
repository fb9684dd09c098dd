/* test_noclose_wake_stress.c - consumer wakes with no close to hide a lost
 * one (queues/engine/qf_fifo_wait.c, "The rule every wait follows" and
 * "Conditions, who makes them true, and whom that wakes").
 *
 * The other stress suites close their queues at random moments, and a
 * close wakes every consumer: a wake lost before it goes unseen. These
 * rounds have no close: NP producer threads send one pointer at a time; NC
 * consumer threads take fixed shares that add up to what is sent. Every
 * other round they all block in dequeue (nothing else would pick up an
 * element a lost wake left: no timeout, no poll); the rounds between mix
 * blocking dequeues, dequeues with a deadline (retried when they time out)
 * and poll forms woken through a thread waker of their own. A consumer
 * asleep while its share is in the queue hangs the round, and the
 * watchdog turns that into a failure. Oversubscribed (28 threads on CI's 2
 * cores), small capacities (empty and full often), every value exactly
 * once. Bounded in count (QF_STRESS_SCALE) and time. (Written for a gate
 * on consumer wakes that was measured and not kept, 2026-12-02: with the
 * consumer's hand-over removed, the all-blocking rounds hung.) */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "qflow.h"
#include "qf_test_stress.h"

#define NP 12
#define NC 16
#define ROUND_LIMIT_S 60
#define SEQ_BITS 32

typedef enum { TAKE_BLOCKING, TAKE_DEADLINE, TAKE_POLL } take_kind;

typedef struct wake_round {
    qf_queue *q;
    bool mixed; /* false: every consumer blocks in dequeue */
    long per_producer;
    long share[NC];
    _Atomic long taken;
    _Atomic long errors;
    _Atomic(unsigned char) *seen; /* NP * per_producer */
    _Atomic long timeouts;
} wake_round;

typedef struct {
    wake_round *r;
    int id;
} wake_arg;

static void *producer(void *a)
{
    wake_arg *g = a;
    for (long i = 0; i < g->r->per_producer; i++) {
        void *p = (void *)(((uintptr_t)g->id + 1) << SEQ_BITS | (uintptr_t)i);
        if (qf_queue_enqueue_ptr(g->r->q, p) != QF_OK)
            atomic_fetch_add(&g->r->errors, 1);
    }
    return NULL;
}

static qf_code take_one(wake_round *r, take_kind k, void **p)
{
    if (k == TAKE_BLOCKING)
        return qf_queue_dequeue_ptr(r->q, p);
    if (k == TAKE_DEADLINE) {
        for (;;) {
            qf_code rc = qf_queue_dequeue_ptr_until(r->q, qf_deadline_in_ns(200000), p);
            if (rc != QF_DEADLINE_EXCEEDED)
                return rc;
            atomic_fetch_add(&r->timeouts, 1);
        }
    }
    return qft_poll_dequeue_ptr(r->q, p);
}

static void *consumer(void *a)
{
    wake_arg *g = a;
    wake_round *r = g->r;
    take_kind k = r->mixed ? (take_kind)(g->id % 3) : TAKE_BLOCKING;
    for (long i = 0; i < r->share[g->id]; i++) {
        void *p;
        if (take_one(r, k, &p) != QF_OK) {
            atomic_fetch_add(&r->errors, 1);
            return NULL;
        }
        uintptr_t v = (uintptr_t)p;
        long prod = (long)(v >> SEQ_BITS) - 1, seq = (long)(v & 0xffffffffu);
        if (prod < 0 || prod >= NP || seq >= r->per_producer ||
            atomic_exchange(&r->seen[prod * r->per_producer + seq], 1) != 0)
            atomic_fetch_add(&r->errors, 1);
        atomic_fetch_add(&r->taken, 1);
    }
    return NULL;
}

static void report_hang(void *a)
{
    wake_round *r = a;
    fprintf(stderr,
            "no-close wake stress: round hung with %ld of %ld taken, %lld in the queue: a consumer "
            "asleep while its share is there (a lost wake)\n",
            atomic_load(&r->taken), r->per_producer * NP, (long long)qf_queue_size(r->q));
}

static void run_round(int64_t capacity, long per_producer, bool mixed)
{
    wake_round r = {.per_producer = per_producer, .mixed = mixed};
    long total = per_producer * NP;
    for (int c = 0; c < NC; c++)
        r.share[c] = total / NC + (c < total % NC ? 1 : 0);
    r.seen = calloc((size_t)total, 1);
    cr_assert_not_null(r.seen);
    cr_assert_eq(qf_ptr_queue_new(capacity, "noclose", 0, NULL, &r.q), QF_OK, "%s",
                 qf_last_message());

    qft_watchdog wd;
    qft_watchdog_start(&wd, ROUND_LIMIT_S, report_hang, &r);
    pthread_t pt[NP], ct[NC];
    wake_arg pa[NP], ca[NC];
    for (int c = 0; c < NC; c++) {
        ca[c] = (wake_arg){&r, c};
        cr_assert_eq(pthread_create(&ct[c], NULL, consumer, &ca[c]), 0);
    }
    for (int p = 0; p < NP; p++) {
        pa[p] = (wake_arg){&r, p};
        cr_assert_eq(pthread_create(&pt[p], NULL, producer, &pa[p]), 0);
    }
    for (int p = 0; p < NP; p++)
        pthread_join(pt[p], NULL);
    for (int c = 0; c < NC; c++)
        pthread_join(ct[c], NULL);
    qft_watchdog_stop(&wd);

    cr_expect_eq(atomic_load(&r.errors), 0, "failed calls, duplicates or strays");
    cr_expect_eq(atomic_load(&r.taken), total, "every element taken");
    cr_expect_eq(qf_queue_size(r.q), 0);
    if (mixed)
        cr_log_info("%ld dequeue timeouts retried", atomic_load(&r.timeouts));
    qf_queue_unref(r.q);
    free(r.seen);
}

Test(noclose_wake_stress, capacity_1, .timeout = 600)
{
    long rounds = qft_stress_scale(20, 2);
    for (long i = 0; i < rounds; i++)
        run_round(1, qft_stress_scale(2000, 200), i & 1);
}

Test(noclose_wake_stress, capacity_4, .timeout = 600)
{
    long rounds = qft_stress_scale(20, 2);
    for (long i = 0; i < rounds; i++)
        run_round(4, qft_stress_scale(4000, 400), i & 1);
}

Test(noclose_wake_stress, capacity_1024, .timeout = 600)
{
    long rounds = qft_stress_scale(10, 2);
    for (long i = 0; i < rounds; i++)
        run_round(1024, qft_stress_scale(20000, 1000), i & 1);
}
