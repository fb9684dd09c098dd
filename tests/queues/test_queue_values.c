/* test_queue_values.c - the _values calls: a FIFOQueue of small dense
 * components fed from and drained into the caller's buffers (issue 27;
 * queues/qf_queue.h, "values fast path").
 *
 * Which queues take values (and the reason given for one that does not);
 * values arrive exactly as sent for every numeric and bool dtype and shape
 * kind, in a queue that keeps them in its ring's cells and in one whose
 * ring spills (blocks); values and elements mix in one FIFO order both
 * ways; bad arguments change nothing; the try, deadline, close and poll
 * forms; a failed put of a block frees it; leftovers freed with the queue. A bounded stress, 8
 * producers and 8 consumers on any number of cores, mixes both APIs on both sides and checks
 * exactly-once and per-producer order, and a close with cancel at a random moment loses and
 * duplicates nothing. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_test_stress.h"
#include "qflow.h"

static qf_queue *fifo(int64_t cap, size_t n, const qf_dtype *dt, const qf_shape *sh)
{
    qf_queue_options o = {.capacity = cap, .num_components = n, .dtypes = dt, .shapes = sh};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

/* The (int64 label, float32 [16] features) queue of a TF1 input pipeline. */
#define FEATURES 16

static qf_queue *example_queue(int64_t cap)
{
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(FEATURES)};
    return fifo(cap, 2, dt, sh);
}

static float feature(int64_t v, int k)
{
    return (float)((v & 0xffff) * FEATURES + k);
}

static void put_example(qf_queue *q, int64_t v)
{
    float f[FEATURES];
    for (int k = 0; k < FEATURES; k++)
        f[k] = feature(v, k);
    const void *vals[2] = {&v, f};
    cr_assert_eq(qf_queue_enqueue_values(q, vals), QF_OK, "%s", qf_last_message());
}

static int64_t take_example(qf_queue *q)
{
    int64_t v = -1;
    float f[FEATURES];
    void *outs[2] = {&v, f};
    cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OK, "%s", qf_last_message());
    for (int k = 0; k < FEATURES; k++)
        cr_assert_eq(f[k], feature(v, k));
    return v;
}

/* ------------------------------------------------------ which queues */

