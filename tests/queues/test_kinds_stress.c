/* test_kinds_stress.c - RandomShuffleQueue and PriorityQueue under 4
 * producers and 4 consumers: every element is delivered exactly once.
 *
 * Bounded in count (QF_STRESS_SCALE divides the element counts; the
 * sanitizer runs set it) and therefore in time. Producers send unique
 * (id << 40 | seq) values; consumers mark each value in a shared table and
 * count duplicates and strays. Variants mix the thread forms with deadlines
 * (timeouts that put held elements back), the batch forms, and the poll
 * forms driven by thread wakers, so the wake-up paths are exercised under
 * contention: a lost wake shows up as a hang (the suite's timeout).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_test_stress.h"

#define NP 4
#define NC 4
#define SEQ_BITS 40
/* Short enough that many waits time out (and put held elements back). */
#define SHORT_NS 50000

typedef enum {
    MODE_PLAIN,    /* blocking single calls */
    MODE_BATCH,    /* enqueue_many / dequeue_up_to */
    MODE_DEADLINE, /* short deadlines, retried; dequeue_many cut short */
    MODE_POLL,     /* half the threads use the poll forms */
} mode;

typedef struct {
    qf_queue *q;
    mode m;
    long per_producer;
    uint8_t *seen;
    atomic_long received;
    atomic_int errors;
    atomic_int unsorted; /* priority: a batch that was not sorted */
    atomic_long timeouts;
} stress;

typedef struct {
    stress *s;
    uintptr_t id;
} targ;

static uint32_t lcg(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

static void mark(stress *s, uint64_t v)
{
    uint64_t id = v >> SEQ_BITS, seq = v & ((1ull << SEQ_BITS) - 1);
    if (id >= NP || seq == 0 || seq > (uint64_t)s->per_producer) {
        atomic_fetch_add(&s->errors, 1);
        return;
    }
    uint8_t *cell = &s->seen[id * (uint64_t)s->per_producer + seq - 1];
    if (__atomic_exchange_n(cell, 1, __ATOMIC_RELAXED))
        atomic_fetch_add(&s->errors, 1);
}

static void check(stress *s)
{
    cr_expect_eq(atomic_load(&s->errors), 0, "duplicates, strays or failed calls");
    cr_expect_eq(atomic_load(&s->unsorted), 0, "unsorted priority batches");
    cr_expect_eq(atomic_load(&s->received), s->per_producer * NP, "every element arrived");
    if (s->m == MODE_DEADLINE)
        cr_log_info("%ld consumer timeouts", atomic_load(&s->timeouts));
    for (long i = 0; i < s->per_producer * NP; i++)
        if (!s->seen[i]) {
            cr_expect(0, "element %ld never arrived", i);
            break;
        }
}

/* ------------------------------------------- RandomShuffleQueue (pointers) */

static void *shuffle_producer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    uint32_t r = (uint32_t)t->id + 1;
    void *buf[8];
    for (long i = 1; i <= s->per_producer;) {
        size_t k = 1;
        if (s->m == MODE_BATCH || s->m == MODE_DEADLINE)
            k = 1 + lcg(&r) % 7;
        size_t n = 0;
        while (n < k && i <= s->per_producer)
            buf[n++] = (void *)((t->id << SEQ_BITS) | (uintptr_t)i++);
        size_t done = 0;
        qf_code rc;
        if (s->m == MODE_POLL && (t->id & 1)) {
            rc = qft_poll_enqueue_ptr(s->q, buf[0]);
            done = rc == QF_OK;
        } else if (s->m == MODE_DEADLINE) {
            /* retry the rest after each timeout */
            rc = QF_OK;
            while (done < n) {
                size_t d = 0;
                rc = qf_queue_enqueue_many_ptr(s->q, buf + done, n - done,
                                               qf_deadline_in_ns(SHORT_NS), &d);
                done += d;
                if (rc != QF_OK && rc != QF_DEADLINE_EXCEEDED)
                    break;
            }
        } else if (n == 1) {
            rc = qf_queue_enqueue_ptr(s->q, buf[0]);
            done = rc == QF_OK;
        } else {
            rc = qf_queue_enqueue_many_ptr(s->q, buf, n, QF_FOREVER, &done);
        }
        if (done != n)
            atomic_fetch_add(&s->errors, 1);
    }
    return NULL;
}

