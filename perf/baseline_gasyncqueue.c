/* baseline_gasyncqueue.c - GLib's GAsyncQueue, the queue a C programmer
 * reaches for.
 *
 * GAsyncQueue is unbounded and has no close: this baseline uses it as it
 * comes. It is NOT bounded to the capacity: bounding it needs a second
 * lock or condvar around it, and then it would measure that wrapper (the
 * mutex_cond baseline already is that design). Producers therefore never
 * wait, the queue may grow past `capacity`, and each push allocates a list
 * node (GLib's slice allocator). Results carry params capacity=unbounded.
 *
 * Close pushes one sentinel after the last element; a consumer that pops
 * it pushes it back for the next consumer and reports closed-and-drained.
 * FIFO order puts the sentinel after every element. */
#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "baseline.h"

struct bq {
    GAsyncQueue *aq;
    atomic_bool closed;
};

static char sentinel; /* its address ends the stream */

static bq *ga_create(size_t capacity, unsigned flags)
{
    (void)capacity;
    (void)flags;
    bq *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->aq = g_async_queue_new();
    atomic_init(&q->closed, false);
    return q;
}

static void ga_destroy(bq *q)
{
    g_async_queue_unref(q->aq);
    free(q);
}

static int ga_enqueue(bq *q, void *p)
{
    if (atomic_load_explicit(&q->closed, memory_order_relaxed))
        return -1;
    g_async_queue_push(q->aq, p);
    return 0;
}

static int ga_dequeue(bq *q, void **ret_p)
{
    void *p = g_async_queue_pop(q->aq);
    if (p == &sentinel) {
        g_async_queue_push(q->aq, p);
        return -1;
    }
    *ret_p = p;
    return 0;
}

static void ga_close(bq *q)
{
    atomic_store(&q->closed, true);
    g_async_queue_push(q->aq, &sentinel);
}

const bq_impl bq_gasyncqueue = {
    .name = "gasyncqueue",
    .note = "GAsyncQueue is unbounded: producers never wait, so it is not held to capacity 1024",
    .create = ga_create,
    .destroy = ga_destroy,
    .enqueue = ga_enqueue,
    .dequeue = ga_dequeue,
    .enqueue_many = NULL,
    .dequeue_many = NULL,
    .close = ga_close,
};
