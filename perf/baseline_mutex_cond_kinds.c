/* baseline_mutex_cond_kinds.c - the three queue kinds as most C code would
 * write them by hand, and as TensorFlow's kernels do: one mutex and two
 * condition variables around a kind-specific store.
 *
 *   shuffle   an array; a dequeue swaps a random entry (xorshift64*, far
 *             cheaper than qflow's Philox) with the last one. While open,
 *             dequeues leave min_after_dequeue entries behind.
 *   priority  a binary min-heap of (int64 priority, element), the priority
 *             read from the element before the lock is taken.
 *   padding   a ring of elements; dequeue_many gathers n (holding what it
 *             has while it waits, like qflow), then pads them into one
 *             [n, longest] tensor outside the lock.
 *
 * Built like baseline_mutex_cond.c so the comparison is fair: exactly
 * `capacity` entries, a condvar is signalled only when someone waits on
 * it and only as many as can proceed, and signals go out after unlocking.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_kinds.h"

/* The part every kind shares: the lock, the waiting and the close. */
typedef struct mc_base {
    pthread_mutex_t mu;
    pthread_cond_t not_empty; /* consumers: something may be takeable */
    pthread_cond_t not_full;  /* producers: room may have appeared */
    size_t cap, n;
    unsigned waiting_consumers, waiting_producers;
    bool closed;
} mc_base;

static void base_init(mc_base *b, size_t capacity)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->not_empty, NULL);
    pthread_cond_init(&b->not_full, NULL);
    b->cap = capacity;
}

static void base_destroy(mc_base *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->not_empty);
    pthread_cond_destroy(&b->not_full);
}

/* Lock, and wait for room; false (lock released) once closed. */
static bool lock_for_room(mc_base *b)
{
    pthread_mutex_lock(&b->mu);
    while (b->n == b->cap && !b->closed) {
        b->waiting_producers++;
        pthread_cond_wait(&b->not_full, &b->mu);
        b->waiting_producers--;
    }
    if (b->closed) {
        pthread_mutex_unlock(&b->mu);
        return false;
    }
    return true;
}

/* Wait (lock held) until more than `floor` entries are present, or the
 * queue is closed (then any entry will do); false when closed and empty. */
static bool wait_takeable(mc_base *b, size_t floor)
{
    for (;;) {
        size_t fl = b->closed ? 0 : floor;
        if (b->n > fl)
            return true;
        if (b->closed)
            return false;
        b->waiting_consumers++;
        pthread_cond_wait(&b->not_empty, &b->mu);
        b->waiting_consumers--;
    }
}

/* After adding one entry (lock held): unlock, then wake one consumer if
 * one waits and the entry made something takeable. */
static void unlock_added(mc_base *b, size_t floor)
{
    bool wake = b->waiting_consumers > 0 && b->n > floor;
    pthread_mutex_unlock(&b->mu);
    if (wake)
        pthread_cond_signal(&b->not_empty);
}

/* After removing k entries (lock held): unlock, then wake up to k
 * producers. */
static void unlock_removed(mc_base *b, size_t k)
{
    size_t w = b->waiting_producers < k ? b->waiting_producers : k;
    pthread_mutex_unlock(&b->mu);
    if (w == 1)
        pthread_cond_signal(&b->not_full);
    else if (w > 1)
        pthread_cond_broadcast(&b->not_full);
}

static void base_close(mc_base *b)
{
    pthread_mutex_lock(&b->mu);
    b->closed = true;
    pthread_mutex_unlock(&b->mu);
    pthread_cond_broadcast(&b->not_empty);
    pthread_cond_broadcast(&b->not_full);
}

static void *alloc_or_fail(size_t size)
{
    void *p = calloc(1, size);
    if (!p)
        bench_fail("out of memory");
    return p;
}

/* ------------------------------------------------------------- shuffle */

typedef struct mc_shuffle {
    mc_base b;
    uint64_t rng; /* xorshift64* state, guarded by b.mu */
    void **items;
} mc_shuffle;

static bq *shuffle_create(size_t capacity, unsigned flags)
{
    (void)flags;
    mc_shuffle *q = alloc_or_fail(sizeof(*q));
    base_init(&q->b, capacity);
    q->rng = 0x9E3779B97F4A7C15ull;
    q->items = alloc_or_fail(capacity * sizeof(void *));
    return (bq *)q;
}

