/* qf_queue_values.c - the values API (issue 27): a packed queue's
 * elements as the caller's buffers of the components' values.
 *
 * A typed hand-off through elements makes an element and its tensors on
 * one side and frees them on the other; these calls copy the values from
 * the caller's buffers into the slot (or the ring's cell) and out into the
 * consumer's, and no element or tensor is made on either side. Only packed
 * queues (qf_queue_packed-impl.h) take them.
 */
#include "qf_queue_ops-impl.h"
#include "qf_queue_packed-impl.h"
#include "qf_status.h"

/* ---------------------------------------------------------- values API */

/* Whether the _values calls may run on q with these buffers (NULL when a
 * buffer is missing); records the reason when not. */
static qf_code values_usable(const qf_queue *q, const void *const *bufs, const char *what)
{
    if (!q || !bufs)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? what : "queue");
    if (!q->packed) {
        const char *why = qf__packed_refusal(q);
        return qf_set_error(QF_INVALID_ARGUMENT, "%s '%s' does not take values: %s", q->kind_name,
                            q->name, why ? why : "not a queue of packed values");
    }
    for (size_t c = 0; c < q->ncomp; c++)
        if (!bufs[c])
            return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s[%zu]", what, c);
    return QF_OK;
}

/* The put of values_usable() vals. */
static qf_code put_values(qf_queue *q, const void *const *vals, const qf__wait *w)
{
    if (q->packed->cells) {
        uint64_t buf[QF__PACKED_MAX_BYTES / 8];
        void *slot = buf;
        qf__packed_pack_values_into(q, vals, buf);
        return engine_put(q, &slot, 1, w, NULL);
    }
    void *slot = qf__packed_pack_values(q, vals);
    if (!slot)
        return QF_RESOURCE_EXHAUSTED;
    qf_code rc = engine_put(q, &slot, 1, w, NULL);
    if (rc != QF_OK)
        qf__packed_free(q, &slot, 1);
    return rc;
}

static qf_code enqueue_values(qf_queue *q, const void *const *vals, const qf__wait *w)
{
    qf_code rc = values_usable(q, vals, "vals");
    return rc == QF_OK ? put_values(q, vals, w) : rc;
}

qf_code qf_queue_enqueue_values(qf_queue *q, const void *const *vals)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return enqueue_values(q, vals, &w);
}

qf_code qf_queue_enqueue_values_until(qf_queue *q, const void *const *vals, qf_deadline deadline)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return enqueue_values(q, vals, &w);
}

qf_code qf_queue_try_enqueue_values(qf_queue *q, const void *const *vals)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return enqueue_values(q, vals, &w);
}

qf_code qf_queue_poll_enqueue_values(qf_queue *q, const void *const *vals, qf_waker *wk)
{
    /* Refused before the waker is looked at, as qf_queue_poll_enqueue(). */
    if (!wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL waker");
    qf_code rc = values_usable(q, vals, "vals");
    if (rc != QF_OK)
        return rc;
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = put_values(q, vals, &w);
    } while (poll_again(q, wk, was_registered, &rc, "Enqueue"));
    return rc;
}

/* The take into values_usable() outs. */
static qf_code take_values(qf_queue *q, const qf__wait *w, void *const *outs)
{
    uint64_t buf[QF__PACKED_MAX_BYTES / 8]; /* a queue of cells copies the value here */
    void *slot = buf;
    qf_code rc = engine_take(q, 1, 1, false, w, &slot, NULL);
    if (rc == QF_OK)
        qf__packed_unpack_values(q, slot, outs);
    return rc;
}

static qf_code dequeue_values(qf_queue *q, const qf__wait *w, void *const *outs)
{
    qf_code rc = values_usable(q, (const void *const *)outs, "outs");
    return rc == QF_OK ? take_values(q, w, outs) : rc;
}

qf_code qf_queue_dequeue_values(qf_queue *q, void *const *outs)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_values(q, &w, outs);
}

qf_code qf_queue_dequeue_values_until(qf_queue *q, qf_deadline deadline, void *const *outs)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_values(q, &w, outs);
}

qf_code qf_queue_try_dequeue_values(qf_queue *q, void *const *outs)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_values(q, &w, outs);
}

qf_code qf_queue_poll_dequeue_values(qf_queue *q, qf_waker *wk, void *const *outs)
{
    if (!wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL waker");
    qf_code rc = values_usable(q, (const void *const *)outs, "outs");
    if (rc != QF_OK)
        return rc;
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = take_values(q, &w, outs);
    } while (poll_again(q, wk, was_registered, &rc, "Dequeue"));
    return rc;
}

bool qf_queue_takes_values(const qf_queue *q)
{
    return !null_queue(q, "qf_queue_takes_values: queue (q) is NULL") && q->packed;
}
