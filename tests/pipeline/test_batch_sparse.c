/* test_batch_sparse.c - sparse components through batch, shuffle_batch,
 * batch_join, shuffle_batch_join and the maybe_* variants (qf_batch.h,
 * spec 171-172, with the values of TensorFlow's input_test.py).
 *
 * Every test uses a scope of its own; ordering comes from observable state
 * (batches taken, joins); nothing sleeps; every wait has a deadline only a
 * broken run reaches.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#define QFT_RT_NAME "batch_sparse"
#include "qf_test.h"

#ifndef QF_TSAN_CRITERION_SHIM_H /* the in-process TSan runner has no timeouts */
TestSuite(batch_sparse, .timeout = 240);
#endif

#define OK(x) cr_assert_eq((x), QF_OK, "%s: %s", #x, qf_last_message())

/* ---------------------------------------------------------------- helpers */

/* The sparse tensor of component c of a batch (a QF_SPARSE scalar). */
static qf_sparse *sp_at(const qf_element *e, size_t c)
{
    const qf_tensor *t = qf_element_get(e, c);
    cr_assert_not_null(t);
    cr_assert_eq(qf_tensor_dtype(t), QF_SPARSE);
    cr_assert_eq(qf_tensor_shape(t)->rank, 0, "one sparse tensor per batch");
    qf_sparse *sp = qf_tensor_sparse(t, 0);
    cr_assert_not_null(sp);
    return sp;
}

static int64_t sp_index(const qf_sparse *sp, int64_t entry, int k)
{
    return (
        (const int64_t *)qf_tensor_cdata(qf_sparse_indices(sp)))[entry * qf_sparse_rank(sp) + k];
}

static float sp_f32(const qf_sparse *sp, int64_t entry)
{
    return ((const float *)qf_tensor_cdata(qf_sparse_values(sp)))[entry];
}

static int64_t sp_i64(const qf_sparse *sp, int64_t entry)
{
    return ((const int64_t *)qf_tensor_cdata(qf_sparse_values(sp)))[entry];
}

static qf_tensor *sparse_of(qf_dtype dt, int64_t nnz, int rank, const int64_t *idx,
                            const void *vals, const int64_t *dense)
{
    qf_sparse *sp = NULL;
    OK(qf_sparse_new_from(dt, nnz, rank, idx, vals, dense, &sp));
    return qf_tensor_new_sparse(sp);
}

static bool contains(const char *s, const char *sub)
{
    return s && strstr(s, sub) != NULL;
}

/* ------------------------------------------------------------- generators
 *
 * TensorFlow's sparse counter (spec 171): each run yields (counter,
 * SparseTensor(indices [[0],[1]], values [c, -c] as float, dense [2]),
 * "string") while fewer than `limit` runs happened; the next run is
 * OUT_OF_RANGE. value >= 0 makes a constant. Thread-safe (one fetch-add).
 */
typedef struct sgen {
    atomic_long runs;
    long limit;
    long value;
} sgen;

