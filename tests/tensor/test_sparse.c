/* test_sparse.c - sparse tensors (qf_sparse.h): construction and its
 * checks, stacking and unstacking with TensorFlow's rules, QF_SPARSE
 * tensors, and queues carrying sparse handles (spec 171-172; the batching
 * half is in test_batch_sparse.c).
 *
 * The values in the stack/unstack tests are the ones TensorFlow's
 * input_test.py uses for its sparse batches (spec 171: [x, -x] at [0] and
 * [1] of a dense [2]; spec 172: indices [[0,1],[0,2],[1,0],[1,3]] of a
 * dense [2,4] with values [5,4,7,2]).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"

#define OK(x) cr_assert_eq((x), QF_OK, "%s: %s", #x, qf_last_message())

static bool contains(const char *s, const char *sub)
{
    return s && sub && strstr(s, sub) != NULL;
}

static qf_tensor *i64_tensor(qf_shape sh, const int64_t *v)
{
    int64_t n = qf_shape_num_elements(&sh);
    qf_tensor *t = qf_tensor_new_from(QF_INT64, &sh, v, (size_t)n * sizeof(int64_t));
    cr_assert_not_null(t, "%s", qf_last_message());
    return t;
}

static qf_sparse *sp_i64(int64_t nnz, int rank, const int64_t *idx, const int64_t *vals,
                         const int64_t *dense)
{
    qf_sparse *sp = NULL;
    OK(qf_sparse_new_from(QF_INT64, nnz, rank, idx, vals, dense, &sp));
    return sp;
}

static const int64_t *i64s(const qf_tensor *t)
{
    return qf_tensor_cdata(t);
}

/* The sparse tensor's three parts against expectations. */
static void expect_sparse(const qf_sparse *sp, int64_t nnz, int rank, const int64_t *idx,
                          const int64_t *vals, const int64_t *dense)
{
    cr_assert_not_null(sp);
    cr_expect_eq(qf_sparse_nnz(sp), nnz);
    cr_assert_eq(qf_sparse_rank(sp), rank);
    const qf_shape *is = qf_tensor_shape(qf_sparse_indices(sp));
    cr_expect_eq(is->rank, 2);
    cr_expect_eq(is->dims[0], nnz);
    cr_expect_eq(is->dims[1], rank);
    for (int64_t i = 0; i < nnz * rank; i++)
        cr_expect_eq(i64s(qf_sparse_indices(sp))[i], idx[i], "index cell %" PRId64, i);
    for (int64_t i = 0; vals && i < nnz; i++)
        cr_expect_eq(i64s(qf_sparse_values(sp))[i], vals[i], "value %" PRId64, i);
    for (int k = 0; k < rank; k++)
        cr_expect_eq(qf_sparse_dim(sp, k), dense[k], "dense dim %d", k);
}

/* -------------------------------------------------------------- making */

Test(sparse, parts_and_accessors)
{
    int64_t idx[] = {0, 1, 0, 2, 1, 0, 1, 3};
    int64_t vals[] = {5, 4, 7, 2};
    int64_t dense[] = {2, 4};
    qf_sparse *sp = sp_i64(4, 2, idx, vals, dense);
    expect_sparse(sp, 4, 2, idx, vals, dense);
    cr_expect_eq(qf_sparse_dtype(sp), QF_INT64);
    cr_expect_eq(qf_sparse_dim(sp, 2), -1);
    cr_expect_eq(qf_sparse_dim(sp, -1), -1);
    qf_shape s = qf_sparse_shape(sp);
    cr_expect_eq(s.rank, 2);
    cr_expect_eq(s.dims[0], 2);
    cr_expect_eq(s.dims[1], 4);
    cr_expect_eq(qf_tensor_dtype(qf_sparse_dense_shape(sp)), QF_INT64);
    cr_expect(qf_sparse_equal(sp, sp));
    qf_sparse *same = sp_i64(4, 2, idx, vals, dense);
    cr_expect(qf_sparse_equal(sp, same));
    vals[3] = 3;
    qf_sparse *other = sp_i64(4, 2, idx, vals, dense);
    cr_expect_not(qf_sparse_equal(sp, other));
    cr_expect_not(qf_sparse_equal(sp, NULL));
    qf_sparse_unref(same);
    qf_sparse_unref(other);
    /* NULL-safe accessors */
    cr_expect_null(qf_sparse_indices(NULL));
    cr_expect_eq(qf_sparse_dtype(NULL), QF_DT_INVALID);
    cr_expect_eq(qf_sparse_nnz(NULL), 0);
    qf_sparse_unref(NULL);
    cr_expect_null(qf_sparse_ref(NULL));
    qf_sparse_unref(sp);
}