static void expect_refused(qf_queue *q, const char *why)
{
    cr_assert(!qf_queue_takes_values(q));
    int64_t v = 1;
    const void *vals[1] = {&v};
    cr_assert_eq(qf_queue_try_enqueue_values(q, vals), QF_INVALID_ARGUMENT);
    cr_assert(strstr(qf_last_message(), "does not take values") != NULL, "%s", qf_last_message());
    cr_assert(strstr(qf_last_message(), why) != NULL, "'%s' does not say '%s'", qf_last_message(),
              why);
    void *outs[1] = {&v};
    cr_assert_eq(qf_queue_try_dequeue_values(q, outs), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

Test(queue_values, which_queues_take_values_and_why_not)
{
    cr_assert(!qf_queue_takes_values(NULL));
    qf_queue *q = example_queue(4);
    cr_assert(qf_queue_takes_values(q));
    qf_queue_unref(q);

    qf_dtype i64 = QF_INT64, str = QF_STRING;
    qf_shape scalar = qf_shape_scalar(), big = QF_SHAPE(65);
    qf_dtype two[2] = {QF_INT64, QF_INT64};
    expect_refused(fifo(4, 1, &i64, &scalar), "inline queue");
    expect_refused(fifo(4, 1, &str, &scalar), "not numeric or bool");
    expect_refused(fifo(4, 2, two, NULL), "its shapes are not given");
    expect_refused(fifo(4, 1, &i64, &big), "more than 512 bytes");

    qf_shape sh2[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options o = {.capacity = 4, .num_components = 2, .dtypes = two, .shapes = sh2};
    cr_assert_eq(qf_padding_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    expect_refused(q, "not a FIFOQueue");
    cr_assert_eq(qf_random_shuffle_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    expect_refused(q, "not a FIFOQueue");
}

/* ------------------------------------------------- values arrive as sent */

static const qf_dtype numeric[] = {QF_FLOAT32,    QF_FLOAT64,   QF_INT32,  QF_UINT8, QF_INT16,
                                   QF_INT8,       QF_COMPLEX64, QF_INT64,  QF_BOOL,  QF_UINT16,
                                   QF_COMPLEX128, QF_FLOAT16,   QF_UINT32, QF_UINT64};

/* Component c's bytes for row r: a pattern (bools 0 or 1). */
static void pattern(qf_dtype dt, unsigned seed, unsigned char *b, size_t nb)
{
    for (size_t i = 0; i < nb; i++)
        b[i] = dt == QF_BOOL ? (unsigned char)((seed + i) & 1) : (unsigned char)(seed * 31 + i);
}

/* Every dtype in a scalar, a vector, a matrix and an empty component; in
 * a queue of cells (capacity 4) and one whose values travel in blocks
 * (unbounded: its ring spills). */
static void every_dtype(int64_t cap)
{
    for (size_t d = 0; d < sizeof(numeric) / sizeof(numeric[0]); d++) {
        qf_dtype dt[4] = {numeric[d], numeric[d], numeric[d], numeric[d]};
        qf_shape sh[4] = {qf_shape_scalar(), QF_SHAPE(3), QF_SHAPE(2, 3), QF_SHAPE(0)};
        qf_queue *q = fifo(cap, 4, dt, sh);
        cr_assert(qf_queue_takes_values(q));
        size_t es = qf_dtype_size(numeric[d]);
        _Alignas(16) unsigned char in[4][6 * 16], out[4][6 * 16];
        size_t nb[4] = {es, 3 * es, 6 * es, 0};
        for (unsigned r = 0; r < 3; r++) {
            const void *vals[4];
            for (int c = 0; c < 4; c++) {
                pattern(numeric[d], r * 4 + (unsigned)c, in[c], nb[c]);
                vals[c] = in[c];
            }
            cr_assert_eq(qf_queue_enqueue_values(q, vals), QF_OK, "%s", qf_last_message());
        }
        for (unsigned r = 0; r < 3; r++) {
            void *outs[4] = {out[0], out[1], out[2], out[3]};
            cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OK, "%s", qf_last_message());
            for (int c = 0; c < 4; c++) {
                pattern(numeric[d], r * 4 + (unsigned)c, in[c], nb[c]);
                cr_assert(memcmp(in[c], out[c], nb[c]) == 0, "dtype %d component %d row %u",
                          (int)numeric[d], c, r);
            }
        }
        qf_queue_unref(q);
    }
}

Test(queue_values, every_dtype_and_shape_arrives_as_sent_in_cells)
{
    every_dtype(4);
}

Test(queue_values, every_dtype_and_shape_arrives_as_sent_in_blocks)
{
    every_dtype(-1);
}

/* Values in, elements out and the other way round, in one FIFO order. */
Test(queue_values, values_and_elements_mix_in_one_order)
{
    qf_queue *q = example_queue(8);
    qf_shape sf = QF_SHAPE(FEATURES);
    for (int64_t v = 0; v < 6; v++) {
        if (v % 2 == 0) {
            put_example(q, v);
            continue;
        }
        qf_tensor *f = qf_tensor_new(QF_FLOAT32, &sf);
        for (int k = 0; k < FEATURES; k++)
            ((float *)qf_tensor_data(f))[k] = feature(v, k);
        qf_tensor *ts[2] = {qf_tensor_new_i64(v), f};
        cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, ts)), QF_OK, "%s", qf_last_message());
    }
    for (int64_t v = 0; v < 6; v++) {
        if (v % 3 != 0) {
            cr_assert_eq(take_example(q), v);
            continue;
        }
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK, "%s", qf_last_message());
        cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)), v);
        const float *f = qf_tensor_cdata(qf_element_get(e, 1));
        for (int k = 0; k < FEATURES; k++)
            cr_assert_eq(f[k], feature(v, k));
        qf_element_free(e);
    }
    cr_assert_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* --------------------------------------------------- errors and forms */

Test(queue_values, null_arguments_change_nothing)
{
    qf_queue *q = example_queue(4);
    int64_t v = 7;
    float f[FEATURES] = {0};
    const void *half[2] = {&v, NULL};
    cr_assert_eq(qf_queue_enqueue_values(NULL, half), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_queue_enqueue_values(q, NULL), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_queue_enqueue_values(q, half), QF_INVALID_ARGUMENT);
    cr_assert(strstr(qf_last_message(), "vals[1]") != NULL, "%s", qf_last_message());
    cr_assert_eq(qf_queue_size(q), 0);
    put_example(q, 3);
    void *outs[2] = {&v, NULL};
    cr_assert_eq(qf_queue_dequeue_values(NULL, outs), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_queue_dequeue_values(q, NULL), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_INVALID_ARGUMENT);
    cr_assert(strstr(qf_last_message(), "outs[1]") != NULL, "%s", qf_last_message());
    cr_assert_eq(v, 7, "a refused dequeue wrote a value");
    cr_assert_eq(qf_queue_size(q), 1, "a refused dequeue took the element");
    outs[1] = f;
    cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OK);
    cr_assert_eq(v, 3);
    qf_queue_unref(q);
}