static qf_code sgen_produce(void *arg, qf_element **ret)
{
    sgen *g = arg;
    long r = atomic_fetch_add(&g->runs, 1);
    if (r >= g->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", g->limit);
    int64_t c = g->value >= 0 ? g->value : r;
    int64_t idx[2] = {0, 1}, dense[1] = {2};
    float v[2] = {(float)c, (float)-c};
    qf_tensor *t[3] = {qf_tensor_new_i64(c), sparse_of(QF_FLOAT32, 2, 1, idx, v, dense),
                       qf_tensor_new_cstr("string")};
    *ret = qf_element_of(3, t);
    return QF_OK;
}

static const qf_dtype SGEN_DT[3] = {QF_INT64, QF_SPARSE, QF_STRING};

static qf_batch_source *sgen_source(sgen *g, const char *const *names)
{
    qf_shape sh[3] = {qf_shape_scalar(), QF_SHAPE(2), qf_shape_scalar()};
    qf_components c = {.n = 3, .dtypes = SGEN_DT, .shapes = sh, .names = names};
    qf_batch_source *s = NULL;
    OK(qf_batch_source_produce(&c, sgen_produce, g, &s));
    return s;
}

/* Batch k of the sparse counter, components (c, s) at positions pc, ps: the
 * counters are base..base+n-1 in order when `ordered`; the sparse tensor has
 * rows [b,0] and [b,1] holding c[b] and -c[b] for every b. */
static void expect_counter_batch(const qf_element *e, size_t pc, size_t ps, int64_t n, int64_t base,
                                 bool ordered)
{
    const qf_tensor *ct = qf_element_get(e, pc);
    cr_assert_eq(qf_tensor_shape(ct)->dims[0], n);
    qf_sparse *sp = sp_at(e, ps);
    cr_assert_eq(qf_sparse_rank(sp), 2);
    cr_expect_eq(qf_sparse_dim(sp, 0), n, "dense_shape gains the batch dimension");
    cr_expect_eq(qf_sparse_dim(sp, 1), 2);
    cr_assert_eq(qf_sparse_nnz(sp), 2 * n);
    for (int64_t b = 0; b < n; b++) {
        int64_t c = i64_at(e, pc, b);
        if (ordered)
            cr_expect_eq(c, base + b);
        for (int k = 0; k < 2; k++) {
            int64_t at = 2 * b + k;
            cr_expect_eq(sp_index(sp, at, 0), b, "row of entry %" PRId64, at);
            cr_expect_eq(sp_index(sp, at, 1), k);
            cr_expect_eq(sp_f32(sp, at), k ? -(float)c : (float)c, "entry %" PRId64, at);
        }
    }
}

/* ------------------------------------------------------------- spec 171 */

Test(batch_sparse, spec_171_one_thread_batches_sparse_counters)
{
    /* spec 171 (TensorFlow's testOneThread with a sparse counter): 30
     * examples, batch 10: counters 0..29 in order, the sparse component's
     * indices [[0,0],[0,1],[1,0],[1,1],...], values [x,-x,...],
     * dense_shape [10,2]; then OutOfRange */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    sgen g = {.limit = 30, .value = -1};
    qf_batcher *b = NULL;
    OK(qf_batch(s, sgen_source(&g, NULL), 10, NULL, &b));
    cr_expect_eq(qf_batcher_dtype(b, 1), QF_SPARSE);
    qf_shape os = qf_batcher_output_shape(b, 1);
    cr_expect_eq(os.rank, 2);
    cr_expect_eq(os.dims[0], 10);
    cr_expect_eq(os.dims[1], 2);
    started st = start(rt, NULL, s);
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        expect_counter_batch(e, 0, 1, 10, 10 * k, true);
        cr_expect_str_eq(qf_tensor_string(qf_element_get(e, 2), 9, NULL), "string");
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch_sparse, spec_171_named_components_with_a_sparse_one)
{
    /* spec 169 + 171: {"c": counter, "s": sparse, "S": "string"}; the
     * components come out in sorted key order (S, c, s) and by name */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    sgen g = {.limit = 20, .value = -1};
    const char *names[3] = {"c", "s", "S"};
    qf_batcher *b = NULL;
    OK(qf_batch(s, sgen_source(&g, names), 10, NULL, &b));
    cr_expect_str_eq(qf_batcher_component_name(b, 0), "S");
    cr_expect_str_eq(qf_batcher_component_name(b, 1), "c");
    cr_expect_str_eq(qf_batcher_component_name(b, 2), "s");
    cr_expect_eq(qf_batcher_dtype(b, 2), QF_SPARSE);
    started st = start(rt, NULL, s);
    for (int k = 0; k < 2; k++) {
        qf_element *e = next_ok(b);
        cr_expect_eq(qf_tensor_dtype(qf_element_get_by_name(e, "s")), QF_SPARSE);
        expect_counter_batch(e, 1, 2, 10, 10 * k, true);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

/* A poll source over another batcher's poller: yields its batches (for
 * enqueue_many) until it ends. */
static qf_code rebatch_poll(qf_task *task, void *arg, qf_element **ret)
{
    qf_batcher_poller *p = arg;
    return qf_batcher_poll_next(p, qf_task_waker(task), ret);
}

static void free_poller(void *arg)
{
    qf_batcher_poller_free(arg);
}

Test(batch_sparse, spec_171_enqueue_many_rebatches_sparse_rows)
{
    /* spec 165 + 171 (testOneThreadEnqueueMany with a sparse counter):
     * SparseTensor([[0]], [c], [1]) batched by 2, then re-batched with
     * enqueue_many by 10: indices [[b,0]], values c, dense_shape [10,1].
     * The first batch is taken by the second's source with the poll form. */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    sgen g = {.limit = 30, .value = -1};
    qf_batcher *pre = NULL;
    OK(qf_batch(s, sgen_source(&g, NULL), 2, NULL, &pre));
    qf_batcher_poller *p = NULL;
    OK(qf_batcher_poller_new(pre, &p));
    /* the pre-batches' per-example components, as the rebatching declares */
    qf_shape sh[3] = {qf_shape_scalar(), QF_SHAPE(2), qf_shape_scalar()};
    qf_components c = {.n = 3, .dtypes = SGEN_DT, .shapes = sh};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_poll(&c, rebatch_poll, p, &src));
    qf_batch_source_on_free(src, free_poller, p);
    qf_batch_options o = {.enqueue_many = true};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 10, &o, &b));
    started st = start(rt, NULL, s);
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        expect_counter_batch(e, 0, 1, 10, 10 * k, true);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_batcher_free(pre);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

/* A source of sparse examples whose dense shape grows: example i is
 * SparseTensor([[i]], [i], [i+1]). Declared shape given by the test. */
typedef struct grow {
    atomic_long runs;
    long limit;
} grow;

static qf_code grow_produce(void *arg, qf_element **ret)
{
    grow *g = arg;
    long r = atomic_fetch_add(&g->runs, 1);
    if (r >= g->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", g->limit);
    int64_t idx[1] = {r}, v[1] = {r}, dense[1] = {r + 1};
    qf_tensor *t = sparse_of(QF_INT64, 1, 1, idx, v, dense);
    *ret = qf_element_of(1, &t);
    return QF_OK;
}

static void grow_batches(qf_shape declared, qf_shape want_static)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    grow g = {.limit = 6};
    qf_dtype dt = QF_SPARSE;
    qf_components c = {.n = 1, .dtypes = &dt, .shapes = &declared};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_produce(&c, grow_produce, &g, &src));
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 3, NULL, &b)); /* a FIFOQueue: handles have shape [] */
    cr_expect_eq(qf_queue_get_kind(qf_batcher_queue(b)), QF_QUEUE_FIFO);
    qf_shape os = qf_batcher_output_shape(b, 0);
    cr_expect(qf_shape_equal(&os, &want_static), "static shape rank %d", (int)os.rank);
    started st = start(rt, NULL, s);
    for (int k = 0; k < 2; k++) {
        qf_element *e = next_ok(b);
        qf_sparse *sp = sp_at(e, 0);
        cr_expect_eq(qf_sparse_dim(sp, 0), 3);
        cr_expect_eq(qf_sparse_dim(sp, 1), 3 * k + 3, "the largest of the batch");
        cr_assert_eq(qf_sparse_nnz(sp), 3);
        for (int i = 0; i < 3; i++) {
            cr_expect_eq(sp_index(sp, i, 0), i);
            cr_expect_eq(sp_index(sp, i, 1), 3 * k + i);
            cr_expect_eq(sp_i64(sp, i), 3 * k + i);
        }
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch_sparse, spec_171_dense_shapes_take_the_maximum_and_may_be_unknown)
{
    /* spec 171: a batch's dense_shape is [batch] + the largest size of each
     * dimension. The per-example dense shape may leave dimensions (or the
     * rank) unknown even for a FIFOQueue batch (TensorFlow: the queue holds
     * handles of shape [1]). */
    grow_batches(QF_SHAPE(QF_UNKNOWN_DIM), QF_SHAPE(3, QF_UNKNOWN_DIM));
    grow_batches(qf_shape_unknown(), qf_shape_unknown());
}

