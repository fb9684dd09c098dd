/* test_queue_refill.c - spec 28-29 (section A, every queue kind): a dequeue
 * from a full queue whose producer is blocked in an enqueue_many larger
 * than the capacity returns with the queue full again. TensorFlow runs the
 * pending enqueue attempts under the queue's lock as part of the dequeue;
 * its test checks size() right after each dequeue.
 *
 * Each run: an empty queue of capacity C, a thread calling enqueue_many of
 * C + K rows; once size() reads C (its first rows are in and it has not
 * returned: it is blocked to any observer) the test dequeues K times and
 * reads size() after each: it must be C every time. Then the enqueue
 * returns with every row in, and C more dequeues empty the queue (in
 * order for the FIFO kinds). Every kind, quiet and beside oversubscribed
 * busy threads (the case that used to fail: the producer preempted between
 * its rows going in and its getting in line).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qf_locked_queue-impl.h"
#include "qflow.h"

#define CAP 4
#define K 100
#define REPS 5
#define WAIT_NS (60 * 1000000000LL)

typedef enum { FIFO, FIFO_VEC, PADDING, SHUFFLE, PRIORITY, NKINDS } kind;
static const char *const kind_names[NKINDS] = {"FIFOQueue", "FIFOQueue of [2]", "PaddingFIFOQueue",
                                               "RandomShuffleQueue", "PriorityQueue"};

static qf_queue *mkq(kind k, int64_t cap)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = k == FIFO_VEC ? QF_SHAPE(2) : qf_shape_scalar();
    qf_queue_options o = {
        .capacity = cap, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "refill"};
    qf_queue *q = NULL;
    qf_code rc;
    switch (k) {
    case FIFO:
    case FIFO_VEC:
        rc = qf_fifo_queue_new(&o, &q);
        break;
    case PADDING:
        rc = qf_padding_fifo_queue_new(&o, &q);
        break;
    case SHUFFLE:
        rc = qf_random_shuffle_queue_new(&o, &q);
        break;
    default:
        rc = qf_priority_queue_new(&o, &q);
        break;
    }
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
    return q;
}

/* Rows 1..n; the priority queue's priorities are the values too. */
static qf_element *rows_1_to(kind k, int64_t n)
{
    int32_t *v = malloc((size_t)n * 2 * sizeof(int32_t));
    int64_t *p = malloc((size_t)n * sizeof(int64_t));
    cr_assert(v && p);
    for (int64_t i = 0; i < n; i++) {
        v[2 * i] = v[2 * i + 1] = (int32_t)(i + 1);
        p[i] = i + 1;
    }
    qf_element *e;
    if (k == PRIORITY) {
        qf_shape sh = QF_SHAPE(n);
        int32_t *w = malloc((size_t)n * sizeof(int32_t));
        cr_assert(w);
        for (int64_t i = 0; i < n; i++)
            w[i] = (int32_t)(i + 1);
        qf_tensor *t[2] = {qf_tensor_new_from(QF_INT64, &sh, p, (size_t)n * sizeof(int64_t)),
                           qf_tensor_new_from(QF_INT32, &sh, w, (size_t)n * sizeof(int32_t))};
        e = qf_element_of(2, t);
        free(w);
    } else if (k == FIFO_VEC) {
        qf_shape sh = QF_SHAPE(n, 2);
        qf_tensor *t = qf_tensor_new_from(QF_INT32, &sh, v, (size_t)n * 2 * sizeof(int32_t));
        e = qf_element_of(1, &t);
    } else {
        qf_shape sh = QF_SHAPE(n);
        int32_t *w = malloc((size_t)n * sizeof(int32_t));
        cr_assert(w);
        for (int64_t i = 0; i < n; i++)
            w[i] = (int32_t)(i + 1);
        qf_tensor *t = qf_tensor_new_from(QF_INT32, &sh, w, (size_t)n * sizeof(int32_t));
        e = qf_element_of(1, &t);
        free(w);
    }
    free(v);
    free(p);
    cr_assert(e);
    return e;
}