Test(queue_values, try_and_deadline_forms_leave_the_buffers)
{
    qf_queue *q = example_queue(2);
    int64_t v = 42;
    float f[FEATURES] = {0};
    void *outs[2] = {&v, f};
    cr_assert_eq(qf_queue_try_dequeue_values(q, outs), QF_UNAVAILABLE);
    cr_assert_eq(qf_queue_dequeue_values_until(q, qf_deadline_in_s(0), outs), QF_DEADLINE_EXCEEDED);
    cr_assert_eq(v, 42);
    const void *vals[2] = {&v, f};
    cr_assert_eq(qf_queue_try_enqueue_values(q, vals), QF_OK);
    cr_assert_eq(qf_queue_enqueue_values_until(q, vals, qf_deadline_in_s(1)), QF_OK);
    cr_assert_eq(qf_queue_try_enqueue_values(q, vals), QF_UNAVAILABLE);
    cr_assert(strstr(qf_last_message(), "is full") != NULL, "%s", qf_last_message());
    cr_assert_eq(qf_queue_enqueue_values_until(q, vals, qf_deadline_in_s(0)), QF_DEADLINE_EXCEEDED);
    cr_assert_eq(qf_queue_size(q), 2);
    v = 0;
    cr_assert_eq(qf_queue_try_dequeue_values(q, outs), QF_OK);
    cr_assert_eq(v, 42);
    qf_queue_unref(q); /* one left: freed with the queue */
}

Test(queue_values, close_refuses_new_values_and_drains_the_old)
{
    qf_queue *q = example_queue(4);
    put_example(q, 1);
    put_example(q, 2);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    int64_t v = 9;
    float f[FEATURES];
    const void *vals[2] = {&v, f};
    cr_assert_eq(qf_queue_enqueue_values(q, vals), QF_CANCELLED);
    cr_assert(strstr(qf_last_message(), "is closed") != NULL, "%s", qf_last_message());
    cr_assert_eq(take_example(q), 1);
    cr_assert_eq(take_example(q), 2);
    void *outs[2] = {&v, f};
    cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OUT_OF_RANGE);
    cr_assert_eq(v, 9);
    qf_queue_unref(q);
}

/* An unbounded queue keeps its values in blocks: the ones left are freed
 * with the queue (LeakSanitizer). */
Test(queue_values, leftover_blocks_are_freed_with_the_queue)
{
    qf_queue *q = example_queue(-1);
    for (int64_t v = 0; v < 100; v++)
        put_example(q, v);
    cr_assert_eq(take_example(q), 0);
    qf_queue_unref(q);
}

/* The poll forms (tasks): pending on an empty or full queue, the waker
 * called once the other side moves, then done. */
static atomic_int wakes;
static void on_wake(qf_waker *w)
{
    (void)w;
    atomic_fetch_add(&wakes, 1);
}

Test(queue_values, poll_forms_pend_and_are_woken)
{
    qf_queue *q = example_queue(1);
    qf_waker w;
    qf_waker_init(&w, on_wake, NULL);
    atomic_store(&wakes, 0);
    int64_t v = 5;
    float f[FEATURES] = {0};
    void *outs[2] = {&v, f};
    cr_assert_eq(qf_queue_poll_dequeue_values(q, &w, outs), QF_PENDING);
    cr_assert_eq(v, 5);
    put_example(q, 8);
    cr_expect_eq(atomic_load(&wakes), 1);
    qf_waker_init(&w, on_wake, NULL);
    cr_assert_eq(qf_queue_poll_dequeue_values(q, &w, outs), QF_OK);
    cr_assert_eq(v, 8);
    put_example(q, 9); /* full again */
    const void *vals[2] = {&v, f};
    qf_waker_init(&w, on_wake, NULL);
    cr_assert_eq(qf_queue_poll_enqueue_values(q, vals, &w), QF_PENDING);
    cr_assert_eq(take_example(q), 9);
    cr_expect_eq(atomic_load(&wakes), 2);
    qf_waker_init(&w, on_wake, NULL);
    v = 10;
    for (int k = 0; k < FEATURES; k++)
        f[k] = feature(10, k);
    cr_assert_eq(qf_queue_poll_enqueue_values(q, vals, &w), QF_OK);
    cr_assert_eq(take_example(q), 10);
    qf_queue_unref(q);
}

/* Values of more than 248 bytes do not fit a cell: each put takes a block
 * (int64 + float32 [64], 264 bytes). A put that fails (full, deadline,
 * closed, cancelled while blocked) frees its block (LeakSanitizer) and
 * leaves the caller's buffers as they were. */