/* ------------------------------------------------------------- spec 172 */

/* TensorFlow's sparse maybe_batch test input: one enqueue_many example of
 * indices [[0,1],[0,2],[1,0],[1,3]], dense [2,4], values [5,4,7,2] and
 * keep [true, false] (component 1), then the end. */
static qf_code keep_rows_produce(void *arg, qf_element **ret)
{
    atomic_long *runs = arg;
    if (atomic_fetch_add(runs, 1) >= 1)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of 1");
    int64_t idx[8] = {0, 1, 0, 2, 1, 0, 1, 3}, v[4] = {5, 4, 7, 2}, dense[2] = {2, 4};
    bool keep[2] = {true, false};
    qf_tensor *t[2] = {sparse_of(QF_INT64, 4, 2, idx, v, dense),
                       qf_tensor_new_from(QF_BOOL, &(qf_shape){1, {2}}, keep, sizeof(keep))};
    *ret = qf_element_of(2, t);
    return QF_OK;
}

typedef qf_code (*maybe_fn)(qf_scope *, qf_batch_source *const *, size_t, const qf_keep_input *,
                            int64_t, const qf_batch_options *, qf_batcher **);

static qf_code maybe_batch1(qf_scope *s, qf_batch_source *const *src, size_t n,
                            const qf_keep_input *k, int64_t bs, const qf_batch_options *o,
                            qf_batcher **ret)
{
    (void)n;
    return qf_maybe_batch(s, src[0], k, bs, o, ret);
}

