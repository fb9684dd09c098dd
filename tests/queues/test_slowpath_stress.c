/* test_slowpath_stress.c - the queue engines when they cannot finish at once:
 * waiting, waking, close and cancel at random moments, timed-out and tried
 * batches, oversubscribed (16+ threads on the 2 cores CI has).
 *
 * Every round: producers send (id << 40 | seq) with blocking enqueues until
 * the queue refuses them; consumers take with a random mix of blocking,
 * timed and tried single and batch dequeues until end-of-data; a closer
 * closes the queue (plain or cancelling) at a random moment; a sampler reads
 * size() against the capacity. Checked per round:
 *   - nobody sleeps forever: a watchdog turns a round that does not end in
 *     ROUND_LIMIT_S into a failure that prints the queue's state;
 *   - every element whose enqueue succeeded arrives exactly once, and no
 *     element whose enqueue failed arrives;
 *   - each consumer sees each producer's elements in increasing order
 *     (FIFO-engine kinds);
 *   - size() never exceeds the capacity (no take here gathers more than the
 *     capacity, so nothing is ever given back over it).
 * Bounded in count (QF_STRESS_SCALE divides the rounds) and in time. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qflow.h"
#include "qf_test_stress.h"

#define MAXP 16
#define MAXC 16
#define ROUND_LIMIT_S 60
#define SEQ_BITS 40

/* xorshift64*: per-thread random choices without a shared state. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* K_SCALAR: a FIFOQueue of int64 scalars, which stores the numbers in its
 * slots (any bit pattern: the values sent are complemented, so most have
 * the top bits set), with the tombstones of enqueues that lose a race with
 * close tagged beside them. */
typedef enum { K_PTR, K_FIFO, K_PADDING, K_SHUFFLE, K_PRIORITY, K_SCALAR } kind;

typedef struct round round;

typedef struct {
    round *r;
    int id;
    uint64_t seed;
} worker;

struct round {
    kind k;
    qf_queue *q;
    int64_t cap;
    int np, nc;
    long per_producer;
    int max_batch; /* <= cap */
    bool ordered;
    /* ok[id][seq]: the producer's enqueue of seq succeeded. seen: arrivals. */
    uint8_t *ok, *seen;
    atomic_long delivered;
    atomic_long produced_ok;
    atomic_int errors;
    atomic_int producers_done, consumers_done;
    long close_after; /* deliveries before the closer acts */
    bool cancel;
    atomic_bool over;
    atomic_long max_size;
    char what[160];
};

static void fail(round *r, const char *fmt, ...)
{
    if (atomic_fetch_add(&r->errors, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->what, sizeof(r->what), fmt, ap);
        va_end(ap);
    }
}

static qf_element *make_elem(round *r, uint64_t v)
{
    if (r->k == K_SCALAR) {
        qf_tensor *t = qf_tensor_new_i64((int64_t)~v);
        return qf_element_of(1, &t);
    }
    qf_shape sh = QF_SHAPE(1);
    qf_tensor *t = qf_tensor_new(QF_INT64, &sh);
    ((int64_t *)qf_tensor_data(t))[0] = (int64_t)v;
    if (r->k == K_PRIORITY) {
        qf_tensor *parts[2] = {qf_tensor_new_i64((int64_t)(v & ((1ull << SEQ_BITS) - 1))), t};
        return qf_element_of(2, parts);
    }
    return qf_element_of(1, &t);
}

/* The value in row i of component `c` of an element or batch. */
static uint64_t value_at(round *r, qf_element *e, int64_t i)
{
    const qf_tensor *t = qf_element_get(e, r->k == K_PRIORITY ? 1 : 0);
    uint64_t v = (uint64_t)((const int64_t *)qf_tensor_cdata(t))[i];
    return r->k == K_SCALAR ? ~v : v;
}

static void *producer(void *a)
{
    worker *w = a;
    round *r = w->r;
    for (long s = 1; s <= r->per_producer; s++) {
        uint64_t v = ((uint64_t)w->id << SEQ_BITS) | (uint64_t)s;
        qf_code rc;
        if (r->k == K_PTR) {
            rc = qf_queue_enqueue_ptr(r->q, (void *)(uintptr_t)v);
        } else {
            qf_element *e = make_elem(r, v);
            rc = qf_queue_enqueue(r->q, e);
            if (rc != QF_OK)
                qf_element_free(e);
        }
        if (rc == QF_OK) {
            r->ok[(size_t)w->id * (size_t)r->per_producer + (size_t)s - 1] = 1;
            atomic_fetch_add(&r->produced_ok, 1);
        } else if (rc == QF_CANCELLED) {
            break; /* closed */
        } else {
            fail(r, "producer %d: enqueue returned %d (%s)", w->id, rc, qf_last_message());
            break;
        }
    }
    atomic_fetch_add(&r->producers_done, 1);
    return NULL;
}

