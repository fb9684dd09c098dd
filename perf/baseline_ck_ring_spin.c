/* baseline_ck_ring_spin.c - raw Concurrency Kit ring, MPMC, spinning.
 *
 * The ceiling of the data structure qflow is built on when nothing ever
 * sleeps: a full or empty ring is retried in a pure spin (ck_pr_stall, no
 * sched_yield, no futex). It also shows that design's failure when threads
 * outnumber cores: ck_ring's multi-producer enqueue reserves a slot and
 * then spins until every earlier producer has published, so a producer
 * preempted between the two makes the others spin for whole time slices.
 * The harness gives each repetition a time budget for that reason.
 *
 * Capacity: a ck_ring of `capacity` slots (a power of two) holds at most
 * capacity - 1 elements (one slot tells full from empty): 1023 for 1024.
 */
#include <ck_pr.h>
#include <ck_ring.h>
#include <stdlib.h>

#include "baseline.h"

struct bq {
    struct ck_ring ring; /* ck aligns its producer and consumer fields */
    struct ck_ring_buffer *buf;
    int closed;
};

static size_t pow2_at_least(size_t n)
{
    size_t p = 2;
    while (p < n)
        p <<= 1;
    return p;
}

static bq *spin_create(size_t capacity, unsigned flags)
{
    (void)flags;
    size_t size = pow2_at_least(capacity);
    bq *q = aligned_alloc(64, (sizeof(*q) + 63) & ~(size_t)63);
    if (!q)
        return NULL;
    q->buf = aligned_alloc(64, size * sizeof(*q->buf));
    if (!q->buf) {
        free(q);
        return NULL;
    }
    ck_ring_init(&q->ring, (unsigned)size);
    q->closed = 0;
    return q;
}

static void spin_destroy(bq *q)
{
    free(q->buf);
    free(q);
}

static int spin_enqueue(bq *q, void *p)
{
    while (!ck_ring_enqueue_mpmc(&q->ring, q->buf, p))
        ck_pr_stall();
    return 0;
}

static int spin_dequeue(bq *q, void **ret_p)
{
    while (!ck_ring_dequeue_mpmc(&q->ring, q->buf, ret_p)) {
        /* Closed is set after the last producer's enqueue returned: one
         * more try after seeing it cannot miss an element. */
        if (ck_pr_load_int(&q->closed)) {
            ck_pr_fence_load();
            return ck_ring_dequeue_mpmc(&q->ring, q->buf, ret_p) ? 0 : -1;
        }
        ck_pr_stall();
    }
    return 0;
}

static void spin_close(bq *q)
{
    ck_pr_fence_store();
    ck_pr_store_int(&q->closed, 1);
}

const bq_impl bq_ck_ring_spin = {
    .name = "ck_ring_spin",
    .note = "raw ck_ring MPMC, pure spin; holds capacity-1 (1023) elements",
    .create = spin_create,
    .destroy = spin_destroy,
    .enqueue = spin_enqueue,
    .dequeue = spin_dequeue,
    .enqueue_many = NULL,
    .dequeue_many = NULL,
    .close = spin_close,
};
