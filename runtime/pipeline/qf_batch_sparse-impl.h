/* qf_batch_sparse-impl.h - internal: sparse components in batching
 * (qf_batch_sparse.c), TensorFlow's _store_sparse_tensors and
 * _restore_sparse_tensors (spec 171-172).
 *
 * A component declared QF_SPARSE with per-example dense shape S becomes a
 * queue component of QF_SPARSE scalars (one handle per example, shape []):
 * the queue never sees S, so S may leave dimensions, or even the rank,
 * unknown whatever the queue kind. On the way in every example's sparse
 * tensor is checked against S, and against the value dtype and rank of the
 * first example that component saw, so a batch can always be stacked; on
 * the way out the batch's vector of handles is stacked into one sparse
 * tensor of rank + 1 (qf_sparse_stack()).
 */
#ifndef QF_BATCH_SPARSE_IMPL_H
#define QF_BATCH_SPARSE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "qf_batch.h"
#include "qf_sparse.h"

/* The sparse components of a batch queue, for its enqueue side. */
typedef struct qf__sparse_comps {
    size_t n;          /* queue components */
    bool *is_sparse;   /* n flags; NULL when no component is sparse */
    qf_shape *dense;   /* n declared dense shapes (unused for dense ones) */
    _Atomic int *seen; /* n: 0, or the first example's dtype | rank << 16 */
} qf__sparse_comps;

/* Fill `sc` for queue components of dtypes qdt and declared shapes qsh
 * (dense shapes for the sparse ones), and replace each sparse component's
 * shape in qsh by [] (its shape in the queue). Any dense shape goes, []
 * included (sparse scalars stack into a rank-1 sparse tensor [k]). Returns
 * QF_OK or an error (sc then holds nothing to free). */
qf_code qf__sparse_comps_init(qf__sparse_comps *sc, size_t n, const qf_dtype *qdt, qf_shape *qsh);
void qf__sparse_comps_free(qf__sparse_comps *sc);

/* A copy of the flags (NULL when there are none, or out of memory: then
 * *ret_oom is set). */
bool *qf__sparse_flags_copy(const bool *flags, size_t n, bool *ret_oom);

/* Is queue component j sparse? */
static inline bool qf__sparse_is(const qf__sparse_comps *sc, size_t j)
{
    return sc->is_sparse && sc->is_sparse[j];
}

/* One example's value `t` for sparse queue component j of queue `qname`:
 * a QF_SPARSE scalar holding a sparse tensor that fits the declared dense
 * shape and the component's dtype and rank so far. */
qf_code qf__sparse_check(qf__sparse_comps *sc, size_t j, const qf_tensor *t, const char *qname);

/* With enqueue_many: the number of rows in component value t (a QF_SPARSE
 * scalar: its first dense dimension, rank >= 2 needed; else dims[0];
 * -1 with an error recorded for a scalar that is neither). */
int64_t qf__rows_of(const qf_tensor *t);

/* With enqueue_many: the n rows of a sparse component's value t (consumed,
 * also on failure) as n QF_SPARSE scalars in ret_parts (a QF_SPARSE scalar
 * is unstacked with qf_sparse_unstack(), anything else with
 * qf_tensor_unstack()). ret_parts untouched on failure. */
qf_code qf__sparse_rows(qf_tensor *t, int64_t n, qf_tensor **ret_parts);

/* Dequeue side: replace every sparse component of `batch` (a QF_SPARSE
 * vector of handles) by a QF_SPARSE scalar holding their stack. flags NULL:
 * nothing to do. On failure the batch is left as it was. */
qf_code qf__sparse_restore(const bool *flags, size_t n, qf_element *batch);

#endif
