/* qf_queue_element.c - the element API: one element in or out, and a
 * batch in as its rows (enqueue_many).
 *
 * A producer hands over an element and a consumer gets one back; the ring
 * holds what the queue stores, so each call converts at the edge: a packed
 * queue's slot is the element's values (qf_queue_packed-impl.h), an inline
 * queue's the value bits, any other queue's the element itself. Checks run
 * before anything moves, so a refused element is still the caller's. Also
 * here: the calls of qf_queue_trusted-impl.h, which skip those checks for
 * the layers above that proved them once.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "qf_fifo-impl.h"
#include "qf_queue_ops-impl.h"
#include "qf_queue_packed-impl.h"
#include "qf_queue_trusted-impl.h"
#include "qf_status.h"
#include "qf_strblock-impl.h"
#include "qf_tensor-impl.h"

/* ----------------------------------------------------- inline conversions */

/* sz <= 8 bytes of a number from src to dst: the usual 8 as one move,
 * not a call into memcpy with a size it must look at. */
static inline void copy_number(void *dst, const void *src, size_t sz)
{
    if (sz == 8)
        memcpy(dst, src, 8);
    else
        memcpy(dst, src, sz);
}

/* A number of sz <= 8 bytes as a slot value: its bytes first, so memcpy
 * back out of the slot works. */
static inline void *number_slot(const void *src, size_t sz)
{
    uintptr_t u = 0;
    copy_number(&u, src, sz);
    return (void *)u;
}

/* n numbers of sz bytes from src as slot values. On this layout
 * (inline_dtype() in qf_queue.c) 8-byte numbers are the slots' bytes
 * already: one copy. */
static void number_slots(void **slots, const void *src, size_t n, size_t sz)
{
    if (sz == sizeof(void *)) {
        memcpy(slots, src, n * sz);
        return;
    }
    for (size_t i = 0; i < n; i++)
        slots[i] = number_slot((const char *)src + i * sz, sz);
}

/* The slot value of a validated one-component scalar element. */
static void *inline_bits(const qf_queue *q, const qf_tensor *t)
{
    if (q->dtypes[0] == QF_PTR)
        return qf_tensor_ptr(t, 0);
    return number_slot(t->buf, qf_dtype_size(q->dtypes[0]));
}

/* The queue now owns the value: make sure the tensor will not free it. */
static void disown_inline_ptr(const qf_queue *q, qf_tensor *t, int64_t i)
{
    if (q->dtypes[0] == QF_PTR && qf_tensor_ptr_dtor(t)) {
        void *p;
        qf_tensor_take_ptr(t, i, &p);
    }
}

/* The element of a taken slot: a number's tensor and the element in one
 * home block (qf__element_of_one_dense()); a pointer's tensor, which may
 * own its object, stands alone. */
static qf_element *inline_element(const qf_queue *q, void *v)
{
    qf_element *e;
    if (q->dtypes[0] == QF_PTR) {
        qf_tensor *t = qf_tensor_new_scalar_ptr(v, q->ptr_dtor);
        if (!t)
            return NULL;
        e = qf_element_of(1, &t);
    } else {
        size_t sz = qf_dtype_size(q->dtypes[0]);
        e = qf__element_of_one_dense(q->dtypes[0], &q->shapes[0], 1, sz);
        if (!e)
            return NULL;
        copy_number(e->comps[0]->buf, &v, sz); /* the low bytes: little-endian (inline_dtype()) */
    }
    if (e && q->names && qf_element_set_names(e, (const char *const *)q->names) != QF_OK) {
        qf_element_free(e);
        return NULL;
    }
    return e;
}

/* --------------------------------------------------------- element API */

static qf_code enqueue_one(qf_queue *q, qf_element *elem, const qf__wait *w)
{
    if (!q || !elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "element" : "queue");
    qf_code rc;
    if (!qf__element_plainly_fits(q, elem)) {
        rc = qf__validate_element(q, elem);
        if (rc == QF_OK)
            rc = check_ptr_movable(q, elem);
        if (rc != QF_OK)
            return rc;
    }
    if (q->packed && q->packed->cells) {
        /* The values go into a cell of the ring: no block crosses. */
        uint64_t buf[QF__PACKED_MAX_BYTES / 8];
        void *slot = buf;
        qf__packed_pack_into(q, elem, buf);
        rc = engine_put(q, &slot, 1, w, NULL);
        if (rc == QF_OK)
            qf__element_free_plain(elem); /* a packed queue's: numeric or bool */
        return rc;
    }
    if (q->packed) {
        /* The values go; the element and its tensors stay on this thread. */
        void *slot = qf__packed_pack(q, elem);
        if (!slot)
            return QF_RESOURCE_EXHAUSTED;
        rc = engine_put(q, &slot, 1, w, NULL);
        if (rc == QF_OK)
            qf__element_free_plain(elem);
        else
            qf__packed_free(q, &slot, 1);
        return rc;
    }
    if (!q->inline_mode)
        return engine_put(q, (void *const *)&elem, 1, w, NULL);
    qf_tensor *t = elem->comps[0]; /* validated: there, of the queue's dtype */
    void *v = inline_bits(q, t);
    rc = engine_put(q, &v, 1, w, NULL);
    if (rc != QF_OK)
        return rc;
    if (q->dtypes[0] == QF_PTR) {
        disown_inline_ptr(q, t, 0);
        qf_element_free(elem);
    } else {
        qf__element_free_plain(elem); /* a number's tensor owns only its block */
    }
    return QF_OK;
}

