/* qf_queue_ptr.c - the pointer API: queues of one scalar QF_PTR component
 * move the caller's pointers as their slots.
 *
 * Nothing is allocated or converted: the queue is checked to be a pointer
 * queue and the pointers go to the engine as they are. One, many, up_to
 * and bulk forms; the one-pointer enqueue and dequeue are the hot paths
 * (queue.tput.* in qflow-bench).
 */
#include "qf_queue_ops-impl.h"
#include "qf_status.h"

/* ------------------------------------------------------------ pointer API */

static qf_code put_ptrs(qf_queue *q, void *const *ps, size_t n, const qf__wait *w, size_t *ret_done)
{
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK || n == 0) {
        /* An empty batch succeeds at once, even on a closed queue (spec 22),
         * as the element API's does. */
        if (ret_done)
            *ret_done = 0;
        return rc;
    }
    return engine_put(q, ps, n, w, ret_done);
}

qf_code qf_queue_enqueue_ptr(qf_queue *q, void *p)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return put_ptrs(q, &p, 1, &w, NULL);
}

qf_code qf_queue_enqueue_ptr_until(qf_queue *q, void *p, qf_deadline deadline)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return put_ptrs(q, &p, 1, &w, NULL);
}

qf_code qf_queue_try_enqueue_ptr(qf_queue *q, void *p)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return put_ptrs(q, &p, 1, &w, NULL);
}

qf_code qf_queue_poll_enqueue_ptr(qf_queue *q, void *p, qf_waker *wk)
{
    qf_code rc0 = check_ptr_queue(q);
    if (rc0 != QF_OK)
        return rc0;
    if (!wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL waker");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    qf_code rc;
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = put_ptrs(q, &p, 1, &w, NULL);
    } while (poll_again(q, wk, was_registered, &rc, "Enqueue"));
    return rc;
}

qf_code qf_queue_enqueue_many_ptrs(qf_queue *q, void *const *ps, size_t n, size_t *ret_enqueued)
{
    return qf_queue_enqueue_many_ptrs_until(q, ps, n, QF_FOREVER, ret_enqueued);
}

qf_code qf_queue_enqueue_many_ptrs_until(qf_queue *q, void *const *ps, size_t n,
                                         qf_deadline deadline, size_t *ret_enqueued)
{
    if (!ps && n > 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL pointer array");
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return put_ptrs(q, ps, n, &w, ret_enqueued);
}

qf_code qf_queue_try_enqueue_many_ptrs(qf_queue *q, void *const *ps, size_t n)
{
    if (!ps && n > 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL pointer array");
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return put_ptrs(q, ps, n, &w, NULL);
}

/* Deprecated spelling: QF_NO_WAIT selects the try form. */
qf_code qf_queue_enqueue_many_ptr(qf_queue *q, void *const *ps, size_t n, qf_deadline deadline,
                                  size_t *ret_enqueued)
{
    if (!ps && n > 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL pointer array");
    qf__wait w = {deadline == QF_NO_WAIT ? QF__WAIT_TRY : QF__WAIT_DEADLINE, deadline, NULL};
    return put_ptrs(q, ps, n, &w, ret_enqueued);
}

static qf_code take_ptrs(qf_queue *q, size_t n, bool up_to, const qf__wait *w, void **ret_ps,
                         size_t *ret_n)
{
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK)
        return rc;
    if (!ret_ps)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL output array (ret_ps)");
    if (up_to && !ret_n) /* the count is the only way to know what was taken */
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n: dequeue_up_to_ptr must say how "
                                                 "many it took");
    if (n == 0) {
        if (ret_n)
            *ret_n = 0;
        return QF_OK;
    }
    size_t min = up_to && w->mode == QF__WAIT_TRY ? 1 : n;
    return engine_take(q, min, n, up_to, w, ret_ps, ret_n);
}

qf_code qf_queue_dequeue_ptr(qf_queue *q, void **ret_p)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return take_ptrs(q, 1, false, &w, ret_p, NULL);
}

qf_code qf_queue_dequeue_ptr_until(qf_queue *q, qf_deadline deadline, void **ret_p)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, 1, false, &w, ret_p, NULL);
}

