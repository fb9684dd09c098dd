/* fuzz_tensor.c - libFuzzer target: the tensor and sparse-tensor calls that
 * batching is built from, on shapes, dtypes and contents decoded from the
 * input.
 *
 * Dense: n parts of one dtype (numbers, bool, strings) and a small shape,
 * one of them perhaps of another shape; qf_tensor_stack() must refuse the
 * odd one out (QF_INVALID_ARGUMENT) and otherwise give [n] + shape, whose
 * slices and unstacked parts equal the parts, and whose copy equals it;
 * qf_tensor_stack_padded() with some dimensions left unknown must give
 * each of them the largest size among the parts, every part's values at
 * its own place and zeros ("" for strings) around them. Shapes from raw
 * input bytes: a shape qf_shape_make() calls invalid, or one whose size
 * overflows, makes no tensor (NULL, QF_INVALID_ARGUMENT or
 * QF_RESOURCE_EXHAUSTED), never a crash.
 * Sparse: indices (some perhaps outside dense_shape), values and
 * dense_shape; qf_sparse_new_from() must refuse exactly the indices out of
 * bounds; a sparse tensor of rank 2 or more, unstacked and stacked again,
 * must equal itself with its entries grouped by first index (stably). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "qflow.h"
#include "qf_sparse.h"

#define MAX_PARTS 5
#define MAX_DIM 4
#define MAX_NNZ 12

static const qf_dtype dtypes[] = {QF_FLOAT32, QF_FLOAT64, QF_INT32,  QF_UINT8,     QF_INT16,
                                  QF_INT8,    QF_STRING,  QF_INT64,  QF_BOOL,      QF_UINT16,
                                  QF_FLOAT16, QF_UINT32,  QF_UINT64, QF_COMPLEX64, QF_COMPLEX128};

/* A tensor of dtype dt and shape s filled from the input (bools 0 or 1). */
static qf_tensor *filled(qf_dtype dt, const qf_shape *s, fuzz_input *in)
{
    qf_tensor *t = qf_tensor_new(dt, s);
    check(t);
    int64_t n = qf_shape_num_elements(s);
    if (dt == QF_STRING) {
        for (int64_t i = 0; i < n; i++) {
            char buf[8];
            size_t len = fuzz_next(in) % 8;
            for (size_t k = 0; k < len; k++)
                buf[k] = (char)fuzz_next(in);
            check(qf_tensor_set_string(t, i, buf, len) == QF_OK);
        }
        return t;
    }
    unsigned char *d = qf_tensor_data(t);
    size_t bytes = (size_t)n * qf_dtype_size(dt);
    for (size_t i = 0; i < bytes; i++)
        d[i] = (unsigned char)(dt == QF_BOOL ? fuzz_next(in) & 1 : fuzz_next(in));
    return t;
}

/* Element i of t and element j of u hold the same value (raw bytes, or the
 * string's bytes). */
static bool same_value(const qf_tensor *t, int64_t i, const qf_tensor *u, int64_t j)
{
    qf_dtype dt = qf_tensor_dtype(t);
    if (dt == QF_STRING) {
        size_t a = 0, b = 0;
        const char *x = qf_tensor_string(t, i, &a), *y = qf_tensor_string(u, j, &b);
        return a == b && (a == 0 || memcmp(x, y, a) == 0);
    }
    size_t w = qf_dtype_size(dt);
    return memcmp((const char *)qf_tensor_cdata(t) + (size_t)i * w,
                  (const char *)qf_tensor_cdata(u) + (size_t)j * w, w) == 0;
}

static bool is_zero(const qf_tensor *t, int64_t i)
{
    if (qf_tensor_dtype(t) == QF_STRING) {
        size_t a = 1;
        qf_tensor_string(t, i, &a);
        return a == 0;
    }
    size_t w = qf_dtype_size(qf_tensor_dtype(t));
    const unsigned char *p = (const unsigned char *)qf_tensor_cdata(t) + (size_t)i * w;
    for (size_t k = 0; k < w; k++)
        if (p[k])
            return false;
    return true;
}

/* Row-major offset of index idx[0..rank) in dims. */
static int64_t offset(const int64_t *idx, const int64_t *dims, int rank)
{
    int64_t o = 0;
    for (int d = 0; d < rank; d++)
        o = o * dims[d] + idx[d];
    return o;
}