qf_code qf_queue_enqueue(qf_queue *q, qf_element *elem)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return enqueue_one(q, elem, &w);
}

qf_code qf_queue_enqueue_until(qf_queue *q, qf_element *elem, qf_deadline deadline)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return enqueue_one(q, elem, &w);
}

qf_code qf_queue_try_enqueue(qf_queue *q, qf_element *elem)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return enqueue_one(q, elem, &w);
}

qf_code qf_queue_poll_enqueue(qf_queue *q, qf_element *elem, qf_waker *wk)
{
    /* NULLs are refused before the waker is looked at: a registration
     * left by an earlier poll stays as it is. */
    if (!q || !elem || !wk)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !q      ? "queue"
                            : !elem ? "element"
                                    : "waker");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    qf_code rc;
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = enqueue_one(q, elem, &w);
    } while (poll_again(q, wk, was_registered, &rc, "Enqueue"));
    return rc;
}

void qf__queue_rows_without_keys(qf_queue *q)
{
    q->rows_no_keys = true;
}

void qf__queue_rows_by_length(qf_queue *q)
{
    q->rows_bare = true;
}

bool qf__queue_takes_bare_rows(const qf_queue *q)
{
    return q->rows_bare;
}

void qf__queue_use_symmetric_fences(qf_queue *q)
{
    if (q->ops == &qf__fifo_ops)
        qf__ring_set_symmetric(&q->fifo.ring);
}

void qf__queue_lay_in_order(qf_queue *q)
{
    if (q->ops == &qf__fifo_ops)
        qf__ring_lay_in_order(&q->fifo.ring);
}

/* The FIFO engine's count of what the capacity holds (reserved slots,
 * published or not, the stash and the overflow list) from its cheap
 * loads, where qf_queue_size() would scan the published run. */
int64_t qf__queue_room_guess(const qf_queue *q)
{
    int64_t used = q->ops == &qf__fifo_ops ? (int64_t)qf__fifo_used((qf__fifo *)&q->fifo, false)
                                           : q->ops->size(q);
    return used >= q->capacity ? 0 : q->capacity - used;
}

/* qf_queue_poll_enqueue() without the per-element checks, for the batch
 * ops in runtime/pipeline/qf_batch_op.c (qf_queue_trusted-impl.h) whose
 * source qf_batch.c's trusted_source() accepted: their record sources make
 * every element themselves (two scalar strings, no names, see
 * qf_record_to_element()) and the op only takes this path after matching
 * that against the queue when it was built, so qf__validate_element() and
 * check_ptr_movable() cannot fail there and cost a third of the enqueue.
 * Such a queue is never inline (strings are not). Several slots (elements
 * or rows of string blocks, qf_strblock-impl.h) go in with one engine call; *ret_done
 * says how many went in, also when the call parks (QF_PENDING) or fails. */
qf_code qf__queue_poll_enqueue_trusted(qf_queue *q, void *const *slots, size_t n, qf_waker *wk,
                                       size_t *ret_done)
{
    /* The running task's own waker (qf_task_waker()): never NULL, so the
     * inlined waker checks below need no NULL test, as the public poll
     * forms' have none after their argument checks. */
    assert(wk != NULL);
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    bool was_registered = poll_begins(wk);
    size_t done = 0;
    qf_code rc = q->ops->put(q, slots, n, &w, &done);
    if (rc != QF_PENDING)
        poll_ended(wk, was_registered);
    *ret_done = done;
    return rc;
}

/* Rows [from, rows) of an inline batch as a new tensor (moving owned
 * pointers out of `t`). */
static qf_tensor *inline_remainder(const qf_queue *q, qf_tensor *t, int64_t from, int64_t rows)
{
    qf_shape sh = qf_shape_prepend(rows - from, &q->shapes[0]);
    if (q->dtypes[0] == QF_PTR) {
        qf_tensor *r = qf_tensor_new_ptr(&sh, qf_tensor_ptr_dtor(t));
        for (int64_t i = from; r && i < rows; i++) {
            void *p = qf_tensor_ptr(t, i);
            disown_inline_ptr(q, t, i);
            qf_tensor_set_ptr(r, i - from, p);
        }
        return r;
    }
    size_t sz = qf_dtype_size(q->dtypes[0]);
    return qf_tensor_new_from(q->dtypes[0], &sh, (const char *)qf_tensor_cdata(t) + from * sz,
                              (size_t)(rows - from) * sz);
}

