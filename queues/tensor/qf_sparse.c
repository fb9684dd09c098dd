/* qf_sparse.c - sparse tensors: construction with bounds checks, stacking
 * along a new first dimension and unstacking along the existing one, and
 * the QF_SPARSE tensor accessors.
 *
 * A qf_sparse is a header holding one reference to each of its three
 * tensors. Nothing in it changes after qf_sparse_new() returns, so readers
 * need no synchronisation beyond the hand-off that gave them the pointer
 * (a queue's release/acquire, a thread start); the reference count is the
 * only shared mutable word, and it follows qf_tensor_unref()'s pattern.
 *
 * Stack and unstack build new tensors and copy the values (numbers by
 * bytes, strings with qf_tensor_set_string(), pointers of non-owning
 * QF_PTR tensors as they are). Sparse batches are small next to what they
 * stand for; simplicity wins over avoiding that copy. Their results are
 * made without re-checking indices: every index they write is an input's
 * index (checked when the input was made) or a batch position below n.
 */
#include "qf_sparse.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_tsan-impl.h"
#include "qf_status-impl.h"

struct qf_sparse {
    _Atomic uint32_t refs;
    int rank;
    int64_t nnz;
    qf_tensor *indices; /* int64 [nnz, rank] */
    qf_tensor *values;  /* dtype [nnz] */
    qf_tensor *shape;   /* int64 [rank] */
};

/* Longest text of an index or a dense shape in a message. */
#define TEXT 160

static qf_code oom(const char *what)
{
    return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory %s", what);
}

/* "[a,b,c]" (truncated with "...]" past the buffer). */
static const char *fmt_dims(const int64_t *d, int n, char *buf, size_t cap)
{
    size_t pos = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && pos < cap; i++)
        pos += (size_t)snprintf(buf + pos, cap - pos, "%s%" PRId64, i ? "," : "", d[i]);
    if (pos + 1 < cap)
        snprintf(buf + pos, cap - pos, "]");
    else if (cap > 5)
        memcpy(buf + cap - 5, "...]", 5);
    return buf;
}

static const int64_t *i64s(const qf_tensor *t)
{
    return qf_tensor_cdata(t);
}

/* A header around three tensors whose checks are done; takes them. NULL
 * (with RESOURCE_EXHAUSTED recorded, the tensors released) on failure. */
static qf_sparse *wrap(qf_tensor *indices, qf_tensor *values, qf_tensor *shape, int rank,
                       int64_t nnz)
{
    qf_sparse *sp = malloc(sizeof(*sp));
    if (!sp) {
        qf_tensor_unref(indices);
        qf_tensor_unref(values);
        qf_tensor_unref(shape);
        oom("making a sparse tensor");
        return NULL;
    }
    atomic_init(&sp->refs, 1);
    sp->rank = rank;
    sp->nnz = nnz;
    sp->indices = indices;
    sp->values = values;
    sp->shape = shape;
    return sp;
}

/* The structural checks of qf_sparse_new() (everything but the bounds). */
static qf_code check_parts(const qf_tensor *indices, const qf_tensor *values,
                           const qf_tensor *shape, int *ret_rank, int64_t *ret_nnz)
{
    char a[TEXT];
    if (!indices || !values || !shape)
        return qf_set_error(QF_INVALID_ARGUMENT, "SparseTensor %s is NULL",
                            !indices  ? "indices"
                            : !values ? "values"
                                      : "dense_shape");
    const qf_shape *is = qf_tensor_shape(indices), *vs = qf_tensor_shape(values),
                   *ss = qf_tensor_shape(shape);
    if (qf_tensor_dtype(shape) != QF_INT64 || ss->rank != 1)
        return qf_set_error(
            QF_INVALID_ARGUMENT, "SparseTensor dense_shape must be an int64 vector, got %s %s",
            qf_dtype_name(qf_tensor_dtype(shape)), qf_shape_format(ss, a, sizeof(a)));
    /* dense_shape [] is a scalar: present (one entry at index []) or absent. */
    int64_t rank = ss->dims[0];
    if (rank > INT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "SparseTensor dense_shape has too many entries: %" PRId64, rank);
    if (qf_tensor_dtype(indices) != QF_INT64 || is->rank != 2)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "SparseTensor indices must be an int64 matrix [nnz, rank], got %s %s",
                            qf_dtype_name(qf_tensor_dtype(indices)),
                            qf_shape_format(is, a, sizeof(a)));
    if (is->dims[1] != rank)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "SparseTensor indices have %" PRId64 " columns but dense_shape has "
                            "rank %" PRId64,
                            is->dims[1], rank);
    qf_dtype vt = qf_tensor_dtype(values);
    if (vs->rank != 1 || vs->dims[0] != is->dims[0])
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "SparseTensor values must be a vector of %" PRId64
                            " entries (one per index), got %s",
                            is->dims[0], qf_shape_format(vs, a, sizeof(a)));
    if (vt == QF_SPARSE || (vt == QF_PTR && qf_tensor_ptr_dtor(values)))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "SparseTensor values cannot be %s (they could not be shared)",
                            vt == QF_SPARSE ? "sparse tensors" : "pointers the tensor owns");
    const int64_t *d = i64s(shape);
    for (int64_t k = 0; k < rank; k++)
        if (d[k] < 0)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "SparseTensor dense_shape %s has a negative size",
                                fmt_dims(d, (int)rank, a, sizeof(a)));
    *ret_rank = (int)rank;
    *ret_nnz = is->dims[0];
    return QF_OK;
}

