/* qf_batch_sparse.c - sparse components through batching (spec 171-172):
 * checking examples on the way in, splitting enqueue_many rows, stacking
 * the handles of a batch on the way out. See qf_batch_sparse-impl.h.
 *
 * The first-example record (sc->seen) is shared by every enqueue task of a
 * batch: a CAS from 0 fixes it once, and every later example compares
 * against it. Relaxed ordering is enough: the word is the whole fact, and
 * nothing else is published through it.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qf_batch_sparse-impl.h"

#define SHAPE_TXT 160

qf_code qf__sparse_comps_init(qf__sparse_comps *sc, size_t n, const qf_dtype *qdt, qf_shape *qsh)
{
    memset(sc, 0, sizeof(*sc));
    sc->n = n;
    size_t k = 0;
    for (size_t j = 0; j < n; j++)
        if (qdt[j] == QF_SPARSE)
            k++; /* any rank: a sparse scalar (dense shape []) stacks into a vector */
    if (k == 0)
        return QF_OK;
    sc->is_sparse = calloc(n, sizeof(*sc->is_sparse));
    sc->dense = calloc(n, sizeof(*sc->dense));
    sc->seen = calloc(n, sizeof(*sc->seen));
    if (!sc->is_sparse || !sc->dense || !sc->seen) {
        qf__sparse_comps_free(sc);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory building a batch");
    }
    for (size_t j = 0; j < n; j++) {
        atomic_init(&sc->seen[j], 0);
        if (qdt[j] != QF_SPARSE)
            continue;
        sc->is_sparse[j] = true;
        sc->dense[j] = qsh[j];
        qsh[j] = qf_shape_scalar(); /* one handle per example */
    }
    return QF_OK;
}

void qf__sparse_comps_free(qf__sparse_comps *sc)
{
    free(sc->is_sparse);
    free(sc->dense);
    free((void *)sc->seen);
    memset(sc, 0, sizeof(*sc));
}

bool *qf__sparse_flags_copy(const bool *flags, size_t n, bool *ret_oom)
{
    *ret_oom = false;
    if (!flags)
        return NULL;
    bool *c = malloc(n * sizeof(*c));
    if (!c)
        *ret_oom = true;
    else
        memcpy(c, flags, n * sizeof(*c));
    return c;
}

/* The sparse tensor in a QF_SPARSE scalar, or NULL (error recorded). */
static qf_sparse *sparse_of(const qf_tensor *t, size_t j, const char *qname)
{
    if (!t || qf_tensor_dtype(t) != QF_SPARSE || qf_tensor_shape(t)->rank != 0) {
        char sh[SHAPE_TXT];
        qf_set_error(QF_INVALID_ARGUMENT,
                     "component %zu of queue '%s' is sparse: each example needs a QF_SPARSE "
                     "scalar, got %s %s",
                     j, qname, t ? qf_dtype_name(qf_tensor_dtype(t)) : "nothing",
                     t ? qf_shape_format(qf_tensor_shape(t), sh, sizeof(sh)) : "");
        return NULL;
    }
    qf_sparse *sp = qf_tensor_sparse(t, 0);
    if (!sp)
        qf_set_error(QF_INVALID_ARGUMENT,
                     "component %zu of queue '%s' is sparse but the example holds no sparse "
                     "tensor",
                     j, qname);
    return sp;
}

qf_code qf__sparse_check(qf__sparse_comps *sc, size_t j, const qf_tensor *t, const char *qname)
{
    qf_sparse *sp = sparse_of(t, j, qname);
    if (!sp)
        return qf_last_code();
    const qf_shape *want = &sc->dense[j];
    int rank = qf_sparse_rank(sp);
    bool fits = want->rank == QF_UNKNOWN_RANK || want->rank == rank;
    for (int k = 0; fits && want->rank != QF_UNKNOWN_RANK && k < rank; k++)
        fits = want->dims[k] == QF_UNKNOWN_DIM || want->dims[k] == qf_sparse_dim(sp, k);
    if (!fits) {
        char a[SHAPE_TXT], b[SHAPE_TXT];
        qf_shape got = qf_sparse_shape(sp);
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "sparse component %zu of queue '%s': an example's dense shape %s "
                            "does not fit the declared %s",
                            j, qname,
                            qf_shape_is_valid(&got) ? qf_shape_format(&got, b, sizeof(b))
                                                    : "(rank too high)",
                            qf_shape_format(want, a, sizeof(a)));
    }
    /* Dtypes are below 2^16 and ranks of stackable tensors far below 2^15. */
    int key = (int)qf_sparse_dtype(sp) | (rank & 0x7fff) << 16;
    int first = 0;
    if (atomic_compare_exchange_strong_explicit(&sc->seen[j], &first, key, memory_order_relaxed,
                                                memory_order_relaxed) ||
        first == key)
        return QF_OK;
    return qf_set_error(QF_INVALID_ARGUMENT,
                        "sparse component %zu of queue '%s': an example holds %s values of "
                        "rank %d, the first example held %s values of rank %d (a batch must "
                        "stack)",
                        j, qname, qf_dtype_name(qf_sparse_dtype(sp)), rank,
                        qf_dtype_name((qf_dtype)(first & 0xffff)), first >> 16);
}