static void receive(round *r, uint64_t *last, uint64_t v)
{
    unsigned id = (unsigned)(v >> SEQ_BITS);
    uint64_t seq = v & ((1ull << SEQ_BITS) - 1);
    if (id >= (unsigned)r->np || seq == 0 || seq > (uint64_t)r->per_producer) {
        fail(r, "garbage value %#llx", (unsigned long long)v);
        return;
    }
    if (r->ordered && seq <= last[id])
        fail(r, "producer %u: seq %llu after %llu at one consumer", id, (unsigned long long)seq,
             (unsigned long long)last[id]);
    last[id] = seq;
    size_t cell = (size_t)id * (size_t)r->per_producer + seq - 1;
    if (__atomic_exchange_n(&r->seen[cell], 1, __ATOMIC_RELAXED))
        fail(r, "producer %u seq %llu delivered twice", id, (unsigned long long)seq);
    atomic_fetch_add(&r->delivered, 1);
}

/* One take of a random form. Returns its code; feeds what it got to receive(). */
static qf_code take_random(round *r, uint64_t *seed, uint64_t *last, bool only_single)
{
    unsigned form = only_single ? 0 : (unsigned)(rnd(seed) % 6);
    int64_t n = 1 + (int64_t)(rnd(seed) % (uint64_t)r->max_batch);
    /* Short deadlines force timed-out batches while the queue is busy. */
    qf_deadline soon = qf_deadline_in_s((double)(rnd(seed) % 200) * 1e-6);
    if (r->k == K_PTR) {
        void *buf[64];
        size_t got = 1;
        qf_code rc;
        switch (form) {
        case 0:
            rc = qf_queue_dequeue_ptr(r->q, &buf[0]);
            break;
        case 1:
            rc = qf_queue_dequeue_many_ptr(r->q, (size_t)n, soon, buf), got = (size_t)n;
            break;
        case 2:
            rc = qf_queue_dequeue_many_ptr(r->q, (size_t)n, QF_NO_WAIT, buf), got = (size_t)n;
            break;
        case 3:
            rc = qf_queue_dequeue_up_to_ptr(r->q, (size_t)n, soon, buf, &got);
            break;
        case 4:
            rc = qf_queue_dequeue_up_to_ptr(r->q, (size_t)n, QF_FOREVER, buf, &got);
            break;
        default:
            rc = qf_queue_dequeue_ptr_until(r->q, soon, &buf[0]);
            break;
        }
        if (rc == QF_OK)
            for (size_t i = 0; i < got; i++)
                receive(r, last, (uint64_t)(uintptr_t)buf[i]);
        return rc;
    }
    qf_element *e = NULL;
    qf_code rc;
    bool batch = true;
    switch (form) {
    case 0:
        rc = qf_queue_dequeue(r->q, &e), batch = false;
        break;
    case 1:
        rc = qf_queue_dequeue_many_until(r->q, n, soon, &e);
        break;
    case 2:
        rc = qf_queue_try_dequeue_many(r->q, n, &e);
        break;
    case 3:
        rc = qf_queue_dequeue_up_to_until(r->q, n, soon, &e);
        break;
    case 4:
        rc = qf_queue_dequeue_up_to(r->q, n, &e);
        break;
    default:
        rc = qf_queue_dequeue_until(r->q, soon, &e), batch = false;
        break;
    }
    if (rc == QF_OK) {
        int64_t rows = batch ? qf_tensor_shape(qf_element_get(e, 0))->dims[0] : 1;
        if (batch && form != 3 && form != 4 && rows != n)
            fail(r, "dequeue_many(%lld) returned %lld rows", (long long)n, (long long)rows);
        for (int64_t i = 0; i < rows; i++)
            receive(r, last, value_at(r, e, i));
        qf_element_free(e);
    }
    return rc;
}