static qf_code maybe_shuffle1(qf_scope *s, qf_batch_source *const *src, size_t n,
                              const qf_keep_input *k, int64_t bs, const qf_batch_options *o,
                              qf_batcher **ret)
{
    (void)n;
    return qf_maybe_shuffle_batch(s, src[0], k, bs, o, ret);
}

static void keep_sparse_rows(maybe_fn fn, bool shuffle)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    atomic_long runs = 0;
    qf_dtype dt[2] = {QF_SPARSE, QF_BOOL};
    qf_shape sh[2] = {QF_SHAPE(4), qf_shape_scalar()};
    qf_components c = {.n = 2, .dtypes = dt, .shapes = sh};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_produce(&c, keep_rows_produce, &runs, &src));
    qf_keep_input k = {.kind = QF_KEEP_COMPONENT, .component = 1};
    qf_batch_options o = {.enqueue_many = true};
    if (shuffle) { /* TensorFlow's maybe_shuffle_batch test: capacity 10, min 1 */
        o.capacity = 10;
        o.min_after_dequeue = 1;
    }
    qf_batcher *b = NULL;
    OK(fn(s, &src, 1, &k, 1, &o, &b));
    cr_expect_eq(qf_batcher_num_components(b), 1, "the keep component is not batched");
    started st = start(rt, NULL, s);
    qf_element *e = next_ok(b);
    qf_sparse *sp = sp_at(e, 0);
    cr_assert_eq(qf_sparse_nnz(sp), 2, "only row 0 is kept");
    cr_expect_eq(sp_index(sp, 0, 0), 0);
    cr_expect_eq(sp_index(sp, 0, 1), 1);
    cr_expect_eq(sp_index(sp, 1, 0), 0);
    cr_expect_eq(sp_index(sp, 1, 1), 2);
    cr_expect_eq(sp_i64(sp, 0), 5);
    cr_expect_eq(sp_i64(sp, 1), 4);
    cr_expect_eq(qf_sparse_dim(sp, 0), 1);
    cr_expect_eq(qf_sparse_dim(sp, 1), 4);
    qf_element_free(e);
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch_sparse, spec_172_maybe_variants_keep_only_row_zero_of_a_sparse_input)
{
    /* spec 172, 182: keep [True, False] with enqueue_many keeps only row 0:
     * indices [[0,1],[0,2]], values [5,4], dense_shape [1,4]; for
     * maybe_batch, maybe_batch_join, maybe_shuffle_batch and
     * maybe_shuffle_batch_join */
    keep_sparse_rows(maybe_batch1, false);
    keep_sparse_rows(qf_maybe_batch_join, false);
    keep_sparse_rows(maybe_shuffle1, true);
    keep_sparse_rows(qf_maybe_shuffle_batch_join, true);
}

static bool keep_even(void *arg, const qf_element *ex, int64_t row, size_t source)
{
    (void)arg;
    (void)row;
    (void)source;
    return *(const int64_t *)qf_tensor_cdata(qf_element_get(ex, 0)) % 2 == 0;
}