static int32_t value_of(kind k, const qf_element *e)
{
    return *(const int32_t *)qf_tensor_cdata(qf_element_get(e, k == PRIORITY ? 1 : 0));
}

typedef struct producer {
    pthread_t th;
    qf_queue *q;
    qf_element *batch;
    _Atomic bool done;
    qf_code rc;
    size_t enqueued;
    char msg[200];
} producer;

static void *producer_main(void *arg)
{
    producer *p = arg;
    p->rc = qf_queue_enqueue_many(p->q, p->batch, &p->enqueued);
    if (p->rc != QF_OK)
        snprintf(p->msg, sizeof(p->msg), "%s", qf_last_message());
    atomic_store(&p->done, true);
    return NULL;
}

static void nap(void)
{
    struct timespec ts = {0, 50000}; /* polling interval, not an ordering */
    nanosleep(&ts, NULL);
}

/* Busy threads, more than the CPUs, that take time slices from the
 * producer at any point. */
typedef struct load {
    pthread_t th[16];
    int n;
    _Atomic bool stop;
} load;

static void *burn(void *arg)
{
    load *l = arg;
    volatile uint64_t x = 1;
    while (!atomic_load_explicit(&l->stop, memory_order_relaxed))
        for (int i = 0; i < 10000; i++)
            x = x * 6364136223846793005ull + 1;
    return NULL;
}

static void load_start(load *l)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    l->n = (int)(ncpu < 1 ? 4 : ncpu * 2 + 2);
    if (l->n > 16)
        l->n = 16;
    atomic_init(&l->stop, false);
    for (int i = 0; i < l->n; i++)
        cr_assert_eq(pthread_create(&l->th[i], NULL, burn, l), 0);
}

static void load_stop(load *l)
{
    atomic_store(&l->stop, true);
    for (int i = 0; i < l->n; i++)
        pthread_join(l->th[i], NULL);
}

/* One run; returns how many of the K dequeues left size() != cap. */
static int run_once(kind k, int64_t cap, int64_t extra)
{
    qf_queue *q = mkq(k, cap);
    producer p = {.q = q, .batch = rows_1_to(k, cap + extra)};
    atomic_init(&p.done, false);
    cr_assert_eq(pthread_create(&p.th, NULL, producer_main, &p), 0);
    int64_t end = qf_now_ns() + WAIT_NS;
    while (qf_queue_size(q) != cap && !atomic_load(&p.done) && qf_now_ns() < end)
        nap();
    cr_assert_not(atomic_load(&p.done), "%s: enqueue_many returned early: %s (%s)", kind_names[k],
                  qf_code_name(p.rc), p.msg);
    cr_assert_eq(qf_queue_size(q), cap, "%s: the first rows never went in", kind_names[k]);

    int bad = 0;
    int64_t first_bad_size = -1;
    for (int64_t j = 1; j <= extra; j++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK, "%s", qf_last_message());
        int64_t sz = qf_queue_size(q);
        if (sz != cap && bad++ == 0)
            first_bad_size = sz;
        if (k == FIFO || k == FIFO_VEC || k == PADDING)
            cr_assert_eq(value_of(k, e), (int32_t)j, "%s: order", kind_names[k]);
        qf_element_free(e);
    }
    cr_expect_eq(bad, 0, "%s: %d of %lld dequeues returned with size() != %lld (first: %lld)",
                 kind_names[k], bad, (long long)extra, (long long)cap, (long long)first_bad_size);
    pthread_join(p.th, NULL);
    cr_assert_eq(p.rc, QF_OK, "%s: %s", kind_names[k], p.msg);
    cr_assert_eq(p.enqueued, (size_t)(cap + extra));
    for (int64_t j = 1; j <= cap; j++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_size(q), cap - j + 1);
        cr_assert_eq(qf_queue_try_dequeue(q, &e), QF_OK, "%s", qf_last_message());
        if (k == FIFO || k == FIFO_VEC || k == PADDING)
            cr_assert_eq(value_of(k, e), (int32_t)(extra + j));
        qf_element_free(e);
    }
    cr_assert_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
    return bad;
}

