/* qf_sparse.h - sparse tensors (TensorFlow's SparseTensor) as values.
 *
 * A sparse tensor stands for a dense tensor of shape dense_shape in which
 * only nnz entries are stored, as TensorFlow's triple:
 *
 *     indices      QF_INT64 [nnz, rank]   coordinates of the stored entries
 *     values       dtype    [nnz]         the entries (any dtype but
 *                                         QF_SPARSE and owning QF_PTR)
 *     dense_shape  QF_INT64 [rank]        rank >= 0, every size >= 0
 *
 * Rank 0 is a sparse scalar: dense_shape [] and indices [nnz, 0], every
 * entry at index [] (one entry: the value is there; none: it is absent).
 * Stacking sparse scalars gives a rank-1 sparse tensor, as TensorFlow's
 * batching of a SparseTensor with dense_shape [] does.
 *
 * Every index lies inside dense_shape (checked when the sparse tensor is
 * made). Entries keep the order they were given in: nothing here sorts
 * them, and stacking and unstacking preserve it.
 *
 * A qf_sparse is immutable and reference counted, so it is shared, never
 * copied: a reference held by a tensor, a queue or a batch is all it costs
 * to pass one on.
 *
 * In tensors and queues. The dtype QF_SPARSE (qf_tensor.h) makes a tensor
 * whose elements are sparse tensors, one reference each, as a QF_STRING
 * tensor holds strings; a sparse component of an element is a QF_SPARSE
 * scalar. Queues move such tensors like any other, so a queue of sparse
 * examples holds handles (one pointer each) and dequeue_many returns a
 * QF_SPARSE vector of them. qf_sparse_stack() turns such a vector into one
 * sparse tensor with a batch dimension in front (TensorFlow's
 * take_many_sparse_from_tensors_map) and qf_sparse_unstack() splits one
 * along its first dimension (add_many_sparse_to_tensors_map). The batching
 * calls of qf_batch.h do both for components declared QF_SPARSE.
 *
 * Why handles and no SparseTensorsMap: TensorFlow's queues hold dense
 * tensors only, so it parks each SparseTensor in a map and queues an int64
 * key, and the map must be shared by every enqueue and dequeue op of a
 * queue. Here the handle is the reference itself: ownership moves with the
 * element, a closed or freed queue releases what it holds, and nothing can
 * be left behind in a map.
 *
 * Synchronization table
 *   constructors, stack, unstack     any thread (allocate)
 *   accessors, equal                 any threads concurrently (immutable)
 *   qf_sparse_ref / unref            any thread, lock-free (one atomic RMW)
 *   qf_tensor_set_sparse             only the tensor's sole owner
 */
#ifndef QF_SPARSE_H
#define QF_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_status.h"
#include "qf_tensor.h"

QF_BEGIN_DECLS

/**
 * qf_sparse_new() - a sparse tensor from its three parts.
 *
 * Ownership:   takes one reference of each tensor (also on failure). The
 *              tensors are shared from then on: nobody may modify them.
 *              The caller owns *ret (qf_sparse_unref()).
 * Blocking:    never (allocates; checks every index, O(nnz * rank)).
 * Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL part, indices that
 *              are not an int64 matrix, values that are not a vector of nnz
 *              entries (or are QF_SPARSE, or a QF_PTR tensor that owns its
 *              objects), a dense_shape that is not an int64 vector of
 *              sizes >= 0, or an index outside dense_shape ("indices[2]
 *              = [1,5] is out of bounds: need 0 <= index < [2,4]");
 *              QF_RESOURCE_EXHAUSTED. *ret untouched on failure.
 */
QF_API qf_code qf_sparse_new(qf_tensor *indices, qf_tensor *values, qf_tensor *dense_shape,
                             qf_sparse **ret);

/**
 * qf_sparse_new_from() - the same from plain arrays, copied: `indices`
 * holds nnz * rank int64 coordinates (row-major), `values` nnz entries of a
 * numeric or bool dtype, `dense_shape` rank sizes. For string values make
 * the values tensor and use qf_sparse_new().
 *
 * Returns:     as qf_sparse_new(); QF_INVALID_ARGUMENT also for a string,
 *              QF_PTR or QF_SPARSE dtype, nnz < 0, rank < 0, or NULL arrays
 *              where data is needed (with rank 0, indices and dense_shape
 *              hold nothing and may be NULL).
 */
QF_API qf_code qf_sparse_new_from(qf_dtype dt, int64_t nnz, int rank, const int64_t *indices,
                                  const void *values, const int64_t *dense_shape, qf_sparse **ret);

/** qf_sparse_ref() - add a reference; returns sp. NULL-safe. Lock-free. */
QF_API qf_sparse *qf_sparse_ref(qf_sparse *sp);
/** qf_sparse_unref() - drop a reference; the last one releases the three
 *  tensors. NULL-safe. Lock-free. */
