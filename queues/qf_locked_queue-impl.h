/* qf_locked_queue-impl.h - internal: the queue kinds on the locked engine
 * (queues/engine/qf_locked-impl.h): RandomShuffleQueue and PriorityQueue.
 * Each keeps a struct in q->impl whose FIRST member is the engine (so
 * q->impl is also a qf__locked *), allocated with 64-byte alignment.
 * Never installed. */
#ifndef QF_LOCKED_QUEUE_IMPL_H
#define QF_LOCKED_QUEUE_IMPL_H

#include <stdint.h>

#include "qf_locked-impl.h"
#include "qf_queue-impl.h"

/* The engine of a queue on the locked engine. */
static inline qf__locked *qf__locked_of(const qf_queue *q)
{
    return (qf__locked *)q->impl;
}

/* Set up the engine of q (q->impl already points to the struct embedding
 * L) for its capacity, spin budget and name; `floor_open` is
 * min_after_dequeue (0 for kinds without one). QF_OK or
 * QF_RESOURCE_EXHAUSTED (error set). */
qf_code qf__locked_queue_init(qf_queue *q, qf__locked *L, const qf__locked_storage *st,
                              size_t floor_open);

/* The operations table entries (qf_locked_queue.c). The priority queue
 * wraps put; destroy frees the engine's storage and q->impl. */
qf_code qf__locked_queue_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                             size_t *ret_done);
qf_code qf__locked_queue_take(qf_queue *q, size_t min, size_t max, bool up_to, const qf__wait *w,
                              void **ret_slots, size_t *ret_n);
int64_t qf__locked_queue_size(const qf_queue *q);
qf_code qf__locked_queue_close(qf_queue *q, bool cancel);
bool qf__locked_queue_cancel_poll(qf_queue *q, qf_waker *w);
void qf__locked_queue_give_back(qf_queue *q, void *const *slots, size_t n);
void qf__locked_queue_drain_all(qf_queue *q, qf__release_fn release, void *ctx);
void qf__locked_queue_destroy(qf_queue *q);

#endif