static void shuffle_destroy(bq *self)
{
    mc_shuffle *q = (mc_shuffle *)self;
    base_destroy(&q->b);
    free(q->items);
    free(q);
}

static int shuffle_enqueue(bq *self, void *p)
{
    mc_shuffle *q = (mc_shuffle *)self;
    if (!lock_for_room(&q->b))
        return -1;
    q->items[q->b.n++] = p;
    unlock_added(&q->b, KB_MIN_AFTER_DEQUEUE);
    return 0;
}

static int shuffle_dequeue(bq *self, void **ret_p)
{
    mc_shuffle *q = (mc_shuffle *)self;
    pthread_mutex_lock(&q->b.mu);
    if (!wait_takeable(&q->b, KB_MIN_AFTER_DEQUEUE)) {
        pthread_mutex_unlock(&q->b.mu);
        return -1;
    }
    uint64_t x = q->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    q->rng = x;
    size_t i = (size_t)((x * 0x2545F4914F6CDD1Dull) >> 32) % q->b.n;
    *ret_p = q->items[i];
    q->items[i] = q->items[--q->b.n];
    unlock_removed(&q->b, 1);
    return 0;
}

static void shuffle_close(bq *self)
{
    base_close(&((mc_shuffle *)self)->b);
}

const bq_impl bq_mutex_cond_shuffle = {
    .name = "mutex_cond",
    .note = NULL,
    .create = shuffle_create,
    .destroy = shuffle_destroy,
    .enqueue = shuffle_enqueue,
    .dequeue = shuffle_dequeue,
    .close = shuffle_close,
};

/* ------------------------------------------------------------ priority */

typedef struct heap_entry {
    int64_t key;
    qf_element *e;
} heap_entry;

typedef struct mc_priority {
    mc_base b;
    heap_entry *heap;
} mc_priority;

static bq *priority_create(size_t capacity, unsigned flags)
{
    (void)flags;
    mc_priority *q = alloc_or_fail(sizeof(*q));
    base_init(&q->b, capacity);
    q->heap = alloc_or_fail(capacity * sizeof(heap_entry));
    return (bq *)q;
}

static void priority_destroy(bq *self)
{
    mc_priority *q = (mc_priority *)self;
    for (size_t i = 0; i < q->b.n; i++)
        qf_element_free(q->heap[i].e);
    base_destroy(&q->b);
    free(q->heap);
    free(q);
}

static int priority_enqueue(bq *self, void *p)
{
    mc_priority *q = (mc_priority *)self;
    qf_element *e = kb_prio_element(p);
    int64_t key = kb_prio_key(e);
    if (!lock_for_room(&q->b)) {
        qf_element_free(e);
        return -1;
    }
    heap_entry *h = q->heap;
    size_t i = q->b.n++;
    while (i > 0 && h[(i - 1) / 2].key > key) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = (heap_entry){key, e};
    unlock_added(&q->b, 0);
    return 0;
}

static int priority_dequeue(bq *self, void **ret_p)
{
    mc_priority *q = (mc_priority *)self;
    pthread_mutex_lock(&q->b.mu);
    if (!wait_takeable(&q->b, 0)) {
        pthread_mutex_unlock(&q->b.mu);
        return -1;
    }
    heap_entry *h = q->heap;
    qf_element *top = h[0].e;
    size_t n = --q->b.n, i = 0;
    heap_entry last = h[n];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && h[c + 1].key < h[c].key)
            c++;
        if (last.key <= h[c].key)
            break;
        h[i] = h[c];
        i = c;
    }
    if (n > 0)
        h[i] = last;
    unlock_removed(&q->b, 1);
    *ret_p = kb_prio_open(top);
    return 0;
}

static void priority_close(bq *self)
{
    base_close(&((mc_priority *)self)->b);
}

const bq_impl bq_mutex_cond_priority = {
    .name = "mutex_cond",
    .note = NULL,
    .create = priority_create,
    .destroy = priority_destroy,
    .enqueue = priority_enqueue,
    .dequeue = priority_dequeue,
    .close = priority_close,
};

/* ------------------------------------------------------------- padding */

typedef struct mc_padding {
    mc_base b;
    size_t head;
    qf_element **ring;
} mc_padding;

