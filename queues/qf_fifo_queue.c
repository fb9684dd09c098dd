/* qf_fifo_queue.c - the operations table of the queue kinds on the FIFO
 * engine (FIFOQueue, PaddingFIFOQueue, pointer queues): each entry hands
 * the call to the engine embedded in the queue (queues/engine/qf_fifo.c).
 * The engine sees slots and its own struct only; the queue API (element
 * and pointer forms, validation, ownership) is qf_queue_element.c's,
 * qf_queue_ptr.c's and their siblings' (qf_queue_ops-impl.h). */
#include "qf_queue-impl.h"

static qf_code fifo_queue_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                              size_t *ret_done)
{
    return qf__fifo_put(&q->fifo, slots, n, w, ret_done);
}

static qf_code fifo_queue_take(qf_queue *q, size_t min, size_t max, bool up_to, const qf__wait *w,
                               void **ret_slots, size_t *ret_n)
{
    return qf__fifo_take(&q->fifo, min, max, up_to, w, ret_slots, ret_n);
}

static int64_t fifo_queue_size(const qf_queue *q)
{
    return qf__fifo_size(&q->fifo);
}

static qf_code fifo_queue_close(qf_queue *q, bool cancel)
{
    return qf__fifo_close(&q->fifo, cancel);
}

static bool fifo_queue_cancel_poll(qf_queue *q, qf_waker *w)
{
    return qf__fifo_cancel_poll(&q->fifo, w);
}

static void fifo_queue_drain_all(qf_queue *q, qf__release_fn release, void *ctx)
{
    qf__fifo_drain_all(&q->fifo, release, ctx);
}

static void fifo_queue_give_back(qf_queue *q, void *const *slots, size_t n)
{
    qf__fifo_give_back(&q->fifo, slots, n);
}

const qf__queue_ops qf__fifo_ops = {
    .put = fifo_queue_put,
    .take = fifo_queue_take,
    .size = fifo_queue_size,
    .close = fifo_queue_close,
    .cancel_poll = fifo_queue_cancel_poll,
    .drain_all = fifo_queue_drain_all,
    .destroy = NULL,
    .give_back = fifo_queue_give_back,
};