static qf_code check_bounds(const qf_tensor *indices, const qf_tensor *shape, int rank, int64_t nnz)
{
    const int64_t *idx = i64s(indices), *d = i64s(shape);
    for (int64_t e = 0; e < nnz; e++) {
        const int64_t *row = idx + e * rank;
        for (int k = 0; k < rank; k++)
            if (row[k] < 0 || row[k] >= d[k]) {
                char a[TEXT], b[TEXT];
                return qf_set_error(
                    QF_INVALID_ARGUMENT,
                    "SparseTensor indices[%" PRId64 "] = %s is out of bounds: need 0 <= index < %s",
                    e, fmt_dims(row, rank, a, sizeof(a)), fmt_dims(d, rank, b, sizeof(b)));
            }
    }
    return QF_OK;
}

qf_code qf_sparse_new(qf_tensor *indices, qf_tensor *values, qf_tensor *dense_shape,
                      qf_sparse **ret)
{
    int rank = 0;
    int64_t nnz = 0;
    qf_code rc = ret ? QF_OK : qf_set_error(QF_INVALID_ARGUMENT, "NULL ret");
    if (rc == QF_OK)
        rc = check_parts(indices, values, dense_shape, &rank, &nnz);
    if (rc == QF_OK)
        rc = check_bounds(indices, dense_shape, rank, nnz);
    if (rc != QF_OK) {
        qf_tensor_unref(indices);
        qf_tensor_unref(values);
        qf_tensor_unref(dense_shape);
        return rc;
    }
    qf_sparse *sp = wrap(indices, values, dense_shape, rank, nnz);
    if (!sp)
        return qf_last_code();
    *ret = sp;
    return QF_OK;
}

qf_code qf_sparse_new_from(qf_dtype dt, int64_t nnz, int rank, const int64_t *indices,
                           const void *values, const int64_t *dense_shape, qf_sparse **ret)
{
    if (!ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret");
    if (nnz < 0 || rank < 0 || rank >= INT32_MAX)
        return qf_set_error(
            QF_INVALID_ARGUMENT,
            "qf_sparse_new_from needs nnz >= 0 and rank >= 0, got %" PRId64 " and %d", nnz, rank);
    /* A scalar's coordinates and dense shape are empty: no array needed. */
    if ((rank > 0 && !dense_shape) || (nnz > 0 && ((rank > 0 && !indices) || !values)))
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_sparse_new_from: NULL %s",
                            rank > 0 && !dense_shape ? "dense_shape"
                            : rank > 0 && !indices   ? "indices"
                                                     : "values");
    size_t es = qf_dtype_size(dt);
    int64_t cells;
    if (__builtin_mul_overflow(nnz, (int64_t)rank, &cells) || (uint64_t)cells > SIZE_MAX / 8 ||
        (es && (uint64_t)nnz > SIZE_MAX / es))
        return qf_set_error(QF_RESOURCE_EXHAUSTED,
                            "qf_sparse_new_from: %" PRId64 " entries of rank %d are too many", nnz,
                            rank);
    qf_shape is = qf_shape_make(2, (const int64_t[]){nnz, rank});
    qf_shape vs = qf_shape_make(1, (const int64_t[]){nnz});
    qf_shape ss = qf_shape_make(1, (const int64_t[]){rank});
    /* new_from refuses strings, pointers and sparse values itself. */
    qf_tensor *ti = qf_tensor_new_from(QF_INT64, &is, indices, (size_t)cells * sizeof(int64_t));
    qf_tensor *tv = ti ? qf_tensor_new_from(dt, &vs, values, (size_t)nnz * es) : NULL;
    qf_tensor *ts =
        tv ? qf_tensor_new_from(QF_INT64, &ss, dense_shape, (size_t)rank * sizeof(int64_t)) : NULL;
    if (!ts) {
        qf_code rc = qf_last_code();
        qf_tensor_unref(ti);
        qf_tensor_unref(tv);
        return rc;
    }
    return qf_sparse_new(ti, tv, ts, ret);
}