Test(sparse, no_entries_and_string_values)
{
    int64_t dense[] = {3};
    qf_sparse *empty = sp_i64(0, 1, NULL, NULL, dense);
    cr_expect_eq(qf_sparse_nnz(empty), 0);
    cr_expect_eq(qf_sparse_dim(empty, 0), 3);
    qf_sparse_unref(empty);

    /* strings through qf_sparse_new(): the tensors are taken */
    int64_t idx[] = {0, 2};
    qf_tensor *vals = qf_tensor_new(QF_STRING, &(qf_shape){1, {2}});
    OK(qf_tensor_set_string(vals, 0, "ab", 2));
    OK(qf_tensor_set_string(vals, 1, "", 0));
    qf_sparse *sp = NULL;
    OK(qf_sparse_new(i64_tensor(QF_SHAPE(2, 1), idx), vals, i64_tensor(QF_SHAPE(1), dense), &sp));
    cr_expect_eq(qf_sparse_dtype(sp), QF_STRING);
    cr_expect_str_eq(qf_tensor_string(qf_sparse_values(sp), 0, NULL), "ab");
    cr_expect_str_eq(qf_tensor_string(qf_sparse_values(sp), 1, NULL), "");
    qf_sparse_unref(sp);
}

/* Each bad triple is refused with a message naming what is wrong, and the
 * tensors handed in are released (their extra reference is all that is
 * left). */
static void refused(qf_tensor *i, qf_tensor *v, qf_tensor *d, const char *want)
{
    qf_tensor *keep[3] = {qf_tensor_ref(i), qf_tensor_ref(v), qf_tensor_ref(d)};
    qf_sparse *const sentinel = (qf_sparse *)(uintptr_t)0x1;
    qf_sparse *sp = sentinel;
    cr_expect_eq(qf_sparse_new(i, v, d, &sp), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), want), "'%s' lacks '%s'", qf_last_message(), want);
    cr_expect_eq(sp, sentinel, "*ret untouched");
    for (int k = 0; k < 3; k++) {
        if (keep[k])
            cr_expect_eq(qf_tensor_refcount(keep[k]), 1, "part %d released", k);
        qf_tensor_unref(keep[k]);
    }
}

