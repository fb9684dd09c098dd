/* qf_queue_ops-impl.h - internal: what the files of the queue API share
 * (qf_queue.c, qf_queue_element.c, qf_queue_batch.c, qf_queue_values.c,
 * qf_queue_ptr.c, qf_queue_line.c): the calls into the kinds' operations
 * with the queue's name in their errors, the give-back, the waker
 * bookkeeping of the poll forms, and the argument checks more than one API
 * makes. static inline: each file has its own copies, free to inline them,
 * and no call crosses between the files on the hot paths (the pointer
 * enqueue and dequeue, queue.tput.* in qflow-bench). Never installed. */
#ifndef QF_QUEUE_OPS_IMPL_H
#define QF_QUEUE_OPS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_queue-impl.h"
#include "qf_status-impl.h"
#include "qf_status.h"
#include "qf_task_mark-impl.h"
#include "qf_tensor.h"
#include "qf_waitlist-impl.h"
#include "qf_waker.h"

/* The attributes' answer to a NULL queue: a neutral value (NULL, 0, false,
 * QF_DT_INVALID) and the error recorded, with a static message. */
static inline bool null_queue(const qf_queue *q, const char *msg)
{
    if (q)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

/* Slots a consumer took but cannot deliver go back to the front. */
static inline void give_back(qf_queue *q, void *const *slots, size_t n)
{
    if (q->ops->give_back) {
        q->ops->give_back(q, slots, n);
        return;
    }
    qf__wait now = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    q->ops->put(q, slots, n, &now, NULL);
}

/* The engines report "full", "empty" and timeouts with static messages,
 * formatting nothing on paths a caller may poll in a loop; the queue's name
 * is added the same way: qf_last_message() formats it when asked. */
static inline qf_code engine_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                                 size_t *ret_done)
{
    qf_code rc = q->ops->put(q, slots, n, w, ret_done);
    if (rc == QF_UNAVAILABLE)
        return qf__set_error_named(
            rc, n > 1 ? "%s '%s' has no room for %lld elements" : "%s '%s' is full", q->kind_name,
            q->name, (long long)n);
    if (rc == QF_DEADLINE_EXCEEDED)
        return qf__set_error_named(rc, "%s '%s': Timed out waiting for notification", q->kind_name,
                                   q->name, 0);
    return rc;
}

static inline qf_code engine_take(qf_queue *q, size_t min, size_t max, bool up_to,
                                  const qf__wait *w, void **ret_slots, size_t *ret_got)
{
    qf_code rc = q->ops->take(q, min, max, up_to, w, ret_slots, ret_got);
    if (rc == QF_UNAVAILABLE)
        return qf__set_error_named(
            rc, min > 1 ? "%s '%s' has fewer than %lld elements" : "%s '%s' is empty", q->kind_name,
            q->name, (long long)min);
    if (rc == QF_DEADLINE_EXCEEDED)
        return qf__set_error_named(rc, "%s '%s': Timed out waiting for notification", q->kind_name,
                                   q->name, 0);
    return rc;
}

/* A QF_PTR tensor that owns its objects can only hand them over when the
 * caller's reference is the only one. Checked before anything moves. */
static inline qf_code check_ptr_movable(const qf_queue *q, const qf_element *e)
{
    for (size_t i = 0; i < q->ncomp; i++) {
        const qf_tensor *t = qf_element_get(e, i);
        if (qf_tensor_dtype(t) == QF_PTR && qf_tensor_ptr_dtor(t) && qf_tensor_refcount(t) != 1)
            return qf_set_error(QF_FAILED_PRECONDITION,
                                "Component %zu of the element for %s '%s' owns pointers and is "
                                "shared; it cannot be moved into the queue",
                                i, q->kind_name, q->name);
    }
    return QF_OK;
}

/* A poll form's op has ended (not QF_PENDING). `was_registered`: the
 * waker was still on a wait list when the op began, left there by an
 * earlier poll that returned pending, and this op completed without it;
 * a wake claiming that registration now, or since the op began, went to a
 * task that no longer waits: withdraw it, which hands such a wake on to the
 * next waiter. Otherwise a wake that came before the op was the one it
 * used. */
static inline void poll_ended(qf_waker *wk, bool was_registered)
{
    if (was_registered)
        qf_waker_withdraw(wk);
    else
        qf__waker_consumed_fast(wk);
}

static inline bool poll_begins(const qf_waker *wk)
{
    return qf__waker_state_fast(wk) == QF_WAKER_REGISTERED;
}

/* After a poll form's op gave *rc (`was_registered` from poll_begins()):
 * true when it must run again. An op that ended is finished off
 * (poll_ended()). A poll that would park (QF_PENDING) in a task its
 * runtime has cancelled (a shutdown, TensorFlow's session close) withdraws
 * its waker and answers QF_CANCELLED "<op> operation was cancelled",
 * TensorFlow's words (spec 37), so the task ends with them; if a wake came
 * meanwhile the op may now go through, so it runs again (a wake is passed
 * on by the withdrawal, never lost). Only on the parking path: one call of
 * the scheduler's check. */
static inline bool poll_again(qf_queue *q, qf_waker *wk, bool was_registered, qf_code *rc,
                              const char *op)
{
    if (*rc != QF_PENDING) {
        poll_ended(wk, was_registered);
        return false;
    }
    if (!qf__task_cancelled())
        return false;
    if (!qf_queue_cancel_poll(q, wk))
        return true;
    *rc = qf_set_error(QF_CANCELLED, "%s operation was cancelled", op);
    return false;
}

/* A call of the pointer API on q: refused (error set) unless q is a
 * pointer queue. */
static inline qf_code check_ptr_queue(const qf_queue *q)
{
    if (!q)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL queue");
    if (!q->ptr_queue)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "%s '%s' is not a pointer queue (one scalar QF_PTR component)",
                            q->kind_name, q->name);
    return QF_OK;
}

/* min and max of a bulk dequeue (of elements or pointers). */
static inline qf_code check_bulk(const qf_queue *q, int64_t min, int64_t max)
{
    if (min < 1 || max < min)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "bulk dequeue of %s '%s' needs 1 <= min <= max (min %lld, max %lld)",
                            q->kind_name, q->name, (long long)min, (long long)max);
    if (!q->unbounded && min > q->capacity)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "bulk dequeue of %s '%s': min %lld exceeds the capacity %lld",
                            q->kind_name, q->name, (long long)min, (long long)q->capacity);
    return QF_OK;
}

#endif