static void *consumer(void *a)
{
    worker *w = a;
    round *r = w->r;
    uint64_t last[MAXP] = {0};
    bool only_single = false;
    for (;;) {
        qf_code rc = take_random(r, &w->seed, last, only_single);
        if (rc == QF_OK || rc == QF_DEADLINE_EXCEEDED || rc == QF_UNAVAILABLE)
            continue;
        if (rc == QF_OUT_OF_RANGE) {
            /* A batch can be refused while single elements remain. */
            if (only_single)
                break;
            only_single = true;
            continue;
        }
        fail(r, "consumer %d: dequeue returned %d (%s)", w->id, rc, qf_last_message());
        break;
    }
    atomic_fetch_add(&r->consumers_done, 1);
    return NULL;
}

static void *closer(void *a)
{
    round *r = a;
    while (atomic_load(&r->delivered) < r->close_after && atomic_load(&r->producers_done) < r->np)
        sched_yield();
    qf_code rc = qf_queue_close(r->q, r->cancel);
    if (rc != QF_OK)
        fail(r, "close returned %d", rc);
    return NULL;
}

static void *sampler(void *a)
{
    round *r = a;
    while (!atomic_load(&r->over)) {
        int64_t s = qf_queue_size(r->q);
        if (s > atomic_load(&r->max_size))
            atomic_store(&r->max_size, s);
        sched_yield();
    }
    return NULL;
}

/* What a round that does not end in ROUND_LIMIT_S stood at (the watchdog
 * then aborts). */
static void report_hang(void *a)
{
    round *r = a;
    fprintf(stderr,
            "HANG: kind %d cap %lld %dP%dC cancel %d: %d/%d producers and %d/%d consumers "
            "done, delivered %ld, size %lld, closed %d\n",
            r->k, (long long)r->cap, r->np, r->nc, r->cancel, atomic_load(&r->producers_done),
            r->np, atomic_load(&r->consumers_done), r->nc, atomic_load(&r->delivered),
            (long long)qf_queue_size(r->q), qf_queue_is_closed(r->q));
}

static qf_queue *make_queue(kind k, int64_t cap)
{
    qf_queue *q = NULL;
    if (k == K_PTR) {
        cr_assert_eq(qf_ptr_queue_new(cap, "p", 0, NULL, &q), QF_OK);
        return q;
    }
    qf_dtype dt[2] = {QF_INT64, QF_INT64};
    qf_shape sh[2] = {QF_SHAPE(1), QF_SHAPE(1)};
    qf_queue_options o = {.capacity = cap, .num_components = 1, .dtypes = dt, .shapes = sh};
    switch (k) {
    case K_FIFO:
        cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
        break;
    case K_SCALAR:
        sh[0] = qf_shape_scalar();
        cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK);
        cr_assert(qf_queue_is_inline(q));
        break;
    case K_PADDING:
        cr_assert_eq(qf_padding_fifo_queue_new(&o, &q), QF_OK);
        break;
    case K_SHUFFLE:
        o.seed = 7;
        cr_assert_eq(qf_random_shuffle_queue_new(&o, &q), QF_OK);
        break;
    case K_PRIORITY: /* the int64 priority comes first, implied */
        cr_assert_eq(qf_priority_queue_new(&o, &q), QF_OK);
        break;
    default:
        break;
    }
    return q;
}

