/* qf_queue_batch.c - the dequeues that return a batch: dequeue_many,
 * dequeue_up_to and the bulk dequeue of elements.
 *
 * Each takes several slots in one engine call and stacks them into one
 * element along a new 0th dimension (build_batch(), by what the slots are:
 * inline values, packed values, scalar components or whole elements). A
 * batch that cannot be built gives what was taken back to the front of the
 * queue (give_back()) rather than drop it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_queue_ops-impl.h"
#include "qf_queue_packed-impl.h"
#include "qf_status.h"
#include "qf_strblock-impl.h"
#include "qf_tensor-impl.h"

/* ----------------------------------------------------- inline conversions */

/* The reverse of number_slots() (qf_queue_element.c): the low sz bytes of
 * each of n slot values into dst. */
static void slot_numbers(void *dst, void *const *slots, size_t n, size_t sz)
{
    if (sz == sizeof(void *)) {
        memcpy(dst, slots, n * sz);
        return;
    }
    for (size_t i = 0; i < n; i++)
        memcpy((char *)dst + i * sz, &slots[i], sz);
}

/* ------------------------------------------ dequeue_many and dequeue_up_to */

/* Keys of a batch of n rows of a queue that makes none
 * (qf__queue_rows_without_keys()): n empty strings, which destroying the
 * tensor need not look at one by one. */
static qf_code empty_keys(size_t n, qf_tensor **ret)
{
    qf_tensor *t = qf_tensor_new(QF_STRING, &(qf_shape){.rank = 1, .dims = {(int64_t)n}});
    if (!t)
        return qf_last_code();
    t->all_borrowed = true; /* no string of its own: nothing to free */
    *ret = t;
    return QF_OK;
}

/* The common case of build_batch(): every component of every element is a
 * scalar (a record's key and value, a label): fill the batch tensors
 * straight from the elements. False (b untouched) when some component is
 * not, and the general path runs. When the slots are all rows of string blocks the
 * values are not copied: the value tensor borrows them and takes the slots
 * over (*ret_took true); else the caller still owns the slots. */
static bool stack_scalars(qf_queue *q, void **slots, size_t n, qf_element *b, bool *ret_took)
{
    *ret_took = false;
    for (size_t c = 0; c < q->ncomp; c++) {
        qf_tensor *t = NULL;
        qf_code rc = QF_UNIMPLEMENTED;
        /* Rows live only in queues of (key, value) strings (qf_strblock-impl.h). */
        if (c == 1 && q->ncomp == 2 && q->dtypes[c] == QF_STRING) {
            rc = qf__stack_rows_borrowed(slots, n, &t);
            *ret_took = rc == QF_OK;
        } else if (c == 0 && q->rows_no_keys && q->ncomp == 2 && n > 0 && qf__rows_all(slots, n)) {
            rc = empty_keys(n, &t); /* takes nothing: the values take the rows */
        }
        if (rc == QF_UNIMPLEMENTED)
            rc = qf__stack_scalars(slots, n, c, q->dtypes[c], &t);
        if (rc != QF_OK) {
            for (size_t j = 0; j < c; j++)
                qf_element_set(b, j, NULL);
            return false;
        }
        qf_element_set(b, c, t);
    }
    return true;
}

/* Whether component c of every taken element can go into a batch: the
 * batch adds a dimension, which an element of rank QF_MAX_RANK has no room
 * for (TensorFlow's padded copy refuses ranks above 4 the same way, with
 * Unimplemented: spec 94), and the parts must stack (a pointer component
 * that owns its objects must not be shared, for one). parts: room for n. */
static qf_code check_component(qf_queue *q, void *const *slots, size_t n, size_t c,
                               qf_tensor **parts)
{
    if (q->shapes[c].rank >= QF_MAX_RANK)
        return qf_set_error(QF_UNIMPLEMENTED,
                            "component %zu has rank %d: its batch would need rank %d, over "
                            "the most a tensor has (QF_MAX_RANK, %d)",
                            c, (int)q->shapes[c].rank, (int)q->shapes[c].rank + 1, QF_MAX_RANK);
    for (size_t i = 0; i < n; i++)
        parts[i] = qf_element_get(slots[i], c);
    return qf__tensor_stack_check(parts, n, q->dtypes[c], &q->shapes[c], q->padded);
}