static qf_code enqueue_many_inline(qf_queue *q, qf_element *batch, int64_t rows, const qf__wait *w,
                                   size_t *ret_done)
{
    qf_tensor *t = qf_element_get(batch, 0);
    void *small[64];
    void **slots = rows <= 64 ? small : malloc((size_t)rows * sizeof(void *));
    if (!slots)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
    if (q->dtypes[0] == QF_PTR) {
        for (int64_t i = 0; i < rows; i++)
            slots[i] = qf_tensor_ptr(t, i);
    } else {
        number_slots(slots, t->buf, (size_t)rows, qf_dtype_size(q->dtypes[0]));
    }
    size_t done = 0;
    qf_code rc = engine_put(q, slots, (size_t)rows, w, &done);
    if (slots != small)
        free(slots);
    bool ptrs = q->dtypes[0] == QF_PTR;
    if (rc == QF_OK) {
        for (int64_t i = 0; ptrs && i < rows; i++)
            disown_inline_ptr(q, t, i);
        qf_element_free(batch);
    } else if (done > 0) {
        for (size_t i = 0; ptrs && i < done; i++)
            disown_inline_ptr(q, t, (int64_t)i);
        qf_tensor *rest = inline_remainder(q, t, (int64_t)done, rows);
        if (rest)
            qf_element_set(batch, 0, rest);
    }
    *ret_done = done;
    return rc;
}

/* The rows of a packed queue's batch go as slots of values; what did not
 * go in stays in the caller's batch. */
static qf_code enqueue_many_packed(qf_queue *q, qf_element *batch, int64_t rows, const qf__wait *w,
                                   size_t *ret_done)
{
    void *small[64];
    void **slots = rows <= 64 ? small : malloc((size_t)rows * sizeof(void *));
    char *stage = NULL;
    if (slots && q->packed->cells)
        stage = malloc((size_t)rows * q->packed->room);
    if (!slots || (q->packed->cells && !stage)) {
        if (slots != small)
            free(slots);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
    }
    qf_code rc = QF_OK;
    if (stage)
        qf__packed_pack_rows_into(q, batch, 0, (size_t)rows, stage, slots);
    else
        rc = qf__packed_pack_rows(q, batch, 0, (size_t)rows, slots);
    size_t done = 0;
    if (rc == QF_OK) {
        rc = engine_put(q, slots, (size_t)rows, w, &done);
        if (rc == QF_OK) {
            qf_element_free(batch);
        } else {
            qf__packed_free(q, slots + done, (size_t)rows - done);
            if (done > 0)
                qf__packed_keep_rows(q, batch, (int64_t)done, rows);
        }
    }
    if (slots != small)
        free(slots);
    free(stage);
    *ret_done = done;
    return rc;
}

/* Split the batch into row elements (consumes its tensors). On failure the
 * batch is rebuilt from the rows, so the caller keeps every row. */
