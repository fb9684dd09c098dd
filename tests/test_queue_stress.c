/* test_queue_stress.c - many threads, small queues, exactly-once delivery.
 *
 * Bounded in count (QF_STRESS_SCALE divides the element counts; the
 * sanitizer runs set it) and therefore in time. Each producer sends
 * (id << 40 | seq) values; consumers check that every value arrives once
 * and that each producer's values arrive in order. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"

#define MAXT 8

static long scale(long n)
{
    const char *s = getenv("QF_STRESS_SCALE");
    long d = s ? atol(s) : 1;
    return d > 1 ? n / d : n;
}

typedef struct {
    qf_queue *q;
    int nprod, ncons;
    long per_producer;
    int batch;     /* 1: single ops; >1: enqueue_many/dequeue_up_to of that size */
    uint8_t *seen; /* per (producer, seq) */
    atomic_long received;
    atomic_int errors;
} stress;

typedef struct {
    stress *s;
    uintptr_t id;
} targ;

static void *producer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    void *buf[64];
    for (long i = 1; i <= s->per_producer;) {
        int k = 0;
        while (k < s->batch && i <= s->per_producer)
            buf[k++] = (void *)((t->id << 40) | (uintptr_t)i++);
        qf_code rc = k == 1 ? qf_queue_enqueue_ptr(s->q, buf[0])
                            : qf_queue_enqueue_many_ptr(s->q, buf, (size_t)k, QF_FOREVER, NULL);
        if (rc != QF_OK)
            atomic_fetch_add(&s->errors, 1);
    }
    return NULL;
}

static void *consumer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    uint64_t last[MAXT] = {0};
    void *buf[64];
    for (;;) {
        size_t n = 1;
        qf_code rc = s->batch == 1
                         ? qf_queue_dequeue_ptr(s->q, &buf[0])
                         : qf_queue_dequeue_up_to_ptr(s->q, (size_t)s->batch, QF_FOREVER, buf, &n);
        if (rc == QF_OUT_OF_RANGE)
            break;
        if (rc != QF_OK) {
            atomic_fetch_add(&s->errors, 1);
            break;
        }
        for (size_t j = 0; j < n; j++) {
            uintptr_t v = (uintptr_t)buf[j];
            unsigned id = (unsigned)(v >> 40);
            uint64_t seq = v & ((1ull << 40) - 1);
            if (id >= (unsigned)s->nprod || seq == 0 || seq > (uint64_t)s->per_producer ||
                seq <= last[id]) {
                atomic_fetch_add(&s->errors, 1);
                continue;
            }
            last[id] = seq;
            uint8_t *cell = &s->seen[(size_t)id * (size_t)s->per_producer + seq - 1];
            if (__atomic_exchange_n(cell, 1, __ATOMIC_RELAXED))
                atomic_fetch_add(&s->errors, 1);
        }
        atomic_fetch_add(&s->received, (long)n);
    }
    return NULL;
}

static void run(int64_t cap, unsigned flags, int np, int nc, long total, int batch)
{
    stress s = {.nprod = np, .ncons = nc, .per_producer = scale(total) / np, .batch = batch};
    cr_assert_eq(qf_ptr_queue_new(cap, "stress", flags, NULL, &s.q), QF_OK);
    s.seen = calloc((size_t)np * (size_t)s.per_producer, 1);
    atomic_init(&s.received, 0);
    atomic_init(&s.errors, 0);
    pthread_t pt[MAXT], ct[MAXT];
    targ pa[MAXT], ca[MAXT];
    for (int i = 0; i < nc; i++) {
        ca[i] = (targ){&s, (uintptr_t)i};
        pthread_create(&ct[i], NULL, consumer, &ca[i]);
    }
    for (int i = 0; i < np; i++) {
        pa[i] = (targ){&s, (uintptr_t)i};
        pthread_create(&pt[i], NULL, producer, &pa[i]);
    }
    for (int i = 0; i < np; i++)
        pthread_join(pt[i], NULL);
    cr_assert_eq(qf_queue_close(s.q, false), QF_OK);
    for (int i = 0; i < nc; i++)
        pthread_join(ct[i], NULL);
    cr_expect_eq(atomic_load(&s.errors), 0, "duplicates, reorderings or failed calls");
    cr_expect_eq(atomic_load(&s.received), s.per_producer * np, "every element arrived");
    for (size_t i = 0; i < (size_t)np * (size_t)s.per_producer; i++)
        if (!s.seen[i]) {
            cr_expect(0, "element %zu never arrived", i);
            break;
        }
    free(s.seen);
    qf_queue_unref(s.q);
}

/* The requirement: at least a million elements through a small
 * queue, many producers and consumers, exactly once and in per-producer
 * order. */
Test(queue_stress, mpmc_million_through_capacity_16, .timeout = 300)
{
    run(16, 0, 4, 4, 1000000, 1);
}

Test(queue_stress, mpmc_batches_through_capacity_10, .timeout = 300)
{
    run(10, 0, 3, 3, 600000, 7);
}

Test(queue_stress, oversubscribed_8x8_capacity_4, .timeout = 300)
{
    run(4, 0, 8, 8, 400000, 1);
}

Test(queue_stress, spsc_declared, .timeout = 300)
{
    run(64, QF_QUEUE_SINGLE_PRODUCER | QF_QUEUE_SINGLE_CONSUMER, 1, 1, 1000000, 1);
}

Test(queue_stress, mpsc_declared_single_consumer, .timeout = 300)
{
    run(32, QF_QUEUE_SINGLE_CONSUMER, 4, 1, 400000, 1);
}

Test(queue_stress, unbounded_mpmc, .timeout = 300)
{
    run(-1, 0, 4, 2, 400000, 5);
}
