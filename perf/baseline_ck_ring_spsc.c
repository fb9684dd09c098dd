/* baseline_ck_ring_spsc.c - raw Concurrency Kit ring, single producer and
 * single consumer, spinning: the ceiling of a ring on this machine.
 *
 * Only for one producer and one consumer (create returns NULL without
 * both BQ_SINGLE_* flags). Full and empty spin with ck_pr_stall, and give
 * the CPU away (sched_yield) after SPIN_STALLS of them: a pure spin fell to
 * 0.13 M items/s under 2 x `yes` on 2 cores (every repetition cut by its
 * time budget, so queue.tput.spsc was never judged by --compare), as the
 * partner it waits for sat behind the spinner on the same core; with the
 * yield, 5.7-6.9 M. On a quiet machine the partner is running and the
 * yield is not reached: medians of three interleaved runs 49.3, 29.5,
 * 41.8 M against the pure spin's 49.7, 42.7, 44.7 M (noisy at this rate).
 * The count stays a local of the loop: kept behind a pointer in a helper,
 * it cost the quiet figure a fifth. Holds capacity - 1 elements, as every
 * ck_ring.
 */
#include <ck_pr.h>
#include <ck_ring.h>
#include <sched.h>
#include <stdlib.h>

#include "baseline.h"

struct bq {
    struct ck_ring ring;
    struct ck_ring_buffer *buf;
    int closed;
};

static bq *spsc_create(size_t capacity, unsigned flags)
{
    if ((flags & (BQ_SINGLE_PRODUCER | BQ_SINGLE_CONSUMER)) !=
        (BQ_SINGLE_PRODUCER | BQ_SINGLE_CONSUMER))
        return NULL;
    size_t size = 2;
    while (size < capacity)
        size <<= 1;
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

static void spsc_destroy(bq *q)
{
    free(q->buf);
    free(q);
}

#define SPIN_STALLS 4096

static int spsc_enqueue(bq *q, void *p)
{
    unsigned spins = 0;
    while (!ck_ring_enqueue_spsc(&q->ring, q->buf, p)) {
        ck_pr_stall();
        if (++spins == SPIN_STALLS) {
            spins = 0;
            sched_yield();
        }
    }
    return 0;
}

static int spsc_dequeue(bq *q, void **ret_p)
{
    unsigned spins = 0;
    while (!ck_ring_dequeue_spsc(&q->ring, q->buf, ret_p)) {
        if (ck_pr_load_int(&q->closed)) {
            ck_pr_fence_load();
            return ck_ring_dequeue_spsc(&q->ring, q->buf, ret_p) ? 0 : -1;
        }
        ck_pr_stall();
        if (++spins == SPIN_STALLS) {
            spins = 0;
            sched_yield();
        }
    }
    return 0;
}

static void spsc_close(bq *q)
{
    ck_pr_fence_store();
    ck_pr_store_int(&q->closed, 1);
}

const bq_impl bq_ck_ring_spsc = {
    .name = "ck_ring_spsc",
    .note = "raw ck_ring SPSC, spins (yields after 4096 stalls); holds capacity-1 (1023) elements",
    .create = spsc_create,
    .destroy = spsc_destroy,
    .enqueue = spsc_enqueue,
    .dequeue = spsc_dequeue,
    .enqueue_many = NULL,
    .dequeue_many = NULL,
    .close = spsc_close,
};