qf_code qf_queue_try_dequeue_ptr(qf_queue *q, void **ret_p)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return take_ptrs(q, 1, false, &w, ret_p, NULL);
}

qf_code qf_queue_poll_dequeue_ptr(qf_queue *q, qf_waker *wk, void **ret_p)
{
    qf_code rc0 = check_ptr_queue(q);
    if (rc0 != QF_OK)
        return rc0;
    if (!wk || !ret_p)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", !wk ? "waker" : "ret_p");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    qf_code rc;
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = take_ptrs(q, 1, false, &w, ret_p, NULL);
    } while (poll_again(q, wk, was_registered, &rc, "Dequeue"));
    return rc;
}

qf_code qf_queue_dequeue_many_ptrs(qf_queue *q, size_t n, void **ret_ps)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_dequeue_many_ptrs_until(qf_queue *q, size_t n, qf_deadline deadline, void **ret_ps)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_try_dequeue_many_ptrs(qf_queue *q, size_t n, void **ret_ps)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_dequeue_up_to_ptrs(qf_queue *q, size_t n, void **ret_ps, size_t *ret_n)
{
    if (!ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n (the count of pointers taken)");
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

qf_code qf_queue_dequeue_up_to_ptrs_until(qf_queue *q, size_t n, qf_deadline deadline,
                                          void **ret_ps, size_t *ret_n)
{
    if (!ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n (the count of pointers taken)");
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

qf_code qf_queue_try_dequeue_up_to_ptrs(qf_queue *q, size_t n, void **ret_ps, size_t *ret_n)
{
    if (!ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_n (the count of pointers taken)");
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

/* Deprecated spellings: QF_NO_WAIT selects the try form. */
qf_code qf_queue_dequeue_many_ptr(qf_queue *q, size_t n, qf_deadline deadline, void **ret_ps)
{
    qf__wait w = {deadline == QF_NO_WAIT ? QF__WAIT_TRY : QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, false, &w, ret_ps, NULL);
}

qf_code qf_queue_dequeue_up_to_ptr(qf_queue *q, size_t n, qf_deadline deadline, void **ret_ps,
                                   size_t *ret_n)
{
    qf__wait w = {deadline == QF_NO_WAIT ? QF__WAIT_TRY : QF__WAIT_DEADLINE, deadline, NULL};
    return take_ptrs(q, n, true, &w, ret_ps, ret_n);
}

/* ------------------------------------------------------------------ bulk */

static qf_code bulk_ptrs(qf_queue *q, size_t min, size_t max, const qf__wait *w, void **ret_ps,
                         size_t *ret_n)
{
    qf_code rc = check_ptr_queue(q);
    if (rc != QF_OK)
        return rc;
    if (!ret_ps || !ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", ret_ps ? "ret_n" : "output array");
    if (max > INT64_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "bulk dequeue: max %zu is too large", max);
    rc = check_bulk(q, (int64_t)min, (int64_t)max);
    if (rc != QF_OK)
        return rc;
    size_t got = 0;
    rc = q->ops->take(q, min, max, true, w, ret_ps, &got);
    if (rc == QF_OK)
        *ret_n = got;
    return rc;
}

qf_code qf_queue_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, void **ret_ps, size_t *ret_n)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
}

qf_code qf_queue_dequeue_bulk_ptr_until(qf_queue *q, size_t min, size_t max, qf_deadline deadline,
                                        void **ret_ps, size_t *ret_n)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
}

qf_code qf_queue_try_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, void **ret_ps,
                                      size_t *ret_n)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
}

qf_code qf_queue_poll_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, qf_waker *wk,
                                       void **ret_ps, size_t *ret_n)
{
    /* NULLs are refused before the waker is looked at (see poll_dequeue). */
    qf_code rc0 = check_ptr_queue(q);
    if (rc0 != QF_OK)
        return rc0;
    if (!wk || !ret_ps || !ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !wk       ? "waker"
                            : !ret_ps ? "output array"
                                      : "ret_n");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    qf_code rc;
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = bulk_ptrs(q, min, max, &w, ret_ps, ret_n);
    } while (poll_again(q, wk, was_registered, &rc, "Dequeue"));
    return rc;
}