int64_t qf__rows_of(const qf_tensor *t)
{
    if (t && qf_tensor_dtype(t) == QF_SPARSE && qf_tensor_shape(t)->rank == 0) {
        qf_sparse *sp = qf_tensor_sparse(t, 0);
        if (!sp) {
            qf_set_error(QF_INVALID_ARGUMENT,
                         "an enqueue_many sparse value holds no sparse tensor");
            return -1;
        }
        if (qf_sparse_rank(sp) < 2) { /* TensorFlow's text (AddManySparseToTensorsMap) */
            qf_set_error(QF_INVALID_ARGUMENT,
                         "Rank of input SparseTensor should be > 1, but saw rank: %d",
                         qf_sparse_rank(sp));
            return -1;
        }
        return qf_sparse_dim(sp, 0);
    }
    if (!t || qf_tensor_shape(t)->rank < 1) {
        qf_set_error(QF_INVALID_ARGUMENT, "with enqueue_many every component needs rank >= 1");
        return -1;
    }
    return qf_tensor_shape(t)->dims[0];
}

qf_code qf__sparse_rows(qf_tensor *t, int64_t n, qf_tensor **ret_parts)
{
    if (!t || qf_tensor_dtype(t) != QF_SPARSE || qf_tensor_shape(t)->rank != 0) {
        /* A vector of handles (what dequeue_many of a queue of sparse
         * examples gives): rows like any tensor's. */
        if (!t || qf_tensor_dtype(t) != QF_SPARSE || qf_tensor_shape(t)->rank != 1 ||
            qf_tensor_shape(t)->dims[0] != n) {
            qf_tensor_unref(t);
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "a sparse component with enqueue_many needs a QF_SPARSE scalar "
                                "of rank >= 2 or a QF_SPARSE vector, with %" PRId64 " rows",
                                n);
        }
        return qf_tensor_unstack(t, ret_parts);
    }
    qf_sparse *sp = qf_tensor_sparse(t, 0);
    int64_t have = qf__rows_of(t); /* records why when it is -1 */
    qf_code rc = have < 0 ? qf_last_code() : QF_OK;
    if (rc == QF_OK && have != n)
        rc = qf_set_error(QF_INVALID_ARGUMENT,
                          "All input tensors must have the same size in the 0th dimension: a "
                          "sparse component has %" PRId64 ", expected %" PRId64,
                          have, n);
    qf_sparse **rows = rc == QF_OK ? malloc((n ? (size_t)n : 1) * sizeof(*rows)) : NULL;
    if (rc == QF_OK && !rows)
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory splitting a sparse batch");
    if (rc == QF_OK)
        rc = qf_sparse_unstack(sp, rows);
    if (rc == QF_OK) {
        int64_t made = 0;
        for (; made < n; made++)
            if (!(ret_parts[made] = qf_tensor_new_sparse(rows[made])))
                break;
        if (made < n) {
            rc = qf_last_code();
            for (int64_t i = 0; i < made; i++)
                qf_tensor_unref(ret_parts[i]);
            for (int64_t i = made + 1; i < n; i++)
                qf_sparse_unref(rows[i]);
        }
    }
    free(rows);
    qf_tensor_unref(t);
    return rc;
}

qf_code qf__sparse_restore(const bool *flags, size_t n, qf_element *batch)
{
    if (!flags)
        return QF_OK;
    qf_tensor *small[8];
    qf_tensor **made = n <= 8 ? small : calloc(n, sizeof(*made));
    if (!made)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory restoring a sparse batch");
    qf_code rc = QF_OK;
    size_t j = 0;
    for (; j < n && rc == QF_OK; j++) {
        made[j] = NULL;
        if (!flags[j])
            continue;
        const qf_tensor *h = qf_element_get(batch, j);
        qf_sparse *sp = NULL;
        rc = qf_sparse_stack((qf_sparse *const *)qf_tensor_cdata(h),
                             (size_t)qf_tensor_num_elements(h), &sp);
        if (rc == QF_OK && !(made[j] = qf_tensor_new_sparse(sp)))
            rc = qf_last_code();
    }
    for (size_t i = 0; i < j; i++) {
        if (rc == QF_OK && made[i])
            qf_element_set(batch, i, made[i]); /* releases the handles */
        else
            qf_tensor_unref(made[i]);
    }
    if (made != small)
        free(made);
    return rc;
}
