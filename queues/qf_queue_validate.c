/* qf_queue_validate.c - checks on what callers hand a queue.
 *
 * Every check runs before the queue is touched, so a bad element is refused
 * with the queue unchanged (spec 12) and the caller still owning it. The
 * message texts follow TensorFlow's kernels (spec 17-21) so that code
 * matching on them keeps working.
 */
#include <stdlib.h>
#include <string.h>

#include "qf_queue-impl.h"
#include "qf_status.h"
#include "qf_tensor-impl.h"

#define SHAPE_TXT 160

static qf_code check_names(const qf_queue *q, qf_element *e)
{
    bool has = qf_element_has_names(e);
    if (!q->names) {
        if (has)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "%s '%s' must have names to enqueue a dictionary (an element "
                                "with component names)",
                                q->kind_name, q->name);
        return QF_OK;
    }
    if (!has)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "%s '%s' has component names: enqueue a dictionary (an element "
                            "with component names)",
                            q->kind_name, q->name);
    /* Same set of names, any order: find each queue name in the element. */
    size_t n = q->ncomp;
    if (qf_element_size(e) != n)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Element names do not match names of Queue '%s': the element has %zu "
                            "named components, the queue %zu",
                            q->name, qf_element_size(e), n);
    size_t map_small[16];
    size_t *map = n <= 16 ? map_small : malloc(n * sizeof(size_t));
    if (!map)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory checking names");
    bool same_order = true;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < n && strcmp(qf_element_name(e, j), q->names[i]) != 0)
            j++;
        if (j == n) {
            if (map != map_small)
                free(map);
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Element names do not match names of Queue '%s': no component "
                                "named '%s'",
                                q->name, q->names[i]);
        }
        map[i] = j;
        same_order = same_order && j == i;
    }
    if (!same_order) {
        /* Put the components in the queue's order. */
        qf_tensor *small[16];
        qf_tensor **ts = n <= 16 ? small : malloc(n * sizeof(qf_tensor *));
        if (ts) {
            for (size_t j = 0; j < n; j++)
                ts[j] = qf_element_take(e, j);
            for (size_t i = 0; i < n; i++)
                qf_element_set(e, i, ts[map[i]]);
            qf_element_set_names(e, (const char *const *)q->names);
            if (ts != small)
                free(ts);
        }
    }
    if (map != map_small)
        free(map);
    return QF_OK;
}

static qf_code check_count(const qf_queue *q, const qf_element *e)
{
    size_t got = qf_element_size(e);
    if (got != q->ncomp)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Wrong number of components in tuple. Expected %zu, got %zu", q->ncomp,
                            got);
    for (size_t i = 0; i < got; i++) {
        const qf_tensor *t = qf_element_get(e, i);
        if (!t)
            return qf_set_error(QF_INVALID_ARGUMENT, "Tuple component %zu is missing", i);
        if (qf_tensor_dtype(t) != q->dtypes[i])
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Type mismatch in tuple component %zu. Expected %s, got %s", i,
                                qf_dtype_name(q->dtypes[i]), qf_dtype_name(qf_tensor_dtype(t)));
    }
    return QF_OK;
}

static qf_code shape_mismatch(size_t i, const qf_shape *want, const qf_shape *got)
{
    char a[SHAPE_TXT], b[SHAPE_TXT];
    return qf_set_error(QF_INVALID_ARGUMENT,
                        "Shape mismatch in tuple component %zu. Expected %s, got %s", i,
                        qf_shape_format(want, a, sizeof(a)), qf_shape_format(got, b, sizeof(b)));
}

bool qf__element_plainly_fits(const qf_queue *q, const qf_element *e)
{
    if (q->names || e->names || e->n != q->ncomp || (q->shapes && q->padded))
        return false;
    for (size_t i = 0; i < q->ncomp; i++) {
        const qf_tensor *t = e->comps[i];
        if (!t || t->dtype != q->dtypes[i] || (t->dtype == QF_PTR && t->dtor))
            return false;
        if (!q->shapes)
            continue;
        /* A tensor's shape is fully defined, so equal ranks and dimensions
         * are qf_shape_equal()'s verdict. */
        const qf_shape *want = &q->shapes[i];
        if (t->shape.rank != want->rank)
            return false;
        for (int d = 0; d < want->rank; d++)
            if (t->shape.dims[d] != want->dims[d])
                return false;
    }
    return true;
}

