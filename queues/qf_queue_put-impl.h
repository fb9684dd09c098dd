/* qf_queue_put-impl.h - internal: an enqueue that waits in line.
 *
 * A producer that finds a FIFO-engine queue full can leave a *put request*
 * instead of just a waker: the request carries its element, and a consumer
 * that frees a slot puts the oldest request's element there itself before
 * anything else can take the slot (queues/engine/qf_fifo_wait.c). So producers get in in
 * the order they started waiting, however many keep arriving (a waker that
 * is only woken has to race every running producer for the slot, and ten
 * thousand QueueRunners starved that way), and after a dequeue from a full
 * queue the queue is full again at once (TensorFlow's rule).
 *
 * Producer threads use requests inside the blocking calls. A task keeps a
 * qf__put_ticket across its polls of one enqueue: qflow's QueueRunners do
 * (runtime/pipeline). Never installed.
 */
#ifndef QF_QUEUE_PUT_IMPL_H
#define QF_QUEUE_PUT_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "qf_fifo-impl.h" /* qf__put_req */
#include "qf_queue.h"
#include "qf_waker.h"

/* A task's enqueue of one slot across polls. Zero it before first use. */
typedef struct qf__put_ticket {
    /* first: read by every put, the request only while one is out */
    bool active; /* a request is out (between QF_PENDING and its end) */
    void *slot;
    qf__put_req req;
} qf__put_ticket;

/**
 * qf__queue_poll_put_ptr() / qf__queue_poll_put_elem() - the poll forms of
 * a one-element enqueue that waits in line. Call again with the same ticket
 * (and the same pointer or element) after each wake until it stops
 * returning QF_PENDING. The element form validates the element first, as
 * qf_queue_poll_enqueue() does.
 *
 * Ownership:   QF_OK: the pointer or element is the queue's (put now, or
 *              by a consumer while pending). QF_PENDING: the ticket holds it
 *              in line. Any error: the caller keeps it.
 * Returns:     QF_OK; QF_PENDING; QF_CANCELLED (closed, or cancelled while
 *              in line); the errors of qf_queue_poll_enqueue[_ptr]().
 * Queues off the FIFO engine, and inline queues of numbers: a plain poll
 * enqueue (woken to re-try).
 */
qf_code qf__queue_poll_put_ptr(qf_queue *q, void *p, qf_waker *w, qf__put_ticket *tk);
qf_code qf__queue_poll_put_elem(qf_queue *q, qf_element *e, qf_waker *w, qf__put_ticket *tk);

/**
 * qf__queue_put_abandon() - give up a pending qf__queue_poll_put(). Returns
 * true when the slot is the caller's again, false when it went into the
 * queue meanwhile (the caller must not free it). Never blocks for long: a
 * request being finished is waited out.
 */
bool qf__queue_put_abandon(qf_queue *q, qf__put_ticket *tk);

#endif