/* build_batch() of whole elements: stack (or pad) each component of the n
 * elements into b, then free the emptied elements. Every component is
 * checked before any tensor leaves its element, so a batch refused for
 * what the elements hold leaves them whole, and the caller gives them back
 * to the queue in their order (the slots are then elements: rows of string
 * blocks were turned into elements first). Running out of memory once the
 * tensors have begun to move cannot be undone: the elements, some of
 * their tensors gone, are freed rather than put back half empty, and
 * *ret_lost says so. */
static qf_code stack_elements(qf_queue *q, void **slots, size_t n, qf_element *b, bool *ret_lost)
{
    /* Rows of string blocks become elements first (the runtime never
     * sends them here; a padded queue of rows would). */
    for (size_t i = 0; i < n; i++) {
        qf_element *e = qf__slot_element(slots[i]);
        if (!e)
            return QF_RESOURCE_EXHAUSTED;
        slots[i] = e;
    }
    qf_tensor **parts = malloc((n ? n : 1) * sizeof(qf_tensor *));
    if (!parts)
        return QF_RESOURCE_EXHAUSTED;
    qf_code rc = QF_OK;
    for (size_t c = 0; c < q->ncomp && rc == QF_OK; c++)
        rc = check_component(q, slots, n, c, parts);
    bool moved = false;
    for (size_t c = 0; c < q->ncomp && rc == QF_OK; c++) {
        for (size_t i = 0; i < n; i++)
            parts[i] = qf_element_take(slots[i], c);
        moved = true;
        qf_tensor *t = NULL;
        rc = q->padded ? qf_tensor_stack_padded(parts, n, q->dtypes[c], &q->shapes[c], &t)
                       : qf_tensor_stack(parts, n, q->dtypes[c], &q->shapes[c], &t);
        if (rc == QF_OK)
            qf_element_set(b, c, t);
    }
    free(parts);
    *ret_lost = rc != QF_OK && moved;
    if (rc == QF_OK || moved)
        for (size_t i = 0; i < n; i++)
            qf_element_free(slots[i]);
    return rc;
}

/* The batch of n taken slots of an inline queue of numbers: one [n]
 * tensor and its element in one home block (qf__element_of_one_dense()). */
static qf_element *number_batch(qf_queue *q, void *const *slots, size_t n)
{
    size_t sz = qf_dtype_size(q->dtypes[0]);
    qf_shape sh = qf_shape_prepend((int64_t)n, &q->shapes[0]);
    qf_element *b = qf__element_of_one_dense(q->dtypes[0], &sh, (int64_t)n, n * sz);
    if (b)
        slot_numbers(b->comps[0]->buf, slots, n, sz);
    return b;
}

/* The components of batch b (q->ncomp empty ones) from n taken slots of
 * any queue but an inline queue of numbers: pointers, packed values,
 * scalar components or whole elements. Consumes the slots on QF_OK; on
 * failure they stay the caller's, unless *ret_lost (stack_elements()). */
static qf_code fill_batch(qf_queue *q, void **slots, size_t n, qf_element *b, bool *ret_lost)
{
    bool took;
    if (q->inline_mode) {
        qf_shape sh = qf_shape_prepend((int64_t)n, &q->shapes[0]);
        qf_tensor *t = qf_tensor_new_ptr(&sh, q->ptr_dtor);
        if (!t)
            return QF_RESOURCE_EXHAUSTED;
        for (size_t i = 0; i < n; i++)
            qf_tensor_set_ptr(t, (int64_t)i, slots[i]);
        qf_element_set(b, 0, t);
    } else if (q->packed) {
        return qf__packed_batch(q, slots, n, b);
    } else if (!q->padded && stack_scalars(q, slots, n, b, &took)) {
        if (!took)
            qf__slots_free(slots, n);
    } else {
        return stack_elements(q, slots, n, b, ret_lost);
    }
    return QF_OK;
}