static void run_kind(kind k, bool loaded)
{
    load l;
    if (loaded)
        load_start(&l);
    int bad = 0;
    for (int r = 0; r < REPS; r++)
        bad += run_once(k, CAP, K);
    if (loaded)
        load_stop(&l);
    cr_expect_eq(bad, 0, "%s%s: %d of %d dequeues left the queue short", kind_names[k],
                 loaded ? " under load" : "", bad, REPS * K);
}

Test(queue_refill, fifo, .timeout = 240)
{
    run_kind(FIFO, false);
    run_kind(FIFO, true);
}

Test(queue_refill, fifo_of_vectors, .timeout = 240)
{
    run_kind(FIFO_VEC, false);
    run_kind(FIFO_VEC, true);
}

Test(queue_refill, padding_fifo, .timeout = 240)
{
    run_kind(PADDING, false);
    run_kind(PADDING, true);
}

Test(queue_refill, random_shuffle, .timeout = 240)
{
    run_kind(SHUFFLE, false);
    run_kind(SHUFFLE, true);
}

Test(queue_refill, priority, .timeout = 240)
{
    run_kind(PRIORITY, false);
    run_kind(PRIORITY, true);
}

/* A FIFO queue whose capacity is beyond the largest ring: rows past the
 * ring go to the overflow list, and the one that fills the queue is there. */
Test(queue_refill, fifo_beyond_the_ring, .timeout = 240)
{
    cr_expect_eq(run_once(FIFO, (1 << 20) + 3, 20), 0);
}

/* ---------------------------------------------------------------------
 * A line with holes: producers blocked in a single enqueue on a full queue
 * wait in line (put requests); those whose deadline passes take their
 * request back out of the line, at its head, in its middle and at its tail,
 * two of them side by side. The others must still be served oldest first
 * (FIFO) and every one of them exactly once, with nothing of those that
 * gave up. The requests are doubly linked so that a take-back is O(1)
 * (10,000 runners in line made the walk from the head most of a run's
 * time); this checks the links a take-back rewrites. The deadlines decide
 * only where the holes fall, never the verdict: under heavy load a
 * producer may time out before the next one is in line, and the check
 * still holds.
 */
#define LINE 9
#define GIVE_UP_NS (300 * 1000000LL)

static bool gives_up(int i)
{
    return i % 4 == 0 || i == 5; /* 0, 4, 5, 8: head, middle pair, tail */
}

typedef struct liner {
    pthread_t th;
    qf_queue *q;
    qf_element *e;
    int i;
    _Atomic bool done;
    qf_code rc;
} liner;

static qf_element *one_row(kind k, int32_t v)
{
    qf_tensor *t[2];
    qf_shape sc = qf_shape_scalar();
    qf_element *e;
    if (k == PRIORITY) {
        int64_t pr = v;
        t[0] = qf_tensor_new_from(QF_INT64, &sc, &pr, sizeof(pr));
        t[1] = qf_tensor_new_from(QF_INT32, &sc, &v, sizeof(v));
        e = qf_element_of(2, t);
    } else {
        t[0] = qf_tensor_new_from(QF_INT32, &sc, &v, sizeof(v));
        e = qf_element_of(1, t);
    }
    cr_assert(e);
    return e;
}

static void *liner_main(void *arg)
{
    liner *l = arg;
    qf_deadline d = gives_up(l->i) ? qf_now_ns() + GIVE_UP_NS : QF_FOREVER;
    l->rc = qf_queue_enqueue_until(l->q, l->e, d);
    atomic_store(&l->done, true);
    return NULL;
}

/* Producers in line now (thread requests of either engine). */
static size_t in_line(kind k, qf_queue *q)
{
    if (k == SHUFFLE || k == PRIORITY)
        return qf__locked_producers_waiting(qf__locked_of(q));
    return atomic_load(&q->fifo.reqs_n);
}

