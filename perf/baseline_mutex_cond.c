/* baseline_mutex_cond.c - a bounded ring guarded by one mutex and two
 * condition variables: the design of TensorFlow's FIFOQueue kernel and
 * the queue most C code would write by hand.
 *
 * Done reasonably well, so the comparison is fair: exactly `capacity`
 * slots, a condvar is signalled only when someone waits on it, and the
 * signal is sent after the mutex is released (the woken thread does not
 * wake straight into a held lock). Batches move under one lock hold. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "baseline.h"

struct bq {
    pthread_mutex_t mu;
    pthread_cond_t not_empty;
    pthread_cond_t not_full;
    void **ring;
    size_t cap, head, count;
    unsigned waiting_consumers, waiting_producers;
    bool closed;
};

static bq *mc_create(size_t capacity, unsigned flags)
{
    (void)flags;
    bq *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->ring = calloc(capacity, sizeof(*q->ring));
    if (!q->ring) {
        free(q);
        return NULL;
    }
    q->cap = capacity;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    return q;
}

static void mc_destroy(bq *q)
{
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->ring);
    free(q);
}

/* Wake `n` waiters on `c` (already unlocked); n > 1 wakes all. */
static void wake(pthread_cond_t *c, size_t n)
{
    if (n == 1)
        pthread_cond_signal(c);
    else if (n > 1)
        pthread_cond_broadcast(c);
}

/* Insert up to n from ps; returns how many; q->mu held. */
static size_t put_locked(bq *q, void *const *ps, size_t n)
{
    size_t k = q->cap - q->count < n ? q->cap - q->count : n;
    size_t tail = q->head + q->count;
    for (size_t i = 0; i < k; i++, tail++)
        q->ring[tail < q->cap ? tail : tail - q->cap] = ps[i];
    q->count += k;
    return k;
}

/* Take up to n into ps; returns how many; q->mu held. */
static size_t take_locked(bq *q, void **ps, size_t n)
{
    size_t k = q->count < n ? q->count : n;
    for (size_t i = 0; i < k; i++) {
        ps[i] = q->ring[q->head];
        if (++q->head == q->cap)
            q->head = 0;
    }
    q->count -= k;
    return k;
}

static int mc_enqueue_many(bq *q, void *const *ps, size_t n)
{
    size_t done = 0;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->count == q->cap && !q->closed) {
            q->waiting_producers++;
            pthread_cond_wait(&q->not_full, &q->mu);
            q->waiting_producers--;
        }
        if (q->closed) {
            pthread_mutex_unlock(&q->mu);
            return -1;
        }
        size_t k = put_locked(q, ps + done, n - done);
        done += k;
        size_t waiters = q->waiting_consumers < k ? q->waiting_consumers : k;
        if (done == n) {
            pthread_mutex_unlock(&q->mu);
            wake(&q->not_empty, waiters);
            return 0;
        }
        wake(&q->not_empty, waiters); /* still holding the lock: about to wait */
    }
}

static int mc_enqueue(bq *q, void *p)
{
    return mc_enqueue_many(q, &p, 1);
}

static size_t mc_dequeue_many(bq *q, void **ret_ps, size_t n)
{
    size_t done = 0;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->count == 0 && !q->closed) {
            q->waiting_consumers++;
            pthread_cond_wait(&q->not_empty, &q->mu);
            q->waiting_consumers--;
        }
        size_t k = take_locked(q, ret_ps + done, n - done);
        done += k;
        size_t waiters = q->waiting_producers < k ? q->waiting_producers : k;
        if (done == n || (q->closed && q->count == 0)) {
            pthread_mutex_unlock(&q->mu);
            wake(&q->not_full, waiters);
            return done;
        }
        wake(&q->not_full, waiters);
    }
}

static int mc_dequeue(bq *q, void **ret_p)
{
    return mc_dequeue_many(q, ret_p, 1) == 1 ? 0 : -1;
}

static void mc_close(bq *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_mutex_unlock(&q->mu);
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
}

const bq_impl bq_mutex_cond = {
    .name = "mutex_cond",
    .note = NULL,
    .create = mc_create,
    .destroy = mc_destroy,
    .enqueue = mc_enqueue,
    .dequeue = mc_dequeue,
    .enqueue_many = mc_enqueue_many,
    .dequeue_many = mc_dequeue_many,
    .close = mc_close,
};