Test(batch_sparse, spec_172_scalar_keep_skips_sparse_examples)
{
    /* spec 172: a scalar keep_input enqueues or skips each example, its
     * sparse component with it */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    sgen g = {.limit = 20, .value = -1};
    qf_keep_input k = {.kind = QF_KEEP_FN, .fn = keep_even};
    qf_batcher *b = NULL;
    OK(qf_maybe_batch(s, sgen_source(&g, NULL), &k, 5, NULL, &b));
    started st = start(rt, NULL, s);
    for (int kb = 0; kb < 2; kb++) {
        qf_element *e = next_ok(b);
        expect_counter_batch(e, 0, 1, 5, 0, false);
        for (int i = 0; i < 5; i++)
            cr_expect_eq(i64_at(e, 0, i), 10 * kb + 2 * i);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

/* ---------------------------------------------- shuffle and join variants */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

Test(batch_sparse, shuffle_batch_keeps_each_sparse_row_with_its_example)
{
    /* spec 179-180 with a sparse component: 4 threads, 35 examples,
     * capacity 32, min 16, batch 10, smaller final batch: every batch's
     * sparse rows hold their own example's counter, the final batch's
     * dense_shape is [5,2], and 0..34 come out once */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    sgen g = {.limit = 35, .value = -1};
    qf_batch_options o = {.num_threads = 4,
                          .capacity = 32,
                          .min_after_dequeue = 16,
                          .seed = 141421,
                          .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    OK(qf_shuffle_batch(s, sgen_source(&g, NULL), 10, &o, &b));
    qf_shape os = qf_batcher_output_shape(b, 1);
    cr_expect_eq(os.dims[0], QF_UNKNOWN_DIM);
    started st = start(rt, NULL, s);
    int64_t all[35];
    for (int k = 0; k < 4; k++) {
        qf_element *e = next_ok(b);
        int64_t n = k < 3 ? 10 : 5;
        expect_counter_batch(e, 0, 1, n, 0, false);
        for (int64_t i = 0; i < n; i++)
            all[k * 10 + i] = i64_at(e, 0, i);
        qf_element_free(e);
    }
    expect_end(b);
    qsort(all, 35, sizeof(all[0]), cmp_i64);
    for (int i = 0; i < 35; i++)
        cr_expect_eq(all[i], i);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch_sparse, batch_join_and_shuffle_batch_join_carry_sparse_from_every_source)
{
    /* spec 173, 181 with sparse components: a (counter to 20) and b (99,
     * 10 times); every row of every batch pairs with its own counter */
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        qf_runtime *rt = mkrt(2);
        qf_scope *s = mkscope();
        sgen ga = {.limit = 20, .value = -1}, gb = {.limit = 10, .value = 99};
        qf_batch_source *srcs[2] = {sgen_source(&ga, NULL), sgen_source(&gb, NULL)};
        qf_batch_options o = {.capacity = 32, .min_after_dequeue = shuffle ? 16 : 0, .seed = 7};
        qf_batcher *b = NULL;
        if (shuffle)
            OK(qf_shuffle_batch_join(s, srcs, 2, 5, &o, &b));
        else
            OK(qf_batch_join(s, srcs, 2, 5, &o, &b));
        started st = start(rt, NULL, s);
        int64_t a_seen = 0, b_seen = 0, a_sum = 0;
        for (int k = 0; k < 6; k++) {
            qf_element *e = next_ok(b);
            expect_counter_batch(e, 0, 1, 5, 0, false);
            for (int i = 0; i < 5; i++) {
                int64_t c = i64_at(e, 0, i);
                if (c == 99) {
                    b_seen++;
                } else {
                    a_seen++;
                    a_sum += c;
                }
            }
            qf_element_free(e);
        }
        expect_end(b);
        cr_expect_eq(a_seen, 20);
        cr_expect_eq(b_seen, 10);
        cr_expect_eq(a_sum, 19 * 20 / 2);
        join_all(&st);
        qf_batcher_free(b);
        qf_runtime_free(rt);
        qf_scope_free(s);
    }
}

Test(batch_sparse, dynamic_pad_batches_carry_sparse_components_unpadded)
{
    /* spec 167 + 171: a PaddingFIFOQueue batch with a sparse component: the
     * handles need no padding; the stacked dense shape is the maximum */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    grow g = {.limit = 4};
    qf_dtype dt = QF_SPARSE;
    qf_shape sh = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_components c = {.n = 1, .dtypes = &dt, .shapes = &sh};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_produce(&c, grow_produce, &g, &src));
    qf_batch_options o = {.dynamic_pad = true};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 4, &o, &b));
    cr_expect_eq(qf_queue_get_kind(qf_batcher_queue(b)), QF_QUEUE_PADDING_FIFO);
    started st = start(rt, NULL, s);
    qf_element *e = next_ok(b);
    qf_sparse *sp = sp_at(e, 0);
    cr_expect_eq(qf_sparse_dim(sp, 0), 4);
    cr_expect_eq(qf_sparse_dim(sp, 1), 4);
    cr_expect_eq(qf_sparse_nnz(sp), 4);
    qf_element_free(e);
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

/* ---------------------------------------------------------------- errors */

Test(batch_sparse, declarations_that_cannot_batch_are_refused)
{
    qf_scope *s = mkscope();
    sgen g = {.limit = 1, .value = -1};
    qf_batcher *b = NULL;
    /* (a sparse component of rank 0 builds: scalar_sparse_* below; examples
     * that do not fit it fail in the op: examples_that_would_not_stack_*) */
    /* a join of a sparse and a dense source (TensorFlow: "Inconsistent
     * SparseTensors list") */
    qf_dtype dense_dt[3] = {QF_INT64, QF_FLOAT32, QF_STRING};
    qf_shape dsh[3] = {qf_shape_scalar(), QF_SHAPE(2), qf_shape_scalar()};
    qf_components dc = {.n = 3, .dtypes = dense_dt, .shapes = dsh};
    qf_batch_source *srcs[2] = {sgen_source(&g, NULL), NULL};
    OK(qf_batch_source_produce(&dc, sgen_produce, &g, &srcs[1]));
    cr_expect_eq(qf_batch_join(s, srcs, 2, 2, NULL, &b), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "Expected types to be consistent"), "%s",
              qf_last_message());
    cr_expect_null(b);
    qf_queue_runner *rs[2];
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, rs, 2), 0, "nothing was added");
    qf_scope_free(s);
}