/* Stack n taken slots into one batch element. Consumes the slots; on
 * failure they stay the caller's, unless *ret_lost (stack_elements()). */
static qf_code build_batch(qf_queue *q, void **slots, size_t n, qf_element **ret_batch,
                           bool *ret_lost)
{
    *ret_lost = false;
    qf_element *b;
    if (q->inline_mode && q->dtypes[0] != QF_PTR) {
        if (!(b = number_batch(q, slots, n)))
            return QF_RESOURCE_EXHAUSTED;
    } else {
        if (!(b = qf_element_new(q->ncomp)))
            return QF_RESOURCE_EXHAUSTED;
        qf_code rc = fill_batch(q, slots, n, b, ret_lost);
        if (rc != QF_OK) {
            qf_element_free(b);
            return rc;
        }
    }
    if (q->names)
        qf_element_set_names(b, (const char *const *)q->names);
    *ret_batch = b;
    return QF_OK;
}

/* A batch build_batch() could not make: what was taken goes back to the
 * front of the queue (unless `lost`), and the error says which queue and
 * why. */
static qf_code batch_refused(qf_queue *q, void *const *slots, size_t n, qf_code rc, bool lost)
{
    char why[256];
    snprintf(why, sizeof(why), "%s",
             rc == QF_RESOURCE_EXHAUSTED ? "out of memory" : qf_last_message());
    if (lost)
        return qf_set_error(
            rc, "could not build the batch of %s '%s' (%s): the %zu elements taken are lost",
            q->kind_name, q->name, why, n);
    give_back(q, slots, n);
    return qf_set_error(rc, "could not build the batch of %s '%s': %s", q->kind_name, q->name, why);
}

/* The queue stores its values in its ring's cells (qf__fifo_config). */
static bool cells(const qf_queue *q)
{
    return q->packed && q->packed->cells;
}

/* A batch's slot array, and for a queue of cells the buffers its values
 * are taken into (slots[i] points at each). Small batches (queue.tput.batch32's
 * 32) keep both on the caller's stack: a malloc() and free() per batch were a
 * tenth of a 32-value batch's cost besides the ring's. */
#define LOCAL_SLOTS 64
#define LOCAL_STAGE 2048

typedef struct batch_bufs {
    void **slots;
    char *stage; /* NULL unless cells(q) */
    void *local_slots[LOCAL_SLOTS];
    uint64_t local_stage[LOCAL_STAGE / sizeof(uint64_t)];
} batch_bufs;