Test(sparse, bad_parts_are_refused_and_released)
{
    int64_t idx2[] = {0, 1, 1, 3}, vals2[] = {1, 2}, dense[] = {2, 4};
    /* an index outside the dense shape */
    int64_t out[] = {0, 1, 2, 0};
    refused(i64_tensor(QF_SHAPE(2, 2), out), i64_tensor(QF_SHAPE(2), vals2),
            i64_tensor(QF_SHAPE(2), dense),
            "indices[1] = [2,0] is out of bounds: need 0 <= index < [2,4]");
    int64_t neg[] = {0, -1, 1, 0};
    refused(i64_tensor(QF_SHAPE(2, 2), neg), i64_tensor(QF_SHAPE(2), vals2),
            i64_tensor(QF_SHAPE(2), dense), "indices[0] = [0,-1] is out of bounds");
    /* indices not a matrix, not int64 */
    refused(i64_tensor(QF_SHAPE(4), idx2), i64_tensor(QF_SHAPE(2), vals2),
            i64_tensor(QF_SHAPE(2), dense), "indices must be an int64 matrix");
    int32_t i32[4] = {0, 1, 1, 3};
    refused(qf_tensor_new_from(QF_INT32, &(qf_shape){2, {2, 2}}, i32, sizeof(i32)),
            i64_tensor(QF_SHAPE(2), vals2), i64_tensor(QF_SHAPE(2), dense),
            "indices must be an int64 matrix");
    /* columns against rank */
    refused(i64_tensor(QF_SHAPE(4, 1), idx2), i64_tensor(QF_SHAPE(4), idx2),
            i64_tensor(QF_SHAPE(2), dense), "indices have 1 columns but dense_shape has rank 2");
    /* values: count, sparse values, owning pointers */
    refused(i64_tensor(QF_SHAPE(2, 2), idx2), i64_tensor(QF_SHAPE(3), idx2),
            i64_tensor(QF_SHAPE(2), dense), "values must be a vector of 2 entries");
    qf_tensor *owning = qf_tensor_new_ptr(&(qf_shape){1, {2}}, free);
    refused(i64_tensor(QF_SHAPE(2, 2), idx2), owning, i64_tensor(QF_SHAPE(2), dense),
            "pointers the tensor owns");
    qf_tensor *sparse_vals = qf_tensor_new(QF_SPARSE, &(qf_shape){1, {2}});
    refused(i64_tensor(QF_SHAPE(2, 2), idx2), sparse_vals, i64_tensor(QF_SHAPE(2), dense),
            "cannot be sparse tensors");
    /* dense shape: negative size, not a vector (rank 0 is a sparse scalar:
     * sparse_scalars_have_rank_zero_and_stack_into_a_vector) */
    int64_t bad_dense[] = {2, -4};
    refused(i64_tensor(QF_SHAPE(2, 2), idx2), i64_tensor(QF_SHAPE(2), vals2),
            i64_tensor(QF_SHAPE(2), bad_dense), "dense_shape [2,-4] has a negative size");
    refused(i64_tensor(QF_SHAPE(2, 2), idx2), i64_tensor(QF_SHAPE(2), vals2),
            i64_tensor(QF_SHAPE(1, 2), dense), "dense_shape must be an int64 vector");
    /* a sparse scalar's indices have no columns */
    refused(i64_tensor(QF_SHAPE(1, 1), idx2), i64_tensor(QF_SHAPE(1), vals2),
            i64_tensor(QF_SHAPE(0), dense), "indices have 1 columns but dense_shape has rank 0");
    /* a missing part */
    refused(NULL, i64_tensor(QF_SHAPE(2), vals2), i64_tensor(QF_SHAPE(2), dense),
            "indices is NULL");

    /* qf_sparse_new_from: strings and bad counts */
    qf_sparse *sp = NULL;
    cr_expect_eq(qf_sparse_new_from(QF_STRING, 2, 2, idx2, vals2, dense, &sp), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_sparse_new_from(QF_INT64, -1, 2, idx2, vals2, dense, &sp), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_sparse_new_from(QF_INT64, 2, -1, idx2, vals2, dense, &sp), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_sparse_new_from(QF_INT64, 1, 0, NULL, NULL, NULL, &sp), QF_INVALID_ARGUMENT,
                 "a present scalar needs its value");
    cr_expect_eq(qf_sparse_new_from(QF_INT64, 2, 2, NULL, vals2, dense, &sp), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_sparse_new_from(QF_INT64, 2, 2, idx2, vals2, dense, NULL), QF_INVALID_ARGUMENT);
    cr_expect_null(sp);
}

/* ------------------------------------------------------ stack, unstack */

Test(sparse, sparse_scalars_have_rank_zero_and_stack_into_a_vector)
{
    /* issue 24 item 9: dense_shape [] is a sparse scalar, held (one entry at
     * index []) or absent (none); stacking k of them gives rank 1, indices
     * [[i]] for the held ones, dense_shape [k] (TensorFlow's batching of a
     * SparseTensor with dense_shape []) */
    int64_t v7 = 7, v9 = 9;
    qf_sparse *parts[3] = {sp_i64(1, 0, NULL, &v7, NULL), sp_i64(0, 0, NULL, NULL, NULL), NULL};
    qf_tensor *ti = i64_tensor(QF_SHAPE(1, 0), NULL), *tv = i64_tensor(QF_SHAPE(1), &v9),
              *ts = i64_tensor(QF_SHAPE(0), NULL);
    OK(qf_sparse_new(ti, tv, ts, &parts[2]));
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(qf_sparse_rank(parts[i]), 0);
        qf_shape sh = qf_sparse_shape(parts[i]);
        cr_expect_eq(sh.rank, 0, "the dense shape of a scalar");
        cr_expect_eq(qf_sparse_dim(parts[i], 0), -1, "no dimension 0");
    }
    cr_expect_eq(qf_sparse_nnz(parts[1]), 0);
    qf_sparse *st = NULL;
    OK(qf_sparse_stack(parts, 3, &st));
    expect_sparse(st, 2, 1, (const int64_t[]){0, 2}, (const int64_t[]){7, 9}, (const int64_t[]){3});
    /* a vector does not unstack (TensorFlow: rank > 1 needed), as before */
    qf_sparse *rows[3] = {NULL};
    cr_expect_eq(qf_sparse_unstack(st, rows), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "should be > 1, but saw rank: 1"), "%s",
              qf_last_message());
    /* a scalar and a vector do not stack together */
    qf_sparse *mixed[2] = {parts[0], st};
    qf_sparse *none = NULL;
    cr_expect_eq(qf_sparse_stack(mixed, 2, &none), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "rank prior to SparseTensor[1] was: 0"), "%s",
              qf_last_message());
    cr_expect_null(none);
    qf_sparse_unref(st);
    for (int i = 0; i < 3; i++)
        qf_sparse_unref(parts[i]);
}