static void fuzz_stack(fuzz_input *in)
{
    qf_dtype dt = dtypes[fuzz_next(in) % (sizeof(dtypes) / sizeof(dtypes[0]))];
    int rank = (int)(fuzz_next(in) % 4);
    int64_t dims[QF_MAX_RANK] = {0};
    for (int d = 0; d < rank; d++)
        dims[d] = fuzz_next(in) % MAX_DIM;
    qf_shape s = qf_shape_make(rank, dims);
    size_t n = fuzz_next(in) % (MAX_PARTS + 1);
    unsigned odd = fuzz_next(in); /* part odd % 8 (if any) gets another shape */
    /* Each part's own dims for the padded stack: the unknown ones vary. */
    unsigned unknown = fuzz_next(in) & ((1u << rank) - 1);
    qf_tensor *parts[MAX_PARTS], *var[MAX_PARTS];
    int64_t vdims[MAX_PARTS][QF_MAX_RANK];
    bool mismatched = false;
    for (size_t i = 0; i < n; i++) {
        qf_shape ps = s;
        if (i == odd % 8 && rank > 0) {
            ps.dims[0] = (dims[0] + 1) % MAX_DIM;
            mismatched = true;
        }
        parts[i] = filled(dt, &ps, in);
        qf_shape vs = s;
        for (int d = 0; d < rank; d++)
            if (unknown & (1u << d))
                vs.dims[d] = fuzz_next(in) % MAX_DIM;
        memcpy(vdims[i], vs.dims, sizeof(vdims[i]));
        var[i] = filled(dt, &vs, in);
    }

    /* The stacks consume a reference of each part: keep ours. */
    for (size_t i = 0; i < n; i++) {
        qf_tensor_ref(parts[i]);
        qf_tensor_ref(var[i]);
    }
    qf_tensor *batch = NULL;
    qf_code rc = qf_tensor_stack(parts, n, dt, &s, &batch);
    if (mismatched) {
        check(rc == QF_INVALID_ARGUMENT && batch == NULL);
    } else {
        check(rc == QF_OK && batch);
        const qf_shape *bs = qf_tensor_shape(batch);
        check(bs->rank == rank + 1 && bs->dims[0] == (int64_t)n);
        for (int d = 0; d < rank; d++)
            check(bs->dims[d + 1] == dims[d]);
        for (size_t i = 0; i < n; i++) {
            qf_tensor *row = qf_tensor_slice(batch, (int64_t)i);
            check(row && qf_tensor_equal(row, parts[i]));
            qf_tensor_unref(row);
        }
        check(qf_tensor_slice(batch, (int64_t)n) == NULL);
        qf_tensor *copy = qf_tensor_copy(batch);
        check(copy && qf_tensor_equal(copy, batch));
        qf_tensor *back[MAX_PARTS];
        check(qf_tensor_unstack(copy, back) == QF_OK); /* consumes copy */
        for (size_t i = 0; i < n; i++) {
            check(qf_tensor_equal(back[i], parts[i]));
            qf_tensor_unref(back[i]);
        }
        qf_tensor_unref(batch);
    }

    /* Padded: the unknown dimensions grow to the largest part's. */
    qf_shape pad = s;
    for (int d = 0; d < rank; d++)
        if (unknown & (1u << d))
            pad.dims[d] = QF_UNKNOWN_DIM;
    batch = NULL;
    check(qf_tensor_stack_padded(var, n, dt, &pad, &batch) == QF_OK && batch);
    const qf_shape *bs = qf_tensor_shape(batch);
    int64_t big[QF_MAX_RANK];
    check(bs->rank == rank + 1 && bs->dims[0] == (int64_t)n);
    for (int d = 0; d < rank; d++) {
        big[d] = (unknown & (1u << d)) ? 0 : dims[d];
        for (size_t i = 0; (unknown & (1u << d)) && i < n; i++)
            big[d] = vdims[i][d] > big[d] ? vdims[i][d] : big[d];
        check(bs->dims[d + 1] == big[d]);
    }
    int64_t per = 1; /* places in one padded row */
    for (int d = 0; d < rank; d++)
        per *= big[d];
    for (size_t i = 0; i < n; i++) {
        int64_t idx[QF_MAX_RANK] = {0};
        for (int64_t k = 0; k < per; k++) { /* every place of row i */
            int64_t rem = k;
            bool inside = true;
            for (int d = rank - 1; d >= 0; d--) {
                idx[d] = big[d] ? rem % big[d] : 0;
                rem = big[d] ? rem / big[d] : 0;
                inside = inside && idx[d] < vdims[i][d];
            }
            int64_t at = (int64_t)i * per + k;
            if (inside)
                check(same_value(batch, at, var[i], offset(idx, vdims[i], rank)));
            else
                check(is_zero(batch, at));
        }
    }
    qf_tensor_unref(batch);
    for (size_t i = 0; i < n; i++) {
        qf_tensor_unref(parts[i]);
        qf_tensor_unref(var[i]);
    }
}