#define WIDE 64

static qf_queue *wide_queue(int64_t cap)
{
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(WIDE)};
    return fifo(cap, 2, dt, sh);
}

typedef struct {
    qf_queue *q;
    qf_code rc;
} blocked_put;

static void *put_wide(void *a)
{
    blocked_put *b = a;
    int64_t v = 99;
    float f[WIDE] = {0};
    const void *vals[2] = {&v, f};
    b->rc = qf_queue_enqueue_values(b->q, vals);
    return NULL;
}

Test(queue_values, a_failed_put_of_a_block_frees_it)
{
    qf_queue *q = wide_queue(2);
    int64_t v = 1;
    float f[WIDE];
    for (int k = 0; k < WIDE; k++)
        f[k] = (float)k;
    const void *vals[2] = {&v, f};
    cr_assert_eq(qf_queue_enqueue_values(q, vals), QF_OK);
    v = 2;
    cr_assert_eq(qf_queue_enqueue_values(q, vals), QF_OK);
    cr_assert_eq(qf_queue_try_enqueue_values(q, vals), QF_UNAVAILABLE);
    cr_assert_eq(qf_queue_enqueue_values_until(q, vals, qf_deadline_in_s(0.05)),
                 QF_DEADLINE_EXCEEDED);
    blocked_put b = {.q = q, .rc = QF_OK};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, put_wide, &b), 0);
    /* Blocked on the full queue or not yet there: cancelled either way. */
    cr_assert_eq(qf_queue_close(q, true), QF_OK);
    pthread_join(th, NULL);
    cr_assert_eq(b.rc, QF_CANCELLED, "%s", qf_code_name(b.rc));
    cr_assert_eq(qf_queue_enqueue_values(q, vals), QF_CANCELLED);
    int64_t got = 0;
    float g[WIDE];
    void *outs[2] = {&got, g};
    cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OK);
    cr_assert_eq(got, 1);
    for (int k = 0; k < WIDE; k++)
        cr_assert_eq(g[k], (float)k);
    cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OK);
    cr_assert_eq(got, 2);
    cr_assert_eq(qf_queue_dequeue_values(q, outs), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* A take that waits out its deadline on an empty queue. */
Test(queue_values, a_blocked_take_times_out_and_writes_nothing)
{
    qf_queue *q = example_queue(4);
    int64_t v = 3;
    float f[FEATURES];
    void *outs[2] = {&v, f};
    cr_assert_eq(qf_queue_dequeue_values_until(q, qf_deadline_in_s(0.05), outs),
                 QF_DEADLINE_EXCEEDED);
    cr_assert_eq(v, 3);
    qf_queue_unref(q);
}

/* ------------------------------------------------------------------ stress */

#define NP 8
#define NC 8

typedef struct {
    qf_queue *q;
    long per_producer;
    uint8_t *seen;
    atomic_long received, ok;
    atomic_int errors;
} stress;

typedef struct {
    stress *s;
    int id;
} targ;

/* Odd producers and consumers use the element calls, even ones values. */
static qf_code put_one(qf_queue *q, int64_t v, bool as_values)
{
    float f[FEATURES];
    for (int k = 0; k < FEATURES; k++)
        f[k] = feature(v, k);
    if (as_values) {
        const void *vals[2] = {&v, f};
        return qf_queue_enqueue_values(q, vals);
    }
    qf_shape sf = QF_SHAPE(FEATURES);
    qf_tensor *ft = qf_tensor_new(QF_FLOAT32, &sf);
    if (!ft)
        return QF_RESOURCE_EXHAUSTED;
    memcpy(qf_tensor_data(ft), f, sizeof(f));
    qf_tensor *ts[2] = {qf_tensor_new_i64(v), ft};
    qf_element *e = qf_element_of(2, ts);
    qf_code rc = qf_queue_enqueue(q, e);
    if (rc != QF_OK)
        qf_element_free(e);
    return rc;
}

static void *producer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    for (long i = 0; i < s->per_producer; i++) {
        qf_code rc = put_one(s->q, ((int64_t)t->id << 40) | i, t->id % 2 == 0);
        if (rc == QF_CANCELLED)
            return NULL; /* closed with cancel: this one stays with us */
        if (rc != QF_OK) {
            atomic_fetch_add(&s->errors, 1);
            return NULL;
        }
        atomic_fetch_add(&s->ok, 1);
    }
    return NULL;
}