qf_sparse *qf_sparse_ref(qf_sparse *sp)
{
    if (sp)
        atomic_fetch_add_explicit(&sp->refs, 1, memory_order_relaxed);
    return sp;
}

void qf_sparse_unref(qf_sparse *sp)
{
    if (!sp || atomic_fetch_sub_explicit(&sp->refs, 1, memory_order_release) != 1)
        return;
#ifdef QF_TSAN
    /* As in qf_tensor_unref(): TSan understands the load, not the fence. */
    (void)atomic_load_explicit(&sp->refs, memory_order_acquire);
#else
    atomic_thread_fence(memory_order_acquire);
#endif
    qf_tensor_unref(sp->indices);
    qf_tensor_unref(sp->values);
    qf_tensor_unref(sp->shape);
    free(sp);
}

/* The accessors' answer to a NULL sparse tensor: a neutral value, the
 * error recorded (static message: no formatting). */
static bool null_sparse(const qf_sparse *sp, const char *msg)
{
    if (sp)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

qf_tensor *qf_sparse_indices(const qf_sparse *sp)
{
    return null_sparse(sp, "qf_sparse_indices: sparse tensor (sp) is NULL") ? NULL : sp->indices;
}

qf_tensor *qf_sparse_values(const qf_sparse *sp)
{
    return null_sparse(sp, "qf_sparse_values: sparse tensor (sp) is NULL") ? NULL : sp->values;
}

qf_tensor *qf_sparse_dense_shape(const qf_sparse *sp)
{
    return null_sparse(sp, "qf_sparse_dense_shape: sparse tensor (sp) is NULL") ? NULL : sp->shape;
}

qf_dtype qf_sparse_dtype(const qf_sparse *sp)
{
    return null_sparse(sp, "qf_sparse_dtype: sparse tensor (sp) is NULL")
               ? QF_DT_INVALID
               : qf_tensor_dtype(sp->values);
}

int qf_sparse_rank(const qf_sparse *sp)
{
    return null_sparse(sp, "qf_sparse_rank: sparse tensor (sp) is NULL") ? -1 : sp->rank;
}

int64_t qf_sparse_nnz(const qf_sparse *sp)
{
    return null_sparse(sp, "qf_sparse_nnz: sparse tensor (sp) is NULL") ? 0 : sp->nnz;
}

int64_t qf_sparse_dim(const qf_sparse *sp, int d)
{
    if (null_sparse(sp, "qf_sparse_dim: sparse tensor (sp) is NULL"))
        return -1;
    return d >= 0 && d < sp->rank ? i64s(sp->shape)[d] : -1;
}

qf_shape qf_sparse_shape(const qf_sparse *sp)
{
    if (null_sparse(sp, "qf_sparse_shape: sparse tensor (sp) is NULL") || sp->rank > QF_MAX_RANK)
        return qf_shape_make(-1, NULL); /* invalid */
    return qf_shape_make(sp->rank, i64s(sp->shape));
}

bool qf_sparse_equal(const qf_sparse *a, const qf_sparse *b)
{
    if (a == b)
        return true;
    return a && b && qf_tensor_equal(a->shape, b->shape) &&
           qf_tensor_equal(a->indices, b->indices) && qf_tensor_equal(a->values, b->values);
}

/* ------------------------------------------------------ stack / unstack */

/* Entry si of src's values into slot di of dst (same dtype; dst is new,
 * solely owned, and slot di is empty). */
static qf_code copy_value(qf_tensor *dst, int64_t di, const qf_tensor *src, int64_t si)
{
    qf_dtype dt = qf_tensor_dtype(src);
    if (dt == QF_STRING) {
        size_t len;
        const char *s = qf_tensor_string(src, si, &len);
        return len ? qf_tensor_set_string(dst, di, s, len) : QF_OK;
    }
    size_t es = qf_dtype_size(dt);
    memcpy((char *)qf_tensor_data(dst) + (size_t)di * es,
           (const char *)qf_tensor_cdata(src) + (size_t)si * es, es);
    return QF_OK;
}

/* New int64 tensors of shape [a, b] and [a]; NULL on failure (recorded). */
static qf_tensor *new_i64_matrix(int64_t rows, int64_t cols)
{
    qf_shape s = qf_shape_make(2, (const int64_t[]){rows, cols});
    return qf_tensor_new(QF_INT64, &s);
}

static qf_tensor *new_vector(qf_dtype dt, int64_t n)
{
    qf_shape s = qf_shape_make(1, (const int64_t[]){n});
    return qf_tensor_new(dt, &s);
}

qf_code qf_sparse_stack(qf_sparse *const *parts, size_t n, qf_sparse **ret)
{
    if (!parts || !ret || n == 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_sparse_stack needs %s",
                            !ret ? "ret" : "at least one sparse tensor");
    if (n > (uint64_t)INT64_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "too many sparse tensors to stack: %zu", n);
    for (size_t i = 0; i < n; i++)
        if (!parts[i])
            return qf_set_error(QF_INVALID_ARGUMENT, "SparseTensor[%zu] to stack is NULL", i);
    int rank = parts[0]->rank;
    qf_dtype dt = qf_sparse_dtype(parts[0]);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (parts[i]->rank != rank)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Inconsistent rank across SparseTensors: rank prior to "
                                "SparseTensor[%zu] was: %d but rank of SparseTensor[%zu] is: %d",
                                i, rank, i, parts[i]->rank);
        if (qf_sparse_dtype(parts[i]) != dt)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Inconsistent dtype across SparseTensors: SparseTensor[0] holds "
                                "%s but SparseTensor[%zu] holds %s",
                                qf_dtype_name(dt), i, qf_dtype_name(qf_sparse_dtype(parts[i])));
        if (__builtin_add_overflow(total, parts[i]->nnz, &total))
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "too many entries to stack");
    }
    int r1 = rank + 1;
    qf_tensor *ti = new_i64_matrix(total, r1);
    qf_tensor *tv = ti ? new_vector(dt, total) : NULL;
    qf_tensor *ts = tv ? new_vector(QF_INT64, r1) : NULL;
    qf_code rc = ts ? QF_OK : qf_last_code();
    if (rc == QF_OK) {
        int64_t *oi = qf_tensor_data(ti), *os = qf_tensor_data(ts);
        os[0] = (int64_t)n;
        for (int k = 0; k < rank; k++)
            os[k + 1] = 0;
        int64_t at = 0;
        for (size_t i = 0; i < n && rc == QF_OK; i++) {
            const qf_sparse *p = parts[i];
            const int64_t *pi = i64s(p->indices), *ps = i64s(p->shape);
            for (int k = 0; k < rank; k++)
                if (ps[k] > os[k + 1])
                    os[k + 1] = ps[k]; /* the largest size of each dimension */
            for (int64_t e = 0; e < p->nnz && rc == QF_OK; e++, at++) {
                int64_t *row = oi + at * r1;
                row[0] = (int64_t)i;
                if (rank > 0) /* a scalar part's indices hold no data at all */
                    memcpy(row + 1, pi + e * rank, (size_t)rank * sizeof(int64_t));
                rc = copy_value(tv, at, p->values, e);
            }
        }
    }
    if (rc != QF_OK) {
        qf_tensor_unref(ti);
        qf_tensor_unref(tv);
        qf_tensor_unref(ts);
        return rc;
    }
    qf_sparse *sp = wrap(ti, tv, ts, r1, total);
    if (!sp)
        return qf_last_code();
    *ret = sp;
    return QF_OK;
}