static void line_with_holes(kind k)
{
    qf_queue *q = mkq(k, 1);
    cr_assert_eq(qf_queue_enqueue(q, one_row(k, 1000)), QF_OK, "%s", qf_last_message());
    liner ls[LINE];
    for (int i = 0; i < LINE; i++) {
        ls[i] = (liner){.q = q, .e = one_row(k, (int32_t)(i + 1)), .i = i};
        atomic_init(&ls[i].done, false);
        cr_assert_eq(pthread_create(&ls[i].th, NULL, liner_main, &ls[i]), 0);
        /* In line behind the ones before it, or given up already. */
        qf_deadline d = qf_deadline_in_s(60);
        for (;;) {
            size_t gone = 0;
            for (int j = 0; j <= i; j++)
                gone += atomic_load(&ls[j].done);
            if (in_line(k, q) + gone >= (size_t)(i + 1))
                break;
            cr_assert(!qf_deadline_passed(d), "%s: producer %d never got in line", kind_names[k],
                      i);
            sched_yield();
        }
    }
    for (int i = 0; i < LINE; i++) {
        if (!gives_up(i))
            continue;
        pthread_join(ls[i].th, NULL);
        cr_assert_eq(ls[i].rc, QF_DEADLINE_EXCEEDED, "%s: producer %d: %s", kind_names[k], i,
                     qf_code_name(ls[i].rc));
        qf_element_free(ls[i].e);
    }
    /* Each dequeue makes room that the oldest waiting producer fills. */
    int32_t got[LINE + 1];
    int n = 0;
    for (; n < LINE + 1; n++) {
        qf_element *e = NULL;
        qf_code rc = qf_queue_dequeue_until(q, qf_deadline_in_s(n == 0 ? 60 : 0.05), &e);
        if (rc == QF_DEADLINE_EXCEEDED)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", kind_names[k], qf_last_message());
        got[n] = value_of(k, e);
        qf_element_free(e);
    }
    for (int i = 0; i < LINE; i++) {
        if (gives_up(i))
            continue;
        pthread_join(ls[i].th, NULL);
        cr_assert_eq(ls[i].rc, QF_OK, "%s: producer %d: %s", kind_names[k], i,
                     qf_code_name(ls[i].rc));
    }
    /* Rows of producers that returned QF_OK after the last dequeue. */
    qf_element *e = NULL;
    while (qf_queue_try_dequeue(q, &e) == QF_OK) {
        cr_assert_lt(n, LINE + 1);
        got[n++] = value_of(k, e);
        qf_element_free(e);
    }
    cr_assert_eq(in_line(k, q), 0, "%s: a request stayed in line", kind_names[k]);
    int32_t want[LINE + 1];
    int m = 0;
    want[m++] = 1000;
    for (int i = 0; i < LINE; i++)
        if (!gives_up(i))
            want[m++] = i + 1;
    cr_assert_eq(n, m, "%s: %d rows came out, %d expected", kind_names[k], n, m);
    if (k == FIFO) {
        for (int j = 0; j < m; j++)
            cr_assert_eq(got[j], want[j], "%s: row %d is %d, expected %d (oldest first)",
                         kind_names[k], j, got[j], want[j]);
    } else {
        bool seen[LINE + 1] = {false};
        for (int j = 0; j < n; j++) {
            int slot = got[j] == 1000 ? 0 : got[j];
            cr_assert(slot >= 0 && slot <= LINE && !seen[slot] &&
                          (slot == 0 || !gives_up(slot - 1)),
                      "%s: row %d (%d) unexpected or twice", kind_names[k], j, got[j]);
            seen[slot] = true;
        }
    }
    qf_queue_unref(q);
}

Test(queue_refill, fifo_line_with_holes, .timeout = 240)
{
    line_with_holes(FIFO);
}

Test(queue_refill, shuffle_line_with_holes, .timeout = 240)
{
    line_with_holes(SHUFFLE);
}

Test(queue_refill, priority_line_with_holes, .timeout = 240)
{
    line_with_holes(PRIORITY);
}
