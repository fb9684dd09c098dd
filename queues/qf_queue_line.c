/* qf_queue_line.c - the enqueue that waits in line (qf_queue_put-impl.h),
 * for tasks.
 *
 * A task that finds a FIFO-engine queue full leaves a put request with its
 * slot, kept across its polls in a ticket, and a consumer that frees a
 * slot fills it from the oldest request: producers get in in the order they
 * began to wait, however many others keep arriving. Queues off the FIFO
 * engine, and elements for inline or packed queues, take the plain poll
 * enqueue.
 */
#include "qf_fifo-impl.h"
#include "qf_lock-impl.h"
#include "qf_queue_ops-impl.h"
#include "qf_queue_put-impl.h"
#include "qf_status.h"
#include "qf_waker.h"

/* ------------------------------------------------ enqueue that waits in line */

/* One slot in line (qf_queue_put-impl.h). The FIFO engine only. */
static qf_code poll_put_slot_claimed(qf_queue *q, void *slot, qf_waker *wk, qf__put_ticket *tk);

/* The consumer or closer that gave a task's request its final state may
 * still be waking the task through the request's waker (finish_request()
 * in queues/engine/qf_fifo_wait.c holds it CLAIMED until then): wait that out before the
 * ticket and the waker are used again. A wake function call: spin a
 * little, then yield (the consumer may be off its core because the woken
 * task took it). */
static void put_ticket_settle(const qf__put_ticket *tk)
{
    qf_waker *wk = tk->req.waker;
    for (unsigned i = 0; wk && qf_waker_state(wk) == QF_WAKER_CLAIMED; i++)
        qf__spin_then_yield(i);
}

/* A single-producer queue's producer side stays claimed while a ticket is
 * in line: consumers put its slot in for it, as the single producer. */
static qf_code poll_put_slot(qf_queue *q, void *slot, qf_waker *wk, qf__put_ticket *tk)
{
    bool sp = q->single_producer;
    if (tk->active) {
        uint32_t st = atomic_load_explicit(&tk->req.state, memory_order_acquire);
        if (st == QF__REQ_WAITING)
            return QF_PENDING; /* still in line: a wake for something else */
        put_ticket_settle(tk);
        tk->active = false;
        qf__fifo_task_returned(&q->fifo);
        if (sp)
            qf__fifo_sp_release(&q->fifo);
        return st == QF__REQ_DONE ? QF_OK : qf__fifo_err_enqueue_cancelled();
    }
    if (!sp)
        return poll_put_slot_claimed(q, slot, wk, tk);
    qf_code rc = qf__fifo_sp_claim(&q->fifo);
    if (rc != QF_OK)
        return rc;
    rc = poll_put_slot_claimed(q, slot, wk, tk);
    if (rc != QF_PENDING)
        qf__fifo_sp_release(&q->fifo);
    return rc;
}

static qf_code poll_put_slot_claimed(qf_queue *q, void *slot, qf_waker *wk, qf__put_ticket *tk)
{
    for (;;) {
        qf_code rc = qf__fifo_closed_for(
            &q->fifo, atomic_load_explicit(&q->fifo.state, memory_order_acquire), false);
        if (rc != QF_OK)
            return rc;
        size_t published = 0;
        size_t k = qf__fifo_put_now(&q->fifo, &slot, 1, false, false, NULL, &rc, &published);
        qf__fifo_wake_consumers(&q->fifo, published);
        if (k == 1)
            return QF_OK;
        if (rc != QF_OK)
            return rc;
        /* Full: in line, pending like a blocked thread (a plain close lets
         * it finish; consumers wait for it before end-of-data). */
        if (!qf__fifo_become_pending(&q->fifo, &rc))
            return rc;
        tk->slot = slot;
        tk->req = (qf__put_req){.slots = &tk->slot, .n = 1, .owns_pending = true, .waker = wk};
        tk->active = true;
        if (qf__fifo_enlist(&q->fifo, &tk->req) == QF_PENDING)
            return QF_PENDING;
        tk->active = false; /* room showed up meanwhile: again */
    }
}

qf_code qf__queue_poll_put_ptr(qf_queue *q, void *p, qf_waker *wk, qf__put_ticket *tk)
{
    if (!tk || !wk || q->ops != &qf__fifo_ops)
        return qf_queue_poll_enqueue_ptr(q, p, wk);
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK)
        return rc;
    return poll_put_slot(q, p, wk, tk);
}

qf_code qf__queue_poll_put_elem(qf_queue *q, qf_element *e, qf_waker *wk, qf__put_ticket *tk)
{
    if (!tk || !wk || !q || !e || q->ops != &qf__fifo_ops || q->inline_mode || q->packed)
        return qf_queue_poll_enqueue(q, e, wk);
    if (!tk->active && !qf__element_plainly_fits(q, e)) {
        qf_code rc = qf__validate_element(q, e);
        if (rc == QF_OK)
            rc = check_ptr_movable(q, e);
        if (rc != QF_OK)
            return rc;
    }
    return poll_put_slot(q, e, wk, tk);
}

bool qf__queue_put_abandon(qf_queue *q, qf__put_ticket *tk)
{
    if (!tk || !tk->active)
        return true;
    tk->active = false;
    bool mine = qf__fifo_withdraw(&q->fifo, &tk->req);
    uint32_t st = QF__REQ_CANCELLED;
    /* Else a consumer or the closer has it: its final state is stored right
     * after their lock is dropped. */
    for (unsigned i = 0; !mine; i++) {
        st = atomic_load_explicit(&tk->req.state, memory_order_acquire);
        if (st != QF__REQ_WAITING)
            break;
        qf__spin_then_yield(i); /* it may be releasing held wakes: many calls */
    }
    if (!mine) {
        put_ticket_settle(tk);
        qf__fifo_task_returned(&q->fifo); /* a final state, seen */
    }
    if (q->single_producer)
        qf__fifo_sp_release(&q->fifo);
    return mine || st != QF__REQ_DONE;
}