qf_code qf_sparse_unstack(const qf_sparse *sp, qf_sparse **ret_parts)
{
    if (!sp || !ret_parts)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", sp ? "ret_parts" : "sparse tensor");
    if (sp->rank < 2)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Rank of input SparseTensor should be > 1, but saw rank: %d", sp->rank);
    int64_t rows = i64s(sp->shape)[0];
    int rank = sp->rank, r1 = rank - 1;
    if ((uint64_t)rows > SIZE_MAX / (sizeof(int64_t) + sizeof(qf_sparse *)))
        return oom("unstacking a sparse tensor");
    size_t nr = (size_t)rows;
    int64_t *count = calloc(nr ? nr : 1, sizeof(*count));
    qf_sparse **made = calloc(nr ? nr : 1, sizeof(*made));
    /* Every part shares one dense_shape tensor, and parts without entries
     * share one pair of empty indices and values. */
    qf_shape ss = qf_shape_make(1, (const int64_t[]){r1});
    qf_tensor *shape =
        qf_tensor_new_from(QF_INT64, &ss, i64s(sp->shape) + 1, (size_t)r1 * sizeof(int64_t));
    qf_tensor *no_idx = NULL, *no_val = NULL;
    qf_code rc = count && made && shape ? QF_OK : oom("unstacking a sparse tensor");
    const int64_t *idx = i64s(sp->indices);
    for (int64_t e = 0; rc == QF_OK && e < sp->nnz; e++)
        count[idx[e * rank]]++; /* in [0, rows): checked when sp was made */
    size_t r = 0;
    for (; rc == QF_OK && r < nr; r++) {
        qf_tensor *ti, *tv;
        if (count[r] == 0) {
            if (!no_idx && !(no_idx = new_i64_matrix(0, r1)))
                break;
            if (!no_val && !(no_val = new_vector(qf_sparse_dtype(sp), 0)))
                break;
            ti = qf_tensor_ref(no_idx);
            tv = qf_tensor_ref(no_val);
        } else {
            ti = new_i64_matrix(count[r], r1);
            tv = ti ? new_vector(qf_sparse_dtype(sp), count[r]) : NULL;
            if (!tv) {
                qf_tensor_unref(ti);
                break;
            }
        }
        if (!(made[r] = wrap(ti, tv, qf_tensor_ref(shape), r1, count[r])))
            break;
        made[r]->nnz = 0; /* counts up again as the entries go in below */
    }
    if (rc == QF_OK && r < nr)
        rc = qf_last_code();
    /* Fill: the parts are ours alone until returned. */
    for (int64_t e = 0; rc == QF_OK && e < sp->nnz; e++) {
        qf_sparse *p = made[idx[e * rank]];
        int64_t at = p->nnz++;
        memcpy((int64_t *)qf_tensor_data(p->indices) + at * r1, idx + e * rank + 1,
               (size_t)r1 * sizeof(int64_t));
        rc = copy_value(p->values, at, sp->values, e);
    }
    if (rc == QF_OK)
        memcpy(ret_parts, made, nr * sizeof(*made));
    else
        for (size_t i = 0; made && i < nr; i++)
            qf_sparse_unref(made[i]);
    qf_tensor_unref(shape);
    qf_tensor_unref(no_idx);
    qf_tensor_unref(no_val);
    free(count);
    free(made);
    return rc;
}