static void run_round(kind k, int64_t cap, int np, int nc, long per_producer, uint64_t seed)
{
    round *r = calloc(1, sizeof(*r));
    r->k = k;
    r->cap = cap;
    r->q = make_queue(k, cap);
    r->np = np;
    r->nc = nc;
    r->per_producer = per_producer;
    r->max_batch = (int)(cap < 8 ? cap : 8);
    r->ordered = k == K_PTR || k == K_FIFO || k == K_PADDING || k == K_SCALAR;
    r->ok = calloc((size_t)np * (size_t)per_producer, 1);
    r->seen = calloc((size_t)np * (size_t)per_producer, 1);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    long total = np * per_producer;
    /* Close early, midway, or only after the producers are done. */
    switch (rnd(&s) % 3) {
    case 0:
        r->close_after = (long)(rnd(&s) % (uint64_t)(total / 8 + 1));
        break;
    case 1:
        r->close_after = (long)(rnd(&s) % (uint64_t)total);
        break;
    default:
        r->close_after = total + 1;
        break;
    }
    r->cancel = rnd(&s) % 2;

    qft_watchdog wd;
    pthread_t pt[MAXP], ct[MAXC], cl, sm;
    worker pw[MAXP], cw[MAXC];
    qft_watchdog_start(&wd, ROUND_LIMIT_S, report_hang, r);
    pthread_create(&sm, NULL, sampler, r);
    for (int i = 0; i < nc; i++) {
        cw[i] = (worker){r, i, rnd(&s) | 1};
        pthread_create(&ct[i], NULL, consumer, &cw[i]);
    }
    for (int i = 0; i < np; i++) {
        pw[i] = (worker){r, i, rnd(&s) | 1};
        pthread_create(&pt[i], NULL, producer, &pw[i]);
    }
    pthread_create(&cl, NULL, closer, r);
    for (int i = 0; i < np; i++)
        pthread_join(pt[i], NULL);
    pthread_join(cl, NULL);
    for (int i = 0; i < nc; i++)
        pthread_join(ct[i], NULL);
    atomic_store(&r->over, true);
    pthread_join(sm, NULL);
    qft_watchdog_stop(&wd);

    cr_assert_eq(atomic_load(&r->errors), 0, "kind %d cap %lld: %s", k, (long long)cap, r->what);
    for (size_t i = 0; i < (size_t)total; i++) {
        if (r->ok[i] && !r->seen[i])
            cr_assert(0, "kind %d: element %zu enqueued but never delivered", k, i);
        if (!r->ok[i] && r->seen[i])
            cr_assert(0, "kind %d: element %zu delivered though its enqueue failed", k, i);
    }
    cr_assert_leq(atomic_load(&r->max_size), cap, "kind %d: size %ld over capacity %lld", k,
                  atomic_load(&r->max_size), (long long)cap);
    cr_assert_eq(qf_queue_size(r->q), 0);
    qf_queue_unref(r->q);
    free(r->ok);
    free(r->seen);
    free(r);
}

static void run_kind(kind k, int np, int nc)
{
    long rounds = qft_stress_scale(120, 1);
    for (long i = 0; i < rounds; i++) {
        int64_t cap = (int64_t[]){1, 2, 3, 4, 16, 64}[i % 6];
        run_round(k, cap, np, nc, 300, (uint64_t)i + 1);
    }
}

/* Rings of capacity 256 or more, where threads that meet at either end
 * wait for a stretch before they take or put (queues/engine/qf_fifo.c,
 * "Slip"): the same rounds, with enough elements per producer to reach
 * both ends, and the close and cancel landing inside those waits too. */
static void run_kind_slipping(kind k, int np, int nc)
{
    long rounds = qft_stress_scale(24, 1);
    for (long i = 0; i < rounds; i++) {
        /* Stretches of 64, 64, 192 and 256 (qf__fifo_slip_stretch()). */
        int64_t cap = (int64_t[]){256, 300, 800, 1024}[i % 4];
        run_round(k, cap, np, nc, 3000, (uint64_t)i + 1);
    }
}

Test(slowpath_stress, ptr_rings_that_slip_8x8, .timeout = 600)
{
    run_kind_slipping(K_PTR, 8, 8);
}

Test(slowpath_stress, fifo_rings_that_slip_2x16, .timeout = 600)
{
    run_kind_slipping(K_FIFO, 2, 16);
}

Test(slowpath_stress, scalar_rings_that_slip_16x2, .timeout = 600)
{
    run_kind_slipping(K_SCALAR, 16, 2);
}

Test(slowpath_stress, ptr_queue_8x8, .timeout = 600)
{
    run_kind(K_PTR, 8, 8);
}

Test(slowpath_stress, fifo_queue_8x8, .timeout = 600)
{
    run_kind(K_FIFO, 8, 8);
}

Test(slowpath_stress, int64_scalar_queue_8x8, .timeout = 600)
{
    run_kind(K_SCALAR, 8, 8);
}

Test(slowpath_stress, padding_queue_8x8, .timeout = 600)
{
    run_kind(K_PADDING, 8, 8);
}

Test(slowpath_stress, ptr_queue_2x16, .timeout = 600)
{
    run_kind(K_PTR, 2, 16);
}

Test(slowpath_stress, ptr_queue_16x2, .timeout = 600)
{
    run_kind(K_PTR, 16, 2);
}

Test(slowpath_stress, shuffle_queue_8x8, .timeout = 600)
{
    run_kind(K_SHUFFLE, 8, 8);
}

Test(slowpath_stress, priority_queue_8x8, .timeout = 600)
{
    run_kind(K_PRIORITY, 8, 8);
}