Test(sparse, spec_171_stack_adds_a_batch_dimension)
{
    /* spec 171: example x is SparseTensor([[0],[1]], [x, -x], [2]); a batch
     * of them has indices [[b,0],[b,1] ...], values [x,-x, ...] and
     * dense_shape [batch, 2] */
    qf_sparse *parts[3];
    int64_t idx[] = {0, 1}, dense[] = {2};
    for (int x = 0; x < 3; x++) {
        int64_t v[] = {x, -x};
        parts[x] = sp_i64(2, 1, idx, v, dense);
    }
    qf_sparse *b = NULL;
    OK(qf_sparse_stack(parts, 3, &b));
    int64_t want_idx[] = {0, 0, 0, 1, 1, 0, 1, 1, 2, 0, 2, 1};
    int64_t want_vals[] = {0, 0, 1, -1, 2, -2};
    int64_t want_dense[] = {3, 2};
    expect_sparse(b, 6, 2, want_idx, want_vals, want_dense);
    qf_sparse_unref(b);
    for (int x = 0; x < 3; x++)
        qf_sparse_unref(parts[x]);
}

Test(sparse, stack_takes_the_largest_size_of_each_dimension)
{
    /* spec 171 (dense shapes take the maximum): [2,1] holding [1,0] and
     * [1,5] holding [0,4] stack to [2,2,5]; parts without entries count */
    int64_t ia[] = {1, 0}, da[] = {2, 1}, va[] = {10};
    int64_t ib[] = {0, 4}, db[] = {1, 5}, vb[] = {20};
    int64_t dc[] = {0, 3};
    qf_sparse *parts[3] = {sp_i64(1, 2, ia, va, da), sp_i64(1, 2, ib, vb, db),
                           sp_i64(0, 2, NULL, NULL, dc)};
    qf_sparse *b = NULL;
    OK(qf_sparse_stack(parts, 3, &b));
    int64_t want_idx[] = {0, 1, 0, 1, 0, 4};
    int64_t want_vals[] = {10, 20};
    int64_t want_dense[] = {3, 2, 5};
    expect_sparse(b, 2, 3, want_idx, want_vals, want_dense);
    qf_sparse_unref(b);
    for (int i = 0; i < 3; i++)
        qf_sparse_unref(parts[i]);
}

Test(sparse, stack_refuses_mixed_ranks_and_dtypes)
{
    int64_t i1[] = {0}, d1[] = {2}, v[] = {1};
    int64_t i2[] = {0, 0}, d2[] = {1, 1};
    qf_sparse *parts[2] = {sp_i64(1, 1, i1, v, d1), sp_i64(1, 2, i2, v, d2)};
    qf_sparse *const sentinel = (qf_sparse *)(uintptr_t)0x1;
    qf_sparse *b = sentinel;
    cr_expect_eq(qf_sparse_stack(parts, 2, &b), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Inconsistent rank across SparseTensors: rank prior to SparseTensor[1] was: "
                     "1 but rank of SparseTensor[1] is: 2");
    qf_sparse_unref(parts[1]);
    float f = 1.5f;
    OK(qf_sparse_new_from(QF_FLOAT32, 1, 1, i1, &f, d1, &parts[1]));
    cr_expect_eq(qf_sparse_stack(parts, 2, &b), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "Inconsistent dtype"), "%s", qf_last_message());
    cr_expect_eq(qf_sparse_stack(parts, 0, &b), QF_INVALID_ARGUMENT);
    qf_sparse *with_null[2] = {parts[0], NULL};
    cr_expect_eq(qf_sparse_stack(with_null, 2, &b), QF_INVALID_ARGUMENT);
    cr_expect_eq(b, sentinel);
    qf_sparse_unref(parts[0]);
    qf_sparse_unref(parts[1]);
}