/* ------------------------------------------------- QF_SPARSE tensors */

static qf_code check_elem(const qf_tensor *t, int64_t i)
{
    if (!t)
        return qf_set_error(QF_INVALID_ARGUMENT, "Tensor is NULL");
    if (qf_tensor_dtype(t) != QF_SPARSE)
        return qf_set_error(QF_INVALID_ARGUMENT, "Expected a sparse tensor, got %s",
                            qf_dtype_name(qf_tensor_dtype(t)));
    if (i < 0 || i >= qf_tensor_num_elements(t))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Element index %" PRId64 " out of range for a tensor of %" PRId64
                            " elements",
                            i, qf_tensor_num_elements(t));
    return QF_OK;
}

qf_tensor *qf_tensor_new_sparse(qf_sparse *sp)
{
    if (!sp) {
        qf_set_error(QF_INVALID_ARGUMENT, "Sparse tensor is NULL");
        return NULL;
    }
    qf_shape s = qf_shape_scalar();
    qf_tensor *t = qf_tensor_new(QF_SPARSE, &s);
    if (!t) {
        qf_sparse_unref(sp);
        return NULL;
    }
    *(qf_sparse **)qf_tensor_data(t) = sp;
    return t;
}

qf_sparse *qf_tensor_sparse(const qf_tensor *t, int64_t i)
{
    if (check_elem(t, i) != QF_OK)
        return NULL;
    return ((qf_sparse *const *)qf_tensor_cdata(t))[i];
}

qf_code qf_tensor_set_sparse(qf_tensor *t, int64_t i, qf_sparse *sp)
{
    qf_code rc = check_elem(t, i);
    if (rc == QF_OK && qf_tensor_refcount(t) != 1)
        rc = qf_set_error(QF_FAILED_PRECONDITION, "Cannot modify a shared tensor (refcount %u)",
                          qf_tensor_refcount(t));
    if (rc != QF_OK) {
        qf_sparse_unref(sp);
        return rc;
    }
    qf_sparse **slot = (qf_sparse **)qf_tensor_data(t) + i;
    qf_sparse *old = *slot;
    *slot = sp;
    qf_sparse_unref(old); /* also when old == sp: the caller's reference replaces it */
    return QF_OK;
}