static void *shuffle_consumer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    void *buf[8];
    for (;;) {
        size_t n = 1;
        qf_code rc;
        if (s->m == MODE_POLL && (t->id & 1)) {
            rc = qft_poll_dequeue_ptr(s->q, &buf[0]);
        } else if (s->m == MODE_BATCH) {
            rc = qf_queue_dequeue_up_to_ptr(s->q, 7, QF_FOREVER, buf, &n);
        } else if (s->m == MODE_DEADLINE) {
            /* dequeue_many(3) with a short deadline: often cut short, and
             * what it held goes back; once closed, drain singly */
            if (!qf_queue_is_closed(s->q)) {
                rc = qf_queue_dequeue_many_ptr(s->q, 3, qf_deadline_in_ns(SHORT_NS), buf);
                n = 3;
                if (rc == QF_DEADLINE_EXCEEDED)
                    atomic_fetch_add(&s->timeouts, 1);
                if (rc == QF_DEADLINE_EXCEEDED || rc == QF_OUT_OF_RANGE)
                    continue;
            } else {
                rc = qf_queue_dequeue_ptr_until(s->q, qf_deadline_in_ns(SHORT_NS), &buf[0]);
                if (rc == QF_DEADLINE_EXCEEDED)
                    continue;
            }
        } else {
            rc = qf_queue_dequeue_ptr(s->q, &buf[0]);
        }
        if (rc == QF_OUT_OF_RANGE)
            break;
        if (rc != QF_OK) {
            atomic_fetch_add(&s->errors, 1);
            break;
        }
        for (size_t j = 0; j < n; j++)
            mark(s, (uintptr_t)buf[j]);
        atomic_fetch_add(&s->received, (long)n);
    }
    return NULL;
}

static void run_shuffle(int64_t cap, int64_t min_after, mode m, long total)
{
    stress s = {.m = m, .per_producer = qft_stress_scale(total, NP * 64) / NP};
    qf_dtype dt = QF_PTR;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {.capacity = cap,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .name = "stress",
                          .min_after_dequeue = min_after,
                          .seed = 42};
    cr_assert_eq(qf_random_shuffle_queue_new(&o, &s.q), QF_OK, "%s", qf_last_message());
    s.seen = calloc((size_t)(NP * s.per_producer), 1);
    atomic_init(&s.received, 0);
    atomic_init(&s.errors, 0);
    atomic_init(&s.unsorted, 0);
    atomic_init(&s.timeouts, 0);
    pthread_t pt[NP], ct[NC];
    targ pa[NP], ca[NC];
    for (int i = 0; i < NC; i++) {
        ca[i] = (targ){&s, (uintptr_t)i};
        pthread_create(&ct[i], NULL, shuffle_consumer, &ca[i]);
    }
    for (int i = 0; i < NP; i++) {
        pa[i] = (targ){&s, (uintptr_t)i};
        pthread_create(&pt[i], NULL, shuffle_producer, &pa[i]);
    }
    for (int i = 0; i < NP; i++)
        pthread_join(pt[i], NULL);
    cr_assert_eq(qf_queue_close(s.q, false), QF_OK);
    for (int i = 0; i < NC; i++)
        pthread_join(ct[i], NULL);
    check(&s);
    cr_expect_eq(qf_queue_size(s.q), 0);
    free(s.seen);
    qf_queue_unref(s.q);
}

Test(kinds_stress, shuffle_4p4c_capacity_16, .timeout = 300)
{
    run_shuffle(16, 0, MODE_PLAIN, 400000);
}

Test(kinds_stress, shuffle_4p4c_min_after_dequeue_8, .timeout = 300)
{
    run_shuffle(16, 8, MODE_PLAIN, 400000);
}

Test(kinds_stress, shuffle_4p4c_batches, .timeout = 300)
{
    run_shuffle(10, 3, MODE_BATCH, 400000);
}

Test(kinds_stress, shuffle_4p4c_deadlines_and_put_backs, .timeout = 300)
{
    run_shuffle(8, 2, MODE_DEADLINE, 100000);
}

Test(kinds_stress, shuffle_4p4c_poll_forms, .timeout = 300)
{
    run_shuffle(4, 0, MODE_POLL, 200000);
}

Test(kinds_stress, shuffle_4p4c_unbounded, .timeout = 300)
{
    run_shuffle(-1, 100, MODE_BATCH, 400000);
}

/* --------------------------------------------- PriorityQueue (elements) */

static qf_element *prio_el(int64_t prio, int64_t v)
{
    qf_tensor *t[2] = {qf_tensor_new_i64(prio), qf_tensor_new_i64(v)};
    return qf_element_of(2, t);
}