Test(sparse, spec_172_unstack_splits_rows_in_order)
{
    /* spec 172: indices [[0,1],[0,2],[1,0],[1,3]], dense [2,4], values
     * [5,4,7,2]: row 0 is ([[1],[2]], [5,4], [4]), row 1 ([[0],[3]],
     * [7,2], [4]) */
    int64_t idx[] = {0, 1, 0, 2, 1, 0, 1, 3}, vals[] = {5, 4, 7, 2}, dense[] = {2, 4};
    qf_sparse *sp = sp_i64(4, 2, idx, vals, dense);
    qf_sparse *rows[2] = {NULL, NULL};
    OK(qf_sparse_unstack(sp, rows));
    int64_t r0_idx[] = {1, 2}, r0_vals[] = {5, 4}, r_dense[] = {4};
    int64_t r1_idx[] = {0, 3}, r1_vals[] = {7, 2};
    expect_sparse(rows[0], 2, 1, r0_idx, r0_vals, r_dense);
    expect_sparse(rows[1], 2, 1, r1_idx, r1_vals, r_dense);
    /* and back: stacking the rows gives the original */
    qf_sparse *again = NULL;
    OK(qf_sparse_stack(rows, 2, &again));
    cr_expect(qf_sparse_equal(again, sp));
    qf_sparse_unref(again);
    qf_sparse_unref(rows[0]);
    qf_sparse_unref(rows[1]);
    qf_sparse_unref(sp);
}

Test(sparse, unstack_gives_empty_rows_and_keeps_entry_order)
{
    /* rows without entries still come out, with the row dense shape;
     * entries out of row order land in their rows in input order */
    int64_t idx[] = {3, 1, 1, 0, 3, 0}, vals[] = {30, 10, 31}, dense[] = {4, 2};
    qf_sparse *sp = sp_i64(3, 2, idx, vals, dense);
    qf_sparse *rows[4];
    OK(qf_sparse_unstack(sp, rows));
    int64_t d[] = {2};
    expect_sparse(rows[0], 0, 1, NULL, NULL, d);
    expect_sparse(rows[2], 0, 1, NULL, NULL, d);
    int64_t i1[] = {0}, v1[] = {10};
    expect_sparse(rows[1], 1, 1, i1, v1, d);
    int64_t i3[] = {1, 0}, v3[] = {30, 31};
    expect_sparse(rows[3], 2, 1, i3, v3, d);
    for (int i = 0; i < 4; i++)
        qf_sparse_unref(rows[i]);
    qf_sparse_unref(sp);
}

