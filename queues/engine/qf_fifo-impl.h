/* qf_fifo-impl.h - internal: the parts of the FIFO engine that
 * qf_fifo_queue.c (moving elements) and qf_fifo_wait.c (waiting and waking)
 * share. Never installed. */
#ifndef QF_FIFO_IMPL_H
#define QF_FIFO_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_queue-impl.h"
#include "qf_queue_put-impl.h"

/* --- qf_fifo_queue.c --------------------------------------------------- */

/* Put what fits now of slots[0..n) (all or nothing when `all`): the ring,
 * or the overflow list of a spilling queue. `pending`: this enqueue was
 * blocked before a plain close and may still complete after it.
 * `arrive` (NULL: never; a producer thread that may block): when what
 * goes in fills the queue with rows still to come, the caller is counted
 * as arriving (qf__fifo_arrive()) before they become visible, *arrive is
 * set, and the put stops there: the rest goes in through a put request
 * (qf__fifo_wait_request(arrived = true)). Returns how many went in. *ret_err: QF_OK, or why
 * nothing more can go in (closed or cancelled; any slots reserved meanwhile were published as
 * tombstones). *ret_published: ring slots published (elements and
 * tombstones, this call's and earlier producers' it carried) and overflow
 * slots pushed, for qf__fifo_wake_consumers(), which the caller runs once
 * it holds no lock. Never blocks. */
size_t qf__fifo_put_now(qf_queue *q, void *const *slots, size_t n, bool pending, bool all,
                        bool *arrive, qf_code *ret_err, size_t *ret_published);

/* A pending enqueue has ended (the last one after a plain close wakes the
 * consumers: end-of-data may have come). become_pending: false (and
 * *ret_err) when the queue is closed or cancelled. */
void qf__fifo_drop_pending(qf_queue *q);
bool qf__fifo_become_pending(qf_queue *q, qf_code *ret_err);

/* QF_QUEUE_SINGLE_PRODUCER: claim the producer side for one call (QF_OK),
 * or QF_FAILED_PRECONDITION naming the queue when another producer call is
 * running (nothing of the caller's went in); release it after. Only for
 * queues created single-producer. */
qf_code qf__fifo_sp_claim(qf_queue *q);
void qf__fifo_sp_release(qf_queue *q);

/* The verdict of state word `s` for a producer. */
qf_code qf__fifo_closed_for(const qf_queue *q, uint64_t s, bool pending);

/* Errors the engine reports. */
qf_code qf__fifo_err_enqueue_cancelled(void);
qf_code qf__fifo_err_timeout(void);

/* --- qf_fifo_wait.c ---------------------------------------------------- */

/* Elements a consumer could take now: published ring slots (tombstones
 * included: an overstatement only causes a spurious wake), the put-back
 * stash and the overflow list. seq_cst loads: a waiter's re-check. */
size_t qf__fifo_available(qf_queue *q);
/* Room for one more element now (seq_cst loads: a waiter's re-check). */
bool qf__fifo_room(qf_queue *q);
/* Closed, and nothing more can arrive: no enqueue pending, no reservation
 * in flight, no consumer but the caller (`holder`) holding elements it may
 * give back. */
bool qf__fifo_settled_closed(qf_queue *q, bool holder);
/* Closed, no enqueue pending and no reservation in flight: only consumers
 * holding elements (*ret_holders of them) can still change what is there. */
bool qf__fifo_closed_quiet(qf_queue *q, uint32_t *ret_holders);

/* After publishing k elements (or tombstones): wake the consumers that may
 * now finish; after a close, all of them (end-of-data may have come). */
void qf__fifo_wake_consumers(qf_queue *q, size_t k);
/* After consuming k ring slots: finish blocked producer threads' enqueues
 * with the room (oldest first), then wake producer tasks if room is left. */
void qf__fifo_wake_producers(qf_queue *q, size_t k);
/* Everyone on every list re-checks (close, end-of-data). */
void qf__fifo_wake_all(qf_queue *q);
/* close(cancel_pending_enqueues): fail every blocked producer thread. */
void qf__fifo_cancel_requests(qf_queue *q);

/* A consumer waits until `need` elements are available or the queue
 * settles closed. `holder`: the caller holds elements it may give back.
 * QF_OK: re-try now (woken, or the re-check succeeded); QF_PENDING (poll
 * form: the waker is registered); QF_DEADLINE_EXCEEDED; or the error of a
 * blocking call made inside a task. */
qf_code qf__fifo_wait_elements(qf_queue *q, size_t need, bool holder, const qf__wait *w);

/* A producer thread blocked on a full queue with slots[*done..n) left:
 * enlist them as a request and sleep until consumers have put them all in
 * (QF_OK, *done = n), the deadline passes (QF_DEADLINE_EXCEEDED), the
 * enqueue is cancelled (QF_CANCELLED), or room or a close showed up while
 * enlisting (QF_OK with *done < n: re-try; never when `arrived`). *done is
 * updated in every case. The caller is pending (a plain close does not
 * refuse it). `arrived`: the caller is counted as arriving (put_now's
 * `arrive`); it stops arriving once its request is linked. */
qf_code qf__fifo_wait_request(qf_queue *q, void *const *slots, size_t n, size_t *done,
                              qf_deadline deadline, bool arrived);

/* Count the caller as a producer arriving at the list (before elements
 * that fill the queue become visible), and the undo for one that then did
 * not have to wait after all. */
void qf__fifo_arrive(qf_queue *q);
void qf__fifo_arrive_undo(qf_queue *q);

/* A producer task waits for room: QF_OK (re-try now) or QF_PENDING. */
qf_code qf__fifo_wait_room_poll(qf_queue *q, qf_waker *wk);

/* A task's request (pending, owns_pending set) joins the line: QF_PENDING,
 * or QF_OK when room or a cancel showed up meanwhile (the request is then
 * off the list again and its pending count dropped: re-try). */
qf_code qf__fifo_enlist(qf_queue *q, qf__put_req *r);
/* Take a request back: true when it was still on the list (its pending
 * count, if it owns one, is dropped); false when a consumer or the closer
 * has it (its final state is on its way). */
bool qf__fifo_withdraw(qf_queue *q, qf__put_req *r);

#endif