qf_code qf__validate_element(const qf_queue *q, qf_element *e)
{
    /* Names first: they may reorder the components before dtypes are
     * checked by position. */
    qf_code rc = check_names(q, e);
    if (rc == QF_OK)
        rc = check_count(q, e);
    if (rc != QF_OK || !q->shapes)
        return rc;
    for (size_t i = 0; i < q->ncomp; i++) {
        const qf_shape *got = qf_tensor_shape(qf_element_get(e, i));
        /* A padding queue's shapes may leave dimensions unknown. */
        bool ok = q->padded ? qf_shape_compatible(got, &q->shapes[i])
                            : qf_shape_equal(got, &q->shapes[i]);
        if (!ok)
            return shape_mismatch(i, &q->shapes[i], got);
    }
    return QF_OK;
}

/* qf__validate_batch()'s answer for the usual batch, in one pass: no
 * names, every component there with the queue's dtype and exactly its shape
 * behind one 0th dimension that all share. -1: not such a batch (the full
 * checks then say what is wrong, or accept it). */
static int64_t plain_batch_rows(const qf_queue *q, const qf_element *b)
{
    if (q->names || b->names || b->n != q->ncomp || !q->shapes || q->padded)
        return -1;
    int64_t rows = -1;
    for (size_t i = 0; i < q->ncomp; i++) {
        const qf_tensor *t = b->comps[i];
        const qf_shape *want = &q->shapes[i];
        if (!t || want->rank < 0 || t->dtype != q->dtypes[i] || t->shape.rank != want->rank + 1 ||
            (rows >= 0 && t->shape.dims[0] != rows))
            return -1;
        rows = t->shape.dims[0];
        for (int d = 0; d < want->rank; d++)
            if (t->shape.dims[d + 1] != want->dims[d])
                return -1;
    }
    return rows;
}

qf_code qf__validate_batch(const qf_queue *q, qf_element *b, int64_t *ret_rows)
{
    int64_t plain = plain_batch_rows(q, b);
    if (plain >= 0) {
        *ret_rows = plain;
        return QF_OK;
    }
    qf_code rc = check_names(q, b);
    if (rc == QF_OK)
        rc = check_count(q, b);
    if (rc != QF_OK)
        return rc;
    int64_t rows = -1;
    for (size_t i = 0; i < q->ncomp; i++) {
        const qf_shape *got = qf_tensor_shape(qf_element_get(b, i));
        if (got->rank < 1)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Component %zu of an enqueue_many batch must have rank >= 1 "
                                "(the 0th dimension counts the elements), got a scalar",
                                i);
        if (rows < 0)
            rows = got->dims[0];
        else if (got->dims[0] != rows && !q->shapes)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "All input tensors must have the same size in the 0th "
                                "dimension. Component %zu has %lld, and should have %lld",
                                i, (long long)got->dims[0], (long long)rows);
        if (q->shapes) {
            /* With shapes, every component must be [rows] + its shape,
             * rows being component 0's, and TensorFlow words a wrong 0th
             * dimension as any other wrong dimension (spec 18-19). */
            qf_shape want = qf_shape_prepend(rows, &q->shapes[i]);
            bool ok = q->padded ? qf_shape_compatible(got, &want) : qf_shape_equal(got, &want);
            if (!ok)
                return shape_mismatch(i, &want, got);
        }
    }
    *ret_rows = rows;
    return QF_OK;
}

qf_code qf__check_many_allowed(const qf_queue *q, int64_t n, bool up_to)
{
    if (n < 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s requested %lld < 0 elements",
                            up_to ? "DequeueUpToOp" : "DequeueManyOp", (long long)n);
    /* TensorFlow's PriorityQueue words it as DequeueMany, which serves
     * DequeueUpTo too (spec 105); the other kinds name both (spec 20). */
    if (!q->shapes && q->kind == QF_QUEUE_PRIORITY)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "PriorityQueue's DequeueMany requires the components to have "
                            "specified shapes.");
    if (!q->shapes)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "%s's DequeueMany and DequeueUpTo require the components to have "
                            "specified shapes.",
                            q->kind_name);
    /* A PriorityQueue takes a batch only when n elements are there at once
     * (spec 103), so n above the capacity could never complete while the
     * queue is open: refused rather than waited on forever. */
    if (!up_to && q->kind == QF_QUEUE_PRIORITY && n > q->capacity)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "PriorityQueue '%s' cannot dequeue_many %lld elements: it takes a "
                            "batch only when all are present at once, and its capacity is %lld",
                            q->name, (long long)n, (long long)q->capacity);
    return QF_OK;
}
