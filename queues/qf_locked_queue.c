/* qf_locked_queue.c - the operations table entries of the queue kinds on
 * the locked engine (RandomShuffleQueue, PriorityQueue): each hands the
 * call to the engine in q->impl (queues/engine/qf_locked.c). */
#include <stdlib.h>

#include "qf_locked_queue-impl.h"

qf_code qf__locked_queue_init(qf_queue *q, qf__locked *L, const qf__locked_storage *st,
                              size_t floor_open)
{
    qf__locked_config c = {
        .kind_name = q->kind_name,
        .name = q->name,
        .capacity = q->capacity,
        .floor_open = floor_open,
        .spin_ns = q->spin_ns,
        .state_word = &q->fifo.state,
    };
    return qf__locked_init(L, st, &c);
}

qf_code qf__locked_queue_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                             size_t *ret_done)
{
    return qf__locked_put(qf__locked_of(q), slots, n, w, ret_done);
}

qf_code qf__locked_queue_take(qf_queue *q, size_t min, size_t max, bool up_to, const qf__wait *w,
                              void **ret_slots, size_t *ret_n)
{
    return qf__locked_take(qf__locked_of(q), min, max, up_to, w, ret_slots, ret_n);
}

int64_t qf__locked_queue_size(const qf_queue *q)
{
    return qf__locked_size(qf__locked_of(q));
}

qf_code qf__locked_queue_close(qf_queue *q, bool cancel)
{
    return qf__locked_close(qf__locked_of(q), cancel);
}

bool qf__locked_queue_cancel_poll(qf_queue *q, qf_waker *w)
{
    return qf__locked_cancel_poll(qf__locked_of(q), w);
}

void qf__locked_queue_give_back(qf_queue *q, void *const *slots, size_t n)
{
    qf__locked_give_back(qf__locked_of(q), slots, n);
}

/* q->impl is NULL when the kind's constructor failed before setting it. */
void qf__locked_queue_drain_all(qf_queue *q, qf__release_fn release, void *ctx)
{
    if (q->impl)
        qf__locked_drain_all(qf__locked_of(q), release, ctx);
}

void qf__locked_queue_destroy(qf_queue *q)
{
    if (!q->impl)
        return;
    qf__locked_destroy(qf__locked_of(q));
    free(q->impl);
    q->impl = NULL;
}