/* A shape straight from input bytes: no tensor unless valid and small. */
static void fuzz_raw_shape(fuzz_input *in)
{
    int rank = (int)(int8_t)fuzz_next(in);
    int64_t dims[QF_MAX_RANK];
    for (int d = 0; d < QF_MAX_RANK; d++) {
        int64_t v = 0;
        for (int k = 0; k < 8; k++)
            v = (int64_t)((uint64_t)v << 8 | fuzz_next(in));
        dims[d] = v;
    }
    qf_shape s = qf_shape_make(rank, dims);
    int64_t n = qf_shape_num_elements(&s);
    if (!qf_shape_is_valid(&s) || !qf_shape_is_fully_defined(&s)) {
        check(qf_tensor_new(QF_FLOAT32, &s) == NULL && qf_last_code() == QF_INVALID_ARGUMENT);
        return;
    }
    if (n < 0 || (uint64_t)n > SIZE_MAX / 16) { /* the size overflows */
        qf_tensor *t = qf_tensor_new(QF_COMPLEX128, &s);
        check(t == NULL);
        check(qf_last_code() == QF_RESOURCE_EXHAUSTED || qf_last_code() == QF_INVALID_ARGUMENT);
        return;
    }
    if (n <= 4096) {
        qf_tensor *t = qf_tensor_new(QF_COMPLEX128, &s);
        check(t && qf_tensor_num_elements(t) == n);
        qf_tensor_unref(t);
    }
}

static void fuzz_sparse(fuzz_input *in)
{
    int rank = 1 + (int)(fuzz_next(in) % 3);
    int64_t shape[3], idx[MAX_NNZ * 3], vals[MAX_NNZ];
    for (int d = 0; d < rank; d++)
        shape[d] = fuzz_next(in) % 5;
    int64_t nnz = fuzz_next(in) % (MAX_NNZ + 1);
    bool in_bounds = true;
    for (int64_t j = 0; j < nnz; j++) {
        for (int d = 0; d < rank; d++) {
            int64_t v = (int64_t)(fuzz_next(in) % 7) - 1; /* -1 .. 5 */
            idx[j * rank + d] = v;
            in_bounds = in_bounds && v >= 0 && v < shape[d];
        }
        vals[j] = (int64_t)fuzz_next(in);
    }
    qf_sparse *sp = NULL;
    qf_code rc = qf_sparse_new_from(QF_INT64, nnz, rank, idx, vals, shape, &sp);
    if (!in_bounds) {
        check(rc == QF_INVALID_ARGUMENT && sp == NULL);
        return;
    }
    check(rc == QF_OK && sp && qf_sparse_nnz(sp) == nnz && qf_sparse_rank(sp) == rank);
    if (rank < 2) {
        qf_sparse *one[1];
        check(qf_sparse_unstack(sp, one) == QF_INVALID_ARGUMENT);
        qf_sparse_unref(sp);
        return;
    }
    qf_sparse *parts[5];
    check(qf_sparse_unstack(sp, parts) == QF_OK);
    int64_t total = 0;
    for (int64_t r = 0; r < shape[0]; r++) {
        check(qf_sparse_rank(parts[r]) == rank - 1);
        for (int d = 1; d < rank; d++)
            check(qf_sparse_dim(parts[r], d - 1) == shape[d]);
        total += qf_sparse_nnz(parts[r]);
    }
    check(total == nnz);
    if (shape[0] > 0) {
        /* Stacked again: the entries grouped by first index, in order. */
        qf_sparse *again = NULL;
        check(qf_sparse_stack(parts, (size_t)shape[0], &again) == QF_OK);
        int64_t gidx[MAX_NNZ * 3], gvals[MAX_NNZ], k = 0;
        for (int64_t r = 0; r < shape[0]; r++)
            for (int64_t j = 0; j < nnz; j++)
                if (idx[j * rank] == r) {
                    memcpy(&gidx[k * rank], &idx[j * rank], (size_t)rank * sizeof(int64_t));
                    gvals[k++] = vals[j];
                }
        qf_sparse *want = NULL;
        check(qf_sparse_new_from(QF_INT64, nnz, rank, gidx, gvals, shape, &want) == QF_OK);
        check(qf_sparse_equal(again, want));
        qf_sparse_unref(want);
        qf_sparse_unref(again);
    }
    for (int64_t r = 0; r < shape[0]; r++)
        qf_sparse_unref(parts[r]);
    qf_sparse_unref(sp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    for (int round = 0; round < 8 && in.n > 0; round++) {
        switch (fuzz_next(&in) % 3) {
        case 0:
            fuzz_stack(&in);
            break;
        case 1:
            fuzz_raw_shape(&in);
            break;
        default:
            fuzz_sparse(&in);
            break;
        }
    }
    return 0;
}