/* Room for a take of up to n (> 0) slots; false when out of memory. */
static bool bufs_get(const qf_queue *q, batch_bufs *b, size_t n)
{
    b->stage = NULL;
    if (n > SIZE_MAX / sizeof(void *))
        return false; /* a bulk max of an unbounded queue near 2^63 */
    b->slots = n <= LOCAL_SLOTS ? b->local_slots : malloc(n * sizeof(void *));
    if (!b->slots)
        return false;
    if (!cells(q))
        return true;
    size_t room = q->packed->room;
    if (n <= LOCAL_STAGE / room)
        b->stage = (char *)b->local_stage;
    else if (n <= SIZE_MAX / room)
        b->stage = malloc(n * room);
    if (!b->stage) {
        if (b->slots != b->local_slots)
            free(b->slots);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        b->slots[i] = b->stage + i * room;
    return true;
}

static void bufs_put(batch_bufs *b)
{
    if (b->slots != b->local_slots)
        free(b->slots);
    if (b->stage != (char *)b->local_stage)
        free(b->stage);
}

static qf_code dequeue_batch(qf_queue *q, int64_t n, bool up_to, const qf__wait *w,
                             qf_element **ret_batch)
{
    if (!q || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "ret_batch" : "queue");
    qf_code rc = qf__check_many_allowed(q, n, up_to);
    if (rc != QF_OK)
        return rc;
    /* TensorFlow's n is an int32; above it the slot array the batch is
     * gathered in would not fit in memory (and its size would wrap). */
    if (n > INT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s requested %lld > %d elements",
                            up_to ? "DequeueUpToOp" : "DequeueManyOp", (long long)n, INT32_MAX);
    batch_bufs b;
    if (!bufs_get(q, &b, (size_t)(n ? n : 1)))
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in dequeue_many");
    size_t got = 0;
    /* A tried dequeue_up_to returns the 1..n that are there now. */
    size_t min = up_to && w->mode == QF__WAIT_TRY ? 1 : (size_t)n;
    if (n > 0)
        rc = engine_take(q, min, (size_t)n, up_to, w, b.slots, &got);
    if (rc == QF_OK) {
        bool lost;
        qf_code brc = build_batch(q, b.slots, got, ret_batch, &lost);
        if (brc != QF_OK)
            rc = batch_refused(q, b.slots, got, brc, lost);
    }
    bufs_put(&b);
    return rc;
}

qf_code qf_queue_dequeue_many(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_batch(q, n, false, &w, ret_batch);
}

qf_code qf_queue_dequeue_many_until(qf_queue *q, int64_t n, qf_deadline deadline,
                                    qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_batch(q, n, false, &w, ret_batch);
}

qf_code qf_queue_try_dequeue_many(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_batch(q, n, false, &w, ret_batch);
}

qf_code qf_queue_dequeue_up_to(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return dequeue_batch(q, n, true, &w, ret_batch);
}

qf_code qf_queue_dequeue_up_to_until(qf_queue *q, int64_t n, qf_deadline deadline,
                                     qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return dequeue_batch(q, n, true, &w, ret_batch);
}

qf_code qf_queue_try_dequeue_up_to(qf_queue *q, int64_t n, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return dequeue_batch(q, n, true, &w, ret_batch);
}

/* ------------------------------------------------------------------ bulk */

static qf_code bulk_batch(qf_queue *q, int64_t min, int64_t max, const qf__wait *w,
                          qf_element **ret_batch)
{
    if (!q || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "ret_batch" : "queue");
    qf_code rc = check_bulk(q, min, max);
    if (rc == QF_OK)
        rc = qf__check_many_allowed(q, max, true);
    if (rc != QF_OK)
        return rc;
    /* What the caller can take at most is what it may need room for. */
    int64_t room = max;
    if (!q->unbounded && room > q->capacity)
        room = q->capacity;
    batch_bufs b;
    if (!bufs_get(q, &b, (size_t)(room ? room : 1)))
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in a bulk dequeue");
    size_t got = 0;
    rc = q->ops->take(q, (size_t)min, (size_t)room, true, w, b.slots, &got);
    if (rc == QF_OK) {
        bool lost;
        qf_code brc = build_batch(q, b.slots, got, ret_batch, &lost);
        if (brc != QF_OK)
            rc = batch_refused(q, b.slots, got, brc, lost);
    }
    bufs_put(&b);
    return rc;
}

qf_code qf_queue_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, QF_FOREVER, NULL};
    return bulk_batch(q, min, max, &w, ret_batch);
}

qf_code qf_queue_dequeue_bulk_until(qf_queue *q, int64_t min, int64_t max, qf_deadline deadline,
                                    qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_DEADLINE, deadline, NULL};
    return bulk_batch(q, min, max, &w, ret_batch);
}

qf_code qf_queue_try_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_element **ret_batch)
{
    qf__wait w = {QF__WAIT_TRY, QF_NO_WAIT, NULL};
    return bulk_batch(q, min, max, &w, ret_batch);
}

qf_code qf_queue_poll_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_waker *wk,
                                   qf_element **ret_batch)
{
    if (!q || !wk || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !q    ? "queue"
                            : !wk ? "waker"
                                  : "ret_batch");
    qf__wait w = {QF__WAIT_POLL, QF_NO_WAIT, wk};
    qf_code rc;
    bool was_registered;
    do {
        was_registered = poll_begins(wk);
        rc = bulk_batch(q, min, max, &w, ret_batch);
    } while (poll_again(q, wk, was_registered, &rc, "Dequeue"));
    return rc;
}