/* Sources that go wrong on their second example. */
typedef struct bad {
    atomic_long runs;
    int mode; /* 0: dense shape too big; 1: dtype changes; 2: no sparse tensor;
               * 3: enqueue_many of a rank-1 sparse tensor; 4: a vector where a
               * scalar is declared; 5: rank unknown, a scalar then a vector;
               * 6: enqueue_many of a sparse scalar */
} bad;

static qf_code bad_produce(void *arg, qf_element **ret)
{
    bad *g = arg;
    long r = atomic_fetch_add(&g->runs, 1);
    if (r >= 4)
        return qf_set_error(QF_OUT_OF_RANGE, "done");
    int64_t idx[1] = {0}, dense[1] = {2};
    int64_t iv[1] = {1};
    float fv[1] = {1};
    qf_tensor *t;
    if (g->mode == 6) { /* a scalar has no rows */
        t = sparse_of(QF_INT64, 1, 0, NULL, iv, NULL);
    } else if (g->mode == 5 && r == 0) {
        t = sparse_of(QF_INT64, 1, 0, NULL, iv, NULL);
    } else if (g->mode == 4 || g->mode == 5) {
        t = sparse_of(QF_INT64, 1, 1, idx, iv, dense);
    } else if (g->mode == 3) { /* rank 1 where rows are needed */
        t = sparse_of(QF_INT64, 1, 1, idx, iv, dense);
    } else if (r == 0) {
        t = sparse_of(QF_INT64, 1, 1, idx, iv, dense);
    } else if (g->mode == 0) {
        int64_t big[1] = {3};
        t = sparse_of(QF_INT64, 1, 1, idx, iv, big);
    } else if (g->mode == 1) {
        t = sparse_of(QF_FLOAT32, 1, 1, idx, fv, dense);
    } else {
        t = qf_tensor_new(QF_SPARSE, &(qf_shape){0, {0}}); /* holds NULL */
    }
    *ret = qf_element_of(1, &t);
    return QF_OK;
}

static void bad_examples(int mode, const char *want)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *co = mkcoord();
    bad g = {.mode = mode};
    qf_dtype dt = QF_SPARSE;
    qf_shape sh = mode == 4 ? qf_shape_scalar() : mode == 5 ? qf_shape_unknown() : QF_SHAPE(2);
    qf_components c = {.n = 1, .dtypes = &dt, .shapes = &sh};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_produce(&c, bad_produce, &g, &src));
    qf_batch_options o = {.enqueue_many = mode == 3 || mode == 6};
    qf_batcher *b = NULL;
    OK(qf_batch(s, src, 2, &o, &b));
    started st = start(rt, co, s);
    expect_end(b); /* the op's error stops the pipeline; the queue closes */
    cr_expect_eq(qf_coord_join(co, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), want), "'%s' lacks '%s'", qf_last_message(), want);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(co);
    qf_scope_free(s);
}

Test(batch_sparse, examples_that_would_not_stack_are_op_errors)
{
    bad_examples(0, "dense shape [3] does not fit the declared [2]");
    bad_examples(1, "the first example held int64 values of rank 1");
    bad_examples(2, "holds no sparse tensor");
    bad_examples(3, "Rank of input SparseTensor should be > 1, but saw rank: 1");
    /* sparse scalars (issue 24 item 9): accepted where they fit, refused
     * where they do not */
    bad_examples(4, "dense shape [2] does not fit the declared []");
    bad_examples(5, "the first example held int64 values of rank 0");
    bad_examples(6, "Rank of input SparseTensor should be > 1, but saw rank: 0");
}