QF_API void qf_sparse_unref(qf_sparse *sp);

/* Accessors: borrowed, valid while a reference to `sp` is held; the
 * tensors must not be modified (qf_tensor_ref() one to keep it longer).
 * For a NULL sp they return NULL, QF_DT_INVALID, -1 (rank, dim), 0
 * (nnz) or an invalid shape and record QF_INVALID_ARGUMENT. Wait-free, any thread. */
QF_API qf_tensor *qf_sparse_indices(const qf_sparse *sp);
QF_API qf_tensor *qf_sparse_values(const qf_sparse *sp);
QF_API qf_tensor *qf_sparse_dense_shape(const qf_sparse *sp);
/** The dtype of the values. */
QF_API qf_dtype qf_sparse_dtype(const qf_sparse *sp);
/** The rank of the dense tensor (length of dense_shape). */
QF_API int qf_sparse_rank(const qf_sparse *sp);
/** The number of stored entries. */
QF_API int64_t qf_sparse_nnz(const qf_sparse *sp);
/** dense_shape[d]; -1 when d is out of range. */
QF_API int64_t qf_sparse_dim(const qf_sparse *sp, int d);
/** The value dtype and dense shape as a qf_shape (rank above QF_MAX_RANK:
 *  an invalid shape). */
QF_API qf_shape qf_sparse_shape(const qf_sparse *sp);

/** qf_sparse_equal() - same dtype, dense shape, indices and values, in the
 *  same order (values compared as qf_tensor_equal() does). */
QF_API bool qf_sparse_equal(const qf_sparse *a, const qf_sparse *b);

/**
 * qf_sparse_stack() - n sparse tensors of one rank and value dtype as one
 * sparse tensor of rank + 1 (TensorFlow's take_many_sparse_from_tensors_map,
 * what batching a sparse component gives, spec 171-172): entry j of part i
 * becomes the entry with index [i] + its index; the values are the parts'
 * values one part after the other; dense_shape is [n] followed by the
 * largest size of every dimension among the parts.
 *
 * Ownership:   the parts are borrowed. The caller owns *ret.
 * Blocking:    never (allocates). Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for n == 0, a NULL part,
 *              "Inconsistent rank across SparseTensors: rank prior to
 *              SparseTensor[i] was: R but rank of SparseTensor[i] is: S",
 *              or differing value dtypes; QF_RESOURCE_EXHAUSTED. *ret
 *              untouched on failure.
 */
QF_API qf_code qf_sparse_stack(qf_sparse *const *parts, size_t n, qf_sparse **ret);

/**
 * qf_sparse_unstack() - split a sparse tensor of rank >= 2 along its first
 * dimension into dense_shape[0] sparse tensors of rank - 1 (what
 * enqueue_many does to a sparse component, TensorFlow's
 * add_many_sparse_to_tensors_map): part r holds the entries whose first
 * index is r, in their order, without that index; every part's dense_shape
 * is dense_shape[1..], also for parts without entries.
 *
 * Ownership:   `sp` is borrowed. ret_parts must have room for
 *              qf_sparse_dim(sp, 0) pointers; each written part is the
 *              caller's (one reference).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments or "Rank of
 *              input SparseTensor should be > 1, but saw rank: 1";
 *              QF_RESOURCE_EXHAUSTED. ret_parts untouched on failure.
 */
QF_API qf_code qf_sparse_unstack(const qf_sparse *sp, qf_sparse **ret_parts);

/* ------------------------------------------------- QF_SPARSE tensors */

/**
 * qf_tensor_new_sparse() - a QF_SPARSE scalar holding `sp`.
 *
 * Ownership:   takes the caller's reference to sp (also on failure).
 * Returns:     the tensor (refcount 1), or NULL with qf_last_code()
 *              QF_INVALID_ARGUMENT (sp NULL) or QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_tensor *qf_tensor_new_sparse(qf_sparse *sp);

/** qf_tensor_sparse() - element i of a QF_SPARSE tensor, borrowed (valid
 *  while the tensor holds it; NULL for an element never set). NULL and
 *  QF_INVALID_ARGUMENT for another dtype or i out of range. */
QF_API qf_sparse *qf_tensor_sparse(const qf_tensor *t, int64_t i);

/** qf_tensor_set_sparse() - store `sp` as element i, taking the caller's
 *  reference (also on failure); the sparse tensor there before is released.
 *  Returns QF_OK, QF_INVALID_ARGUMENT (dtype, index) or
 *  QF_FAILED_PRECONDITION when the tensor is shared. */
QF_API qf_code qf_tensor_set_sparse(qf_tensor *t, int64_t i, qf_sparse *sp);

QF_END_DECLS

#endif