static qf_code split_rows(qf_queue *q, qf_element *batch, int64_t rows, qf_element **out)
{
    size_t nc = q->ncomp;
    qf_tensor **parts = malloc((size_t)rows * nc * sizeof(qf_tensor *));
    if (!parts)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
    for (size_t c = 0; c < nc; c++) {
        qf_tensor *t = qf_element_take(batch, c);
        qf_code rc = qf_tensor_unstack(t, parts + c * (size_t)rows);
        if (rc != QF_OK) {
            /* Unreachable after validation and check_ptr_movable(); keep
             * the rows already split rather than lose them. */
            for (size_t c2 = 0; c2 < c; c2++) {
                qf_tensor *b = NULL;
                qf_tensor_stack(parts + c2 * (size_t)rows, (size_t)rows, q->dtypes[c2], NULL, &b);
                qf_element_set(batch, c2, b);
            }
            free(parts);
            return rc;
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        qf_tensor *row[64];
        qf_tensor **rp = nc <= 64 ? row : malloc(nc * sizeof(qf_tensor *));
        for (size_t c = 0; rp && c < nc; c++)
            rp[c] = parts[c * (size_t)rows + (size_t)r];
        out[r] = rp ? qf_element_of(nc, rp) : NULL;
        if (rp != row)
            free(rp);
        if (out[r] && q->names)
            qf_element_set_names(out[r], (const char *const *)q->names);
    }
    free(parts);
    return QF_OK;
}

/* Put rows [from, rows) back together into the caller's batch. */
static void rejoin_rows(qf_queue *q, qf_element *batch, qf_element **rows_e, size_t from,
                        size_t rows)
{
    size_t n = rows - from;
    qf_tensor **parts = malloc((n ? n : 1) * sizeof(qf_tensor *));
    for (size_t c = 0; parts && c < q->ncomp; c++) {
        for (size_t r = 0; r < n; r++)
            parts[r] = qf_element_take(rows_e[from + r], c);
        qf_tensor *b = NULL;
        /* the rows came from one batch: same shapes, no padding needed */
        const qf_shape *sh = q->shapes && !q->padded ? &q->shapes[c] : NULL;
        if (qf_tensor_stack(parts, n, q->dtypes[c], sh, &b) == QF_OK)
            qf_element_set(batch, c, b);
    }
    free(parts);
    for (size_t r = from; r < rows; r++)
        qf_element_free(rows_e[r]);
}

static qf_code enqueue_many(qf_queue *q, qf_element *batch, const qf__wait *w, size_t *ret_enqueued)
{
    size_t done = 0;
    if (ret_enqueued)
        *ret_enqueued = 0;
    if (!q || !batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "batch" : "queue");
    int64_t rows = 0;
    qf_code rc = qf__validate_batch(q, batch, &rows);
    if (rc == QF_OK)
        rc = check_ptr_movable(q, batch);
    if (rc != QF_OK)
        return rc;
    if (rows == 0) {
        qf_element_free(batch); /* spec 22: succeeds even when closed */
        return QF_OK;
    }
    if (w->mode == QF__WAIT_TRY) {
        uint64_t s = atomic_load_explicit(&q->fifo.state, memory_order_relaxed);
        if (s & QF__CLOSED)
            return qf_set_error(QF_CANCELLED, "%s '%s' is closed.", q->kind_name, q->name);
    }
    if (q->inline_mode) {
        rc = enqueue_many_inline(q, batch, rows, w, &done);
    } else if (q->packed) {
        rc = enqueue_many_packed(q, batch, rows, w, &done);
    } else {
        qf_element **els = malloc((size_t)rows * sizeof(qf_element *));
        if (!els)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in enqueue_many");
        rc = split_rows(q, batch, rows, els);
        if (rc == QF_OK) {
            rc = engine_put(q, (void *const *)els, (size_t)rows, w, &done);
            if (rc == QF_OK)
                qf_element_free(batch);
            else
                rejoin_rows(q, batch, els, done, (size_t)rows);
        }
        free(els);
    }
    if (ret_enqueued)
        *ret_enqueued = done;
    return rc;
}

qf_code qf_queue_enqueue_many(qf_queue *q, qf_element *batch, size_t *ret_enqueued)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return enqueue_many(q, batch, &w, ret_enqueued);
}

qf_code qf_queue_enqueue_many_until(qf_queue *q, qf_element *batch, qf_deadline deadline,
                                    size_t *ret_enqueued)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return enqueue_many(q, batch, &w, ret_enqueued);
}

qf_code qf_queue_try_enqueue_many(qf_queue *q, qf_element *batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return enqueue_many(q, batch, &w, NULL);
}

static qf_code dequeue_one(qf_queue *q, const qf__wait *w, qf_element **ret_elem)
{
    if (!q || !ret_elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "ret_elem" : "queue");
    /* A queue of cells copies the value here (qf__fifo_config). */
    uint64_t buf[QF__PACKED_MAX_BYTES / 8];
    void *slot = buf;
    qf_code rc = engine_take(q, 1, 1, false, w, &slot, NULL);
    if (rc != QF_OK)
        return rc;
    qf_element *e = q->packed        ? qf__packed_unpack(q, slot)
                    : q->inline_mode ? inline_element(q, slot)
                                     : qf__slot_element(slot);
    if (!e) {
        /* Give the value back (to the front) rather than lose it. */
        give_back(q, &slot, 1);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in dequeue");
    }
    *ret_elem = e;
    return QF_OK;
}

qf_code qf_queue_dequeue(qf_queue *q, qf_element **ret_elem)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_one(q, &w, ret_elem);
}

qf_code qf_queue_dequeue_until(qf_queue *q, qf_deadline deadline, qf_element **ret_elem)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_one(q, &w, ret_elem);
}

qf_code qf_queue_try_dequeue(qf_queue *q, qf_element **ret_elem)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_one(q, &w, ret_elem);
}

qf_code qf_queue_poll_dequeue(qf_queue *q, qf_waker *wk, qf_element **ret_elem)
{
    if (!q || !wk || !ret_elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !q    ? "queue"
                            : !wk ? "waker"
                                  : "ret_elem");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    qf_code rc;
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = dequeue_one(q, &w, ret_elem);
    } while (poll_again(q, wk, was_registered, &rc, "Dequeue"));
    return rc;
}