Test(batch_sparse, try_next_and_the_poller_restore_sparse_batches_too)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    sgen g = {.limit = 6, .value = -1};
    qf_batch_options o = {.capacity = 8};
    qf_batcher *b = NULL;
    OK(qf_batch(s, sgen_source(&g, NULL), 3, &o, &b));
    started st = start(rt, NULL, s);
    join_all(&st); /* all 6 are in and the queue is closed */
    qf_element *e = NULL;
    OK(qf_batcher_try_next(b, &e));
    expect_counter_batch(e, 0, 1, 3, 0, true);
    qf_element_free(e);
    qf_batcher_poller *p = NULL;
    OK(qf_batcher_poller_new(b, &p));
    qf_waker w;
    qf_waker_init_thread(&w);
    e = NULL;
    OK(qf_batcher_poll_next(p, &w, &e));
    expect_counter_batch(e, 0, 1, 3, 3, true);
    qf_element_free(e);
    cr_expect_eq(qf_batcher_poll_next(p, &w, &e), QF_OUT_OF_RANGE);
    qf_batcher_poller_free(p);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

/* ------------------------------------------- sparse scalars (dense_shape []) */

/* issue 24 item 9. A sparse component declared with dense shape [] takes
 * sparse scalars: example c is (c, SparseTensor([[]], [c], []) when c % 3
 * != 2, else SparseTensor with no entry). A batch of k has rank 1,
 * dense_shape [k] and an entry [b] holding c[b] for every b whose example
 * held one (TensorFlow builds the same batch; qflow used to refuse it). */
typedef struct scgen {
    atomic_long runs;
    long limit;
    long base;
} scgen;

static bool held(int64_t c)
{
    return c % 3 != 2;
}

static qf_code scgen_produce(void *arg, qf_element **ret)
{
    scgen *g = arg;
    long r = atomic_fetch_add(&g->runs, 1);
    if (r >= g->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", g->limit);
    int64_t c = g->base + r;
    qf_tensor *t[2] = {qf_tensor_new_i64(c), held(c) ? sparse_of(QF_INT64, 1, 0, NULL, &c, NULL)
                                                     : sparse_of(QF_INT64, 0, 0, NULL, NULL, NULL)};
    *ret = qf_element_of(2, t);
    return QF_OK;
}

static qf_batch_source *scgen_source(scgen *g)
{
    static const qf_dtype dt[2] = {QF_INT64, QF_SPARSE};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_components c = {.n = 2, .dtypes = dt, .shapes = sh};
    qf_batch_source *s = NULL;
    OK(qf_batch_source_produce(&c, scgen_produce, g, &s));
    return s;
}

/* One batch of sparse scalars: its counters and its rank-1 sparse tensor
 * agree row by row; the counters are added to seen[] (checked once each). */
static int64_t expect_scalar_batch(const qf_element *e, int64_t want_n, bool *seen, int64_t nseen)
{
    const qf_tensor *ct = qf_element_get(e, 0);
    int64_t n = qf_tensor_shape(ct)->dims[0];
    if (want_n >= 0)
        cr_expect_eq(n, want_n);
    qf_sparse *sp = sp_at(e, 1);
    cr_assert_eq(qf_sparse_rank(sp), 1, "a batch of scalars is a vector");
    cr_expect_eq(qf_sparse_dim(sp, 0), n, "dense_shape [k]");
    const qf_shape *is = qf_tensor_shape(qf_sparse_indices(sp));
    cr_expect_eq(is->rank, 2);
    cr_expect_eq(is->dims[1], 1, "indices [nnz, 1]");
    int64_t at = 0;
    for (int64_t b = 0; b < n; b++) {
        int64_t c = i64_at(e, 0, b);
        cr_assert(c >= 0 && c < nseen, "counter %" PRId64, c);
        cr_expect(!seen[c], "counter %" PRId64 " twice", c);
        seen[c] = true;
        if (!held(c))
            continue;
        cr_assert_lt(at, qf_sparse_nnz(sp), "entry of row %" PRId64 " missing", b);
        cr_expect_eq(sp_index(sp, at, 0), b, "entry %" PRId64 " sits at its row", at);
        cr_expect_eq(sp_i64(sp, at), c, "entry %" PRId64 " holds its counter", at);
        at++;
    }
    cr_expect_eq(at, qf_sparse_nnz(sp), "one entry per held scalar, none more");
    return n;
}

typedef enum sckind { SC_BATCH, SC_PAD, SC_MAYBE, SC_JOIN, SC_SHUFFLE, SC_SHUFFLE_JOIN } sckind;

static bool keep_not_seven(void *arg, const qf_element *example, int64_t row, size_t source)
{
    (void)arg, (void)row, (void)source;
    return i64_at(example, 0, 0) % 10 != 7;
}

/* 2 x 23 examples (counters 0..22 and 100..122, one source or a join of
 * two), batches of 5, the last one smaller: every counter arrives once
 * (but the ones maybe_batch drops), every batch's sparse scalars agree
 * with its counters; in order for SC_BATCH and SC_PAD (one task). */
static void scalar_sparse_round_trip(sckind kind)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    scgen g[2] = {{.limit = 23, .base = 0}, {.limit = 23, .base = 100}};
    bool join = kind == SC_JOIN || kind == SC_SHUFFLE_JOIN;
    if (!join)
        g[0].limit = 123; /* 0..122 from one source */
    qf_batch_source *srcs[2] = {scgen_source(&g[0]), join ? scgen_source(&g[1]) : NULL};
    qf_batch_options o = {.allow_smaller_final_batch = true,
                          .dynamic_pad = kind == SC_PAD,
                          .min_after_dequeue = 4,
                          .seed = 7};
    qf_keep_input keep = {.kind = QF_KEEP_FN, .fn = keep_not_seven};
    qf_batcher *b = NULL;
    switch (kind) {
    case SC_BATCH:
    case SC_PAD:
        OK(qf_batch(s, srcs[0], 5, &o, &b));
        break;
    case SC_MAYBE:
        OK(qf_maybe_batch(s, srcs[0], &keep, 5, &o, &b));
        break;
    case SC_JOIN:
        OK(qf_batch_join(s, srcs, 2, 5, &o, &b));
        break;
    case SC_SHUFFLE:
        OK(qf_shuffle_batch(s, srcs[0], 5, &o, &b));
        break;
    case SC_SHUFFLE_JOIN:
        OK(qf_shuffle_batch_join(s, srcs, 2, 5, &o, &b));
        break;
    }
    cr_expect_eq(qf_batcher_dtype(b, 1), QF_SPARSE);
    qf_shape os = qf_batcher_output_shape(b, 1);
    cr_expect_eq(os.rank, 1, "the stacked dense shape of scalars is [k]");
    started st = start(rt, NULL, s);
    bool seen[123] = {false};
    int64_t got = 0, next = 0;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
        int64_t n = expect_scalar_batch(e, -1, seen, 123);
        cr_expect(n == 5 || (n > 0 && n < 5), "batch of %" PRId64, n);
        for (int64_t r = 0; (kind == SC_BATCH || kind == SC_PAD) && r < n; r++)
            cr_expect_eq(i64_at(e, 0, r), next++, "one task keeps the order");
        got += n;
        qf_element_free(e);
    }
    int64_t want = 0;
    for (int64_t c = 0; c < 123; c++) {
        bool made = join ? (c < 23 || c >= 100) : true;
        bool kept = made && (kind != SC_MAYBE || c % 10 != 7);
        want += kept;
        cr_expect_eq(seen[c], kept, "counter %" PRId64, c);
    }
    cr_expect_eq(got, want);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch_sparse, scalar_sparse_batch_round_trips)
{
    scalar_sparse_round_trip(SC_BATCH);
}