static void *prio_producer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    uint32_t r = (uint32_t)t->id * 7u + 3u;
    for (long i = 1; i <= s->per_producer;) {
        long k = s->m == MODE_BATCH ? 1 + (long)(lcg(&r) % 9) : 1;
        if (k > s->per_producer - i + 1)
            k = s->per_producer - i + 1;
        qf_code rc;
        if (k == 1) {
            qf_element *e =
                prio_el((int64_t)(lcg(&r) % 1000), (int64_t)((t->id << SEQ_BITS) | (uint64_t)i));
            if (s->m == MODE_DEADLINE) {
                while ((rc = qf_queue_enqueue_until(s->q, e, qf_deadline_in_ns(SHORT_NS))) ==
                       QF_DEADLINE_EXCEEDED)
                    ;
            } else {
                rc = qf_queue_enqueue(s->q, e);
            }
            if (rc != QF_OK)
                qf_element_free(e);
        } else {
            int64_t p[9], v[9];
            for (long j = 0; j < k; j++) {
                p[j] = (int64_t)(lcg(&r) % 1000);
                v[j] = (int64_t)((t->id << SEQ_BITS) | (uint64_t)(i + j));
            }
            qf_shape sh = QF_SHAPE(k);
            qf_tensor *ts[2] = {qf_tensor_new_from(QF_INT64, &sh, p, (size_t)k * 8),
                                qf_tensor_new_from(QF_INT64, &sh, v, (size_t)k * 8)};
            qf_element *b = qf_element_of(2, ts);
            rc = qf_queue_enqueue_many(s->q, b, NULL);
            if (rc != QF_OK)
                qf_element_free(b);
        }
        if (rc != QF_OK)
            atomic_fetch_add(&s->errors, 1);
        i += k;
    }
    return NULL;
}

static void *prio_consumer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc;
        if (s->m == MODE_BATCH)
            rc = qf_queue_dequeue_up_to(s->q, 1 + (int64_t)(t->id % 4), &e);
        else if (s->m == MODE_DEADLINE)
            rc = qf_queue_dequeue_until(s->q, qf_deadline_in_ns(SHORT_NS), &e);
        else
            rc = qf_queue_dequeue(s->q, &e);
        if (rc == QF_DEADLINE_EXCEEDED) {
            atomic_fetch_add(&s->timeouts, 1);
            continue;
        }
        if (rc == QF_OUT_OF_RANGE)
            break;
        if (rc != QF_OK) {
            atomic_fetch_add(&s->errors, 1);
            break;
        }
        const qf_tensor *pt = qf_element_get(e, 0), *vt = qf_element_get(e, 1);
        int64_t n = qf_tensor_num_elements(vt);
        const int64_t *p = qf_tensor_cdata(pt), *v = qf_tensor_cdata(vt);
        for (int64_t j = 0; j < n; j++) {
            if (j > 0 && p[j - 1] > p[j])
                atomic_fetch_add(&s->unsorted, 1);
            mark(s, (uint64_t)v[j]);
        }
        atomic_fetch_add(&s->received, (long)n);
        qf_element_free(e);
    }
    return NULL;
}

static void run_priority(int64_t cap, mode m, long total)
{
    stress s = {.m = m, .per_producer = qft_stress_scale(total, NP * 64) / NP};
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = cap, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "stress"};
    cr_assert_eq(qf_priority_queue_new(&o, &s.q), QF_OK, "%s", qf_last_message());
    s.seen = calloc((size_t)(NP * s.per_producer), 1);
    atomic_init(&s.received, 0);
    atomic_init(&s.errors, 0);
    atomic_init(&s.unsorted, 0);
    atomic_init(&s.timeouts, 0);
    pthread_t pt[NP], ct[NC];
    targ pa[NP], ca[NC];
    for (int i = 0; i < NC; i++) {
        ca[i] = (targ){&s, (uintptr_t)i};
        pthread_create(&ct[i], NULL, prio_consumer, &ca[i]);
    }
    for (int i = 0; i < NP; i++) {
        pa[i] = (targ){&s, (uintptr_t)i};
        pthread_create(&pt[i], NULL, prio_producer, &pa[i]);
    }
    for (int i = 0; i < NP; i++)
        pthread_join(pt[i], NULL);
    cr_assert_eq(qf_queue_close(s.q, false), QF_OK);
    for (int i = 0; i < NC; i++)
        pthread_join(ct[i], NULL);
    check(&s);
    cr_expect_eq(qf_queue_size(s.q), 0);
    free(s.seen);
    qf_queue_unref(s.q);
}

Test(kinds_stress, priority_4p4c_capacity_16, .timeout = 300)
{
    run_priority(16, MODE_PLAIN, 200000);
}

Test(kinds_stress, priority_4p4c_batches, .timeout = 300)
{
    run_priority(12, MODE_BATCH, 200000);
}

Test(kinds_stress, priority_4p4c_deadlines, .timeout = 300)
{
    run_priority(8, MODE_DEADLINE, 100000);
}