static qf_code take_one(qf_queue *q, bool as_values, int64_t *v, float *f)
{
    if (as_values) {
        void *outs[2] = {v, f};
        return qf_queue_dequeue_values(q, outs);
    }
    qf_element *e = NULL;
    qf_code rc = qf_queue_dequeue(q, &e);
    if (rc != QF_OK)
        return rc;
    *v = *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0));
    memcpy(f, qf_tensor_cdata(qf_element_get(e, 1)), FEATURES * sizeof(float));
    qf_element_free(e);
    return QF_OK;
}

static void *consumer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    long last[NP]; /* per producer, the last seq this consumer saw */
    for (int p = 0; p < NP; p++)
        last[p] = -1;
    for (;;) {
        int64_t v;
        float f[FEATURES];
        qf_code rc = take_one(s->q, t->id % 2 == 0, &v, f);
        if (rc == QF_OUT_OF_RANGE)
            return NULL;
        if (rc != QF_OK) {
            atomic_fetch_add(&s->errors, 1);
            return NULL;
        }
        int p = (int)(v >> 40);
        long seq = (long)(v & ((1LL << 40) - 1));
        if (p < 0 || p >= NP || seq >= s->per_producer || seq <= last[p]) {
            atomic_fetch_add(&s->errors, 1); /* made up, or out of order */
            continue;
        }
        last[p] = seq;
        for (int k = 0; k < FEATURES; k++)
            if (f[k] != feature(v, k))
                atomic_fetch_add(&s->errors, 1);
        if (__atomic_exchange_n(&s->seen[(size_t)p * (size_t)s->per_producer + (size_t)seq], 1,
                                __ATOMIC_RELAXED))
            atomic_fetch_add(&s->errors, 1); /* twice */
        atomic_fetch_add(&s->received, 1);
    }
}

static void stress_report(void *a)
{
    stress *s = a;
    fprintf(stderr, "queue_values stress hung: %ld in, %ld received, %d errors\n",
            atomic_load(&s->ok), atomic_load(&s->received), atomic_load(&s->errors));
}

/* 8 x 8 threads through a queue of `cap`; with cancel_after > 0 the queue
 * is closed with cancel once that many arrived (else closed when the
 * producers are done): what arrived is exactly what went in, once each. */
static void run_stress(int64_t cap, long per_producer, long cancel_after)
{
    stress s = {.q = example_queue(cap), .per_producer = qft_stress_scale(per_producer, 500)};
    s.seen = calloc((size_t)NP * (size_t)s.per_producer, 1);
    cr_assert_not_null(s.seen);
    qft_watchdog wd;
    qft_watchdog_start(&wd, 240, stress_report, &s);
    pthread_t pt[NP], ct[NC];
    targ pa[NP], ca[NC];
    for (int i = 0; i < NC; i++) {
        ca[i] = (targ){&s, i};
        pthread_create(&ct[i], NULL, consumer, &ca[i]);
    }
    for (int i = 0; i < NP; i++) {
        pa[i] = (targ){&s, i};
        pthread_create(&pt[i], NULL, producer, &pa[i]);
    }
    if (cancel_after > 0) {
        long at = qft_stress_scale(cancel_after, 100);
        while (atomic_load(&s.received) < at)
            sched_yield();
        cr_assert_eq(qf_queue_close(s.q, true), QF_OK);
    }
    for (int i = 0; i < NP; i++)
        pthread_join(pt[i], NULL);
    if (cancel_after <= 0)
        cr_assert_eq(qf_queue_close(s.q, false), QF_OK);
    for (int i = 0; i < NC; i++)
        pthread_join(ct[i], NULL);
    qft_watchdog_stop(&wd);
    cr_assert_eq(atomic_load(&s.errors), 0, "cancel after %ld", cancel_after);
    cr_assert_eq(atomic_load(&s.received), atomic_load(&s.ok), "cancel after %ld", cancel_after);
    if (cancel_after <= 0) {
        cr_assert_eq(atomic_load(&s.received), s.per_producer * NP);
        for (long i = 0; i < NP * s.per_producer; i++)
            cr_assert_eq(s.seen[i], 1, "value %ld never arrived", i);
    }
    free(s.seen);
    qf_queue_unref(s.q);
}

Test(queue_values, stress_8x8_both_apis_exactly_once_in_order, .timeout = 300)
{
    run_stress(16, 20000, 0);
}

Test(queue_values, stress_8x8_in_blocks_exactly_once_in_order, .timeout = 300)
{
    run_stress(-1, 10000, 0);
}

/* A close with cancel at a moment drawn from the clock: every enqueue
 * either went in and arrived once, or failed and left nothing behind. */
Test(queue_values, cancel_at_a_random_moment_loses_and_duplicates_nothing, .timeout = 300)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    run_stress(4, 20000, 1 + (long)(ts.tv_nsec % 20000));
}