Test(batch_sparse, scalar_sparse_padded_batch_round_trips)
{
    scalar_sparse_round_trip(SC_PAD);
}

Test(batch_sparse, scalar_sparse_maybe_batch_round_trips)
{
    scalar_sparse_round_trip(SC_MAYBE);
}

Test(batch_sparse, scalar_sparse_batch_join_round_trips)
{
    scalar_sparse_round_trip(SC_JOIN);
}

Test(batch_sparse, scalar_sparse_shuffle_batch_round_trips)
{
    scalar_sparse_round_trip(SC_SHUFFLE);
}

Test(batch_sparse, scalar_sparse_shuffle_batch_join_round_trips)
{
    scalar_sparse_round_trip(SC_SHUFFLE_JOIN);
}

Test(batch_sparse, scalar_sparse_batch_shape_is_the_batch_size)
{
    /* without allow_smaller_final_batch the stacked shape is [batch_size]
     * before anything runs, and the batches are all full: dense_shape [4] */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    scgen g = {.limit = 8};
    qf_batcher *b = NULL;
    OK(qf_batch(s, scgen_source(&g), 4, NULL, &b));
    qf_shape os = qf_batcher_output_shape(b, 1);
    cr_assert_eq(os.rank, 1);
    cr_expect_eq(os.dims[0], 4);
    started st = start(rt, NULL, s);
    bool seen[8] = {false};
    for (int k = 0; k < 2; k++) {
        qf_element *e = next_ok(b);
        expect_scalar_batch(e, 4, seen, 8);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}