static bq *padding_create(size_t capacity, unsigned flags)
{
    (void)flags;
    mc_padding *q = alloc_or_fail(sizeof(*q));
    base_init(&q->b, capacity);
    q->ring = alloc_or_fail(capacity * sizeof(qf_element *));
    return (bq *)q;
}

static void padding_destroy(bq *self)
{
    mc_padding *q = (mc_padding *)self;
    for (size_t i = 0; i < q->b.n; i++)
        qf_element_free(q->ring[(q->head + i) % q->b.cap]);
    base_destroy(&q->b);
    free(q->ring);
    free(q);
}

static int padding_enqueue(bq *self, void *p)
{
    mc_padding *q = (mc_padding *)self;
    qf_element *e = kb_pad_element(p);
    if (!lock_for_room(&q->b)) {
        qf_element_free(e);
        return -1;
    }
    size_t tail = q->head + q->b.n;
    q->ring[tail < q->b.cap ? tail : tail - q->b.cap] = e;
    q->b.n++;
    unlock_added(&q->b, 0);
    return 0;
}

/* Stack the int64 rows of es[0..k) into one zero-padded [k, longest]
 * tensor; frees the elements. */
static qf_tensor *pad_rows(qf_element **es, size_t k)
{
    int64_t w = 0;
    for (size_t i = 0; i < k; i++) {
        int64_t len = qf_tensor_shape(qf_element_get(es[i], 0))->dims[0];
        w = len > w ? len : w;
    }
    qf_shape sh = QF_SHAPE((int64_t)k, w);
    qf_tensor *t = qf_tensor_new(QF_INT64, &sh); /* zero-filled: the padding */
    if (!t)
        bench_fail("out of memory");
    int64_t *out = qf_tensor_data(t);
    for (size_t i = 0; i < k; i++) {
        const qf_tensor *row = qf_element_get(es[i], 0);
        memcpy(out + (int64_t)i * w, qf_tensor_cdata(row),
               (size_t)qf_tensor_shape(row)->dims[0] * sizeof(int64_t));
        qf_element_free(es[i]);
    }
    return t;
}

/* Gathers n, holding what it has while waiting; after close, what is
 * left (0 once drained). */
static size_t padding_dequeue_many(bq *self, void **ret_ps, size_t n)
{
    mc_padding *q = (mc_padding *)self;
    qf_element *es[KB_PAD_BATCH];
    size_t got = 0, unsignalled = 0; /* removals no producer was told of */
    if (n > KB_PAD_BATCH)
        bench_fail("mutex_cond padding: batch %zu > %d", n, KB_PAD_BATCH);
    pthread_mutex_lock(&q->b.mu);
    for (;;) {
        if (!wait_takeable(&q->b, 0))
            break;
        size_t k = q->b.n < n - got ? q->b.n : n - got;
        for (size_t i = 0; i < k; i++) {
            es[got++] = q->ring[q->head];
            if (++q->head == q->b.cap)
                q->head = 0;
        }
        q->b.n -= k;
        unsignalled = k;
        if (got == n)
            break;
        /* Still short: let producers refill before waiting again. */
        size_t w = q->b.waiting_producers < k ? q->b.waiting_producers : k;
        if (w == 1)
            pthread_cond_signal(&q->b.not_full);
        else if (w > 1)
            pthread_cond_broadcast(&q->b.not_full);
        unsignalled = 0;
    }
    unlock_removed(&q->b, unsignalled);
    if (got == 0)
        return 0;
    qf_tensor *t = pad_rows(es, got);
    kb_pad_check(t, got, ret_ps, "mutex_cond padding");
    qf_tensor_unref(t);
    return got;
}

static int padding_dequeue(bq *self, void **ret_p)
{
    return padding_dequeue_many(self, ret_p, 1) == 1 ? 0 : -1;
}

static void padding_close(bq *self)
{
    base_close(&((mc_padding *)self)->b);
}

const bq_impl bq_mutex_cond_padding = {
    .name = "mutex_cond",
    .note = NULL,
    .create = padding_create,
    .destroy = padding_destroy,
    .enqueue = padding_enqueue,
    .dequeue = padding_dequeue,
    .dequeue_many = padding_dequeue_many,
    .close = padding_close,
};