Test(sparse, unstack_needs_rank_two)
{
    int64_t idx[] = {0}, vals[] = {1}, dense[] = {1};
    qf_sparse *sp = sp_i64(1, 1, idx, vals, dense);
    qf_sparse *rows[1] = {(qf_sparse *)(uintptr_t)0x1};
    cr_expect_eq(qf_sparse_unstack(sp, rows), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Rank of input SparseTensor should be > 1, but saw rank: 1");
    cr_expect_eq(rows[0], (qf_sparse *)(uintptr_t)0x1, "untouched");
    qf_sparse_unref(sp);
}

Test(sparse, string_values_stack_and_unstack)
{
    int64_t idx[] = {0, 0, 1, 1}, dense[] = {2, 2};
    qf_tensor *vals = qf_tensor_new(QF_STRING, &(qf_shape){1, {2}});
    OK(qf_tensor_set_string(vals, 0, "alpha", 5));
    OK(qf_tensor_set_string(vals, 1, "beta", 4));
    qf_sparse *sp = NULL;
    OK(qf_sparse_new(i64_tensor(QF_SHAPE(2, 2), idx), vals, i64_tensor(QF_SHAPE(2), dense), &sp));
    qf_sparse *rows[2];
    OK(qf_sparse_unstack(sp, rows));
    cr_expect_str_eq(qf_tensor_string(qf_sparse_values(rows[0]), 0, NULL), "alpha");
    cr_expect_str_eq(qf_tensor_string(qf_sparse_values(rows[1]), 0, NULL), "beta");
    qf_sparse *back = NULL;
    OK(qf_sparse_stack(rows, 2, &back));
    cr_expect(qf_sparse_equal(back, sp));
    qf_sparse_unref(back);
    qf_sparse_unref(rows[0]);
    qf_sparse_unref(rows[1]);
    qf_sparse_unref(sp);
}

/* ------------------------------------------------------ QF_SPARSE tensors */

Test(sparse, sparse_tensors_hold_and_share_references)
{
    int64_t idx[] = {0}, vals[] = {7}, dense[] = {1};
    qf_sparse *sp = sp_i64(1, 1, idx, vals, dense);
    /* watch the sparse tensor's lifetime through its indices tensor */
    qf_tensor *watch = qf_tensor_ref(qf_sparse_indices(sp));
    cr_expect_eq(qf_tensor_refcount(watch), 2);

    qf_tensor *t = qf_tensor_new_sparse(sp); /* takes our reference */
    cr_assert_not_null(t);
    cr_expect_eq(qf_tensor_dtype(t), QF_SPARSE);
    cr_expect_eq(qf_tensor_shape(t)->rank, 0);
    cr_expect_eq(qf_tensor_sparse(t, 0), sp);
    cr_expect_null(qf_tensor_sparse(t, 1));
    cr_expect_str_eq(qf_dtype_name(QF_SPARSE), "sparse");
    cr_expect_eq(qf_dtype_size(QF_SPARSE), sizeof(void *));

    /* a copy shares the sparse tensor, and so does a stack */
    qf_tensor *c = qf_tensor_copy(t);
    cr_assert_not_null(c);
    cr_expect_eq(qf_tensor_sparse(c, 0), sp);
    cr_expect(qf_tensor_equal(c, t));
    qf_tensor *parts[2] = {qf_tensor_ref(t), c};
    qf_tensor *stacked = NULL;
    OK(qf_tensor_stack(parts, 2, QF_SPARSE, NULL, &stacked));
    cr_expect_eq(qf_tensor_shape(stacked)->dims[0], 2);
    cr_expect_eq(qf_tensor_sparse(stacked, 1), sp);
    qf_tensor *row = qf_tensor_slice(stacked, 0);
    cr_expect_eq(qf_tensor_sparse(row, 0), sp);

    /* set_sparse on a shared tensor is refused (and releases what it got) */
    cr_expect_eq(qf_tensor_set_sparse(stacked, 0, qf_sparse_ref(sp)), QF_OK);
    qf_tensor_ref(stacked);
    cr_expect_eq(qf_tensor_set_sparse(stacked, 0, qf_sparse_ref(sp)), QF_FAILED_PRECONDITION);
    qf_tensor_unref(stacked);
    cr_expect_eq(qf_tensor_set_sparse(row, 1, qf_sparse_ref(sp)), QF_INVALID_ARGUMENT);
    cr_expect_eq(qf_tensor_set_sparse(watch, 0, qf_sparse_ref(sp)), QF_INVALID_ARGUMENT);

    /* qf_tensor_new_from refuses QF_SPARSE; a new QF_SPARSE tensor holds NULLs */
    cr_expect_null(qf_tensor_new_from(QF_SPARSE, &(qf_shape){0, {0}}, &sp, sizeof(sp)));
    qf_tensor *blank = qf_tensor_new(QF_SPARSE, &(qf_shape){1, {3}});
    cr_expect_null(qf_tensor_sparse(blank, 2));
    cr_expect_not(qf_tensor_equal(blank, stacked));
    qf_tensor_unref(blank);

    qf_tensor_unref(row);
    qf_tensor_unref(stacked);
    qf_tensor_unref(t);
    /* every holder gone: the sparse tensor released its indices */
    cr_expect_eq(qf_tensor_refcount(watch), 1);
    qf_tensor_unref(watch);
}

Test(sparse, unstacked_sparse_tensor_moves_its_references)
{
    int64_t idx[] = {0}, vals[] = {7}, dense[] = {1};
    qf_sparse *a = sp_i64(1, 1, idx, vals, dense), *b = sp_i64(1, 1, idx, vals, dense);
    qf_tensor *v = qf_tensor_new(QF_SPARSE, &(qf_shape){1, {2}});
    OK(qf_tensor_set_sparse(v, 0, a));
    OK(qf_tensor_set_sparse(v, 1, b));
    qf_tensor *parts[2];
    OK(qf_tensor_unstack(v, parts));
    cr_expect_eq(qf_tensor_sparse(parts[0], 0), a);
    cr_expect_eq(qf_tensor_sparse(parts[1], 0), b);
    qf_tensor_unref(parts[0]);
    qf_tensor_unref(parts[1]);
}

/* ------------------------------------------------------------- queues */

static qf_queue *sparse_queue(int64_t capacity)
{
    qf_dtype dt[2] = {QF_INT64, QF_SPARSE};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options o = {
        .capacity = capacity, .num_components = 2, .dtypes = dt, .shapes = sh, .name = "sparse_q"};
    qf_queue *q = NULL;
    OK(qf_fifo_queue_new(&o, &q));
    return q;
}

static qf_element *example(int64_t x)
{
    int64_t idx[] = {0, 1}, v[] = {x, -x}, dense[] = {2};
    qf_tensor *t[2] = {qf_tensor_new_i64(x), qf_tensor_new_sparse(sp_i64(2, 1, idx, v, dense))};
    return qf_element_of(2, t);
}

Test(sparse, queues_carry_handles_and_dequeue_many_gives_a_vector_of_them)
{
    /* spec 171: the queue holds one handle per example; dequeue_many and
     * dequeue_up_to give the handles as a vector, which stacks */
    qf_queue *q = sparse_queue(8);
    for (int64_t x = 0; x < 5; x++)
        OK(qf_queue_enqueue(q, example(x)));
    qf_element *b = NULL;
    OK(qf_queue_dequeue_many(q, 3, &b));
    const qf_tensor *h = qf_element_get(b, 1);
    cr_expect_eq(qf_tensor_dtype(h), QF_SPARSE);
    cr_expect_eq(qf_tensor_shape(h)->rank, 1);
    cr_expect_eq(qf_tensor_shape(h)->dims[0], 3);
    qf_sparse *st = NULL;
    OK(qf_sparse_stack((qf_sparse *const *)qf_tensor_cdata(h), 3, &st));
    int64_t want_idx[] = {0, 0, 0, 1, 1, 0, 1, 1, 2, 0, 2, 1};
    int64_t want_vals[] = {0, 0, 1, -1, 2, -2};
    int64_t want_dense[] = {3, 2};
    expect_sparse(st, 6, 2, want_idx, want_vals, want_dense);
    qf_sparse_unref(st);
    qf_element_free(b);

    OK(qf_queue_close(q, false));
    OK(qf_queue_dequeue_up_to(q, 10, &b)); /* the 2 left */
    cr_expect_eq(qf_tensor_shape(qf_element_get(b, 1))->dims[0], 2);
    cr_expect_eq(qf_sparse_nnz(qf_tensor_sparse(qf_element_get(b, 1), 1)), 2);
    qf_element_free(b);
    qf_queue_unref(q);
}

Test(sparse, a_freed_queue_releases_the_sparse_tensors_it_holds)
{
    qf_queue *q = sparse_queue(4);
    qf_element *e = example(3);
    qf_tensor *watch = qf_tensor_ref(qf_sparse_indices(qf_tensor_sparse(qf_element_get(e, 1), 0)));
    OK(qf_queue_enqueue(q, e));
    OK(qf_queue_enqueue(q, example(4)));
    cr_expect_eq(qf_tensor_refcount(watch), 2);
    qf_queue_unref(q);
    cr_expect_eq(qf_tensor_refcount(watch), 1);
    qf_tensor_unref(watch);
}

Test(sparse, a_queue_refuses_a_sparse_vector_where_a_handle_goes)
{
    /* the per-example shape of a sparse component in a queue is []: a
     * vector of handles is a shape mismatch (spec 18) */
    qf_queue *q = sparse_queue(4);
    int64_t idx[] = {0}, v[] = {1}, dense[] = {1};
    qf_tensor *vec = qf_tensor_new(QF_SPARSE, &(qf_shape){1, {1}});
    OK(qf_tensor_set_sparse(vec, 0, sp_i64(1, 1, idx, v, dense)));
    qf_tensor *t[2] = {qf_tensor_new_i64(1), vec};
    qf_element *e = qf_element_of(2, t);
    cr_expect_eq(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "Expected [], got [1]"), "%s", qf_last_message());
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}
