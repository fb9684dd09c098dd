/* test_batch.c - batch, shuffle_batch, batch_join, shuffle_batch_join and
 * the maybe_* variants, batch sources, pollers, and a whole pipeline
 * (qf_batch.h; spec 161-182).
 *
 * Every test uses a scope of its own. Ordering comes from observable state
 * (batches taken, queue sizes, running-task counts, joins); nothing sleeps
 * to order anything, and every wait has a deadline only a broken run
 * reaches.
 *
 * Skipped, Python-only or optional:
 *   169 (second and third bullets in part) dict keys that are not strings
 *       (1, ("a","b")): C names are strings; the sorted-keys order and the
 *       static shape of a named component are tested;
 *   170 "a list with one tensor returns a single tensor": a C batch is
 *       always an element; shared_name is tested;
 *   171 and the sparse half of 172: in test_batch_sparse.c;
 *   168 "unknown rank": C sources declare shapes; a missing or unknown-rank
 *       declaration gives the same error.
 * The "static shape" checks of 164, 169, 173 and 175 use
 * qf_batcher_output_shape().
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_test_park.h"
#include "qflow.h"
#define QFT_RT_NAME "batch"
#include "qf_test.h"
#include "qf_test_stress.h"

#ifndef QF_TSAN_CRITERION_SHIM_H /* the in-process TSan runner has no timeouts */
TestSuite(batch, .timeout = 240);
#endif

/* ---------------------------------------------------------------- helpers */

static const char *str_at(const qf_element *e, size_t comp, int64_t i)
{
    const char *s = qf_tensor_string(qf_element_get(e, comp), i, NULL);
    cr_assert_not_null(s);
    return s;
}

static int64_t dim(const qf_element *e, size_t comp, int d)
{
    return qf_tensor_shape(qf_element_get(e, comp))->dims[d];
}

/* ------------------------------------------------------------- generators
 *
 * A generator is TensorFlow's counter test input: each run yields
 * (counter, tag) while fewer than `limit` runs happened (the next run is
 * OUT_OF_RANGE). value >= 0 makes a constant instead of the counter; rows
 * > 0 yields `rows` examples per run (enqueue_many); pad makes component 1
 * the tag tiled `counter` times (dynamic_pad, spec 167); keep adds a bool
 * component "counter is even" (keep_input); keep_whole makes that
 * component of an enqueue_many run one scalar, "the run's index is even"
 * (keep or drop the whole run). Thread-safe (one fetch-add).
 */
typedef struct gen {
    atomic_long runs;
    long limit;
    long value;
    const char *tag;
    int rows;
    bool pad, keep, keep_whole;
} gen;

static qf_tensor *str_tensor(int64_t n, bool vector, const char *s)
{
    qf_shape sh = vector ? qf_shape_make(1, (const int64_t[]){n}) : qf_shape_scalar();
    qf_tensor *t = qf_tensor_new(QF_STRING, &sh);
    for (int64_t i = 0; i < (vector ? n : 1); i++)
        qf_tensor_set_string(t, i, s, strlen(s));
    return t;
}

static qf_code gen_produce(void *arg, qf_element **ret)
{
    gen *g = arg;
    long r = atomic_fetch_add(&g->runs, 1);
    if (r >= g->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", g->limit);
    const char *tag = g->tag ? g->tag : "string";
    qf_tensor *t[3];
    size_t n = g->keep ? 3 : 2;
    if (g->rows == 0) {
        long v = g->value >= 0 ? g->value : r;
        t[0] = qf_tensor_new_i64(v);
        t[1] = g->pad ? str_tensor(v, true, tag) : str_tensor(1, false, tag);
        if (g->keep)
            t[2] = qf_tensor_new_bool(v % 2 == 0);
    } else {
        qf_shape sh = qf_shape_make(1, (const int64_t[]){g->rows});
        int64_t v[64];
        bool k[64];
        for (int i = 0; i < g->rows; i++) {
            v[i] = g->value >= 0 ? g->value : r * g->rows + i;
            k[i] = v[i] % 2 == 0;
        }
        t[0] = qf_tensor_new_from(QF_INT64, &sh, v, (size_t)g->rows * sizeof(int64_t));
        t[1] = str_tensor(g->rows, true, tag);
        if (g->keep)
            t[2] = g->keep_whole
                       ? qf_tensor_new_bool(r % 2 == 0)
                       : qf_tensor_new_from(QF_BOOL, &sh, k, (size_t)g->rows * sizeof(bool));
    }
    *ret = qf_element_of(n, t);
    return QF_OK;
}

static const qf_dtype GEN_DT[3] = {QF_INT64, QF_STRING, QF_BOOL};

/* A source over a generator: (int64 [], string [] or [?], bool []). */
static qf_batch_source *gen_source(gen *g)
{
    qf_shape sh[3] = {qf_shape_scalar(), qf_shape_scalar(), qf_shape_scalar()};
    if (g->pad)
        sh[1] = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_components c = {.n = g->keep ? 3 : 2, .dtypes = GEN_DT, .shapes = sh};
    qf_batch_source *s = NULL;
    cr_assert_eq(qf_batch_source_produce(&c, gen_produce, g, &s), QF_OK, "%s", qf_last_message());
    return s;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sort v[0..n) and check it is exactly lo, lo+1, ..., lo+n-1. */
static void expect_exactly_range(int64_t *v, size_t n, int64_t lo)
{
    qsort(v, n, sizeof(*v), cmp_i64);
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(v[i], lo + (int64_t)i, "value %zu is %" PRId64, i, v[i]);
}

/* ---------------------------------------------------------------- batch */

Test(batch, spec_161_batch_builds_a_fifo_queue_one_runner_and_a_gauge)
{
    /* spec 161: FIFOQueue (PaddingFIFOQueue with dynamic_pad); one op
     * registered num_threads times in one QueueRunner; gauge
     * "fraction_of_<capacity>_full" = size / capacity */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 7, .value = -1};
    qf_batch_options o = {.num_threads = 3};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 10, &o, &b), QF_OK, "%s", qf_last_message());
    qf_queue *q = qf_batcher_queue(b);
    cr_expect_eq(qf_queue_get_kind(q), QF_QUEUE_FIFO);
    cr_expect_str_eq(qf_queue_name(q), "batch/fifo_queue");
    cr_expect_eq(qf_queue_capacity(q), 32);
    qf_queue_runner *rs[4];
    cr_assert_eq(qf_scope_get_collection(s, QF_QUEUE_RUNNERS, NULL, rs, 4), 1);
    cr_expect_eq(rs[0], qf_batcher_runner(b));
    cr_expect_eq(qf_queue_runner_num_ops(rs[0]), 3);
    const qf_fill_gauge *gg = qf_batcher_gauge(b);
    cr_expect_str_eq(gg->name, "batch/fraction_of_32_full");
    started st = start(rt, NULL, s);
    join_all(&st); /* 7 examples are in, the queue closed */
    cr_expect_float_eq(qf_batcher_fraction_full(b), 7.0 / 32.0, 1e-12);
    cr_expect_float_eq(qf_fill_gauge_value(gg), 7.0 / 32.0, 1e-12);
    qf_batcher_free(b);
    /* dynamic_pad: a PaddingFIFOQueue */
    gen g2 = {.limit = 1, .value = -1, .pad = true};
    qf_batch_options op = {.dynamic_pad = true, .capacity = 5, .name = "padded"};
    cr_assert_eq(qf_batch(s, gen_source(&g2), 2, &op, &b), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_queue_get_kind(qf_batcher_queue(b)), QF_QUEUE_PADDING_FIFO);
    cr_expect_str_eq(qf_queue_name(qf_batcher_queue(b)), "padded/padding_fifo_queue");
    cr_expect_str_eq(qf_batcher_gauge(b)->name, "padded/fraction_of_5_full");
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_162_one_thread_batches_in_order_then_out_of_range)
{
    /* spec 162: counter stops after 30; batch 10: [0..9], [10..19],
     * [20..29], then OutOfRange; the constant "string" comes back x10 */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 30, .value = -1};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 10, NULL, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        cr_expect_eq(dim(e, 0, 0), 10);
        for (int i = 0; i < 10; i++) {
            cr_expect_eq(i64_at(e, 0, i), k * 10 + i);
            cr_expect_str_eq(str_at(e, 1, i), "string");
        }
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    cr_expect_eq(atomic_load(&g.runs), 31, "the 31st run ended it");
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_163_a_short_remainder_is_never_returned)
{
    /* spec 163: without allow_smaller_final_batch, 35 examples give 3
     * batches; the 5 left are never returned */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 35, .value = -1};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 10, NULL, &b), QF_OK);
    started st = start(rt, NULL, s);
    for (int k = 0; k < 3; k++)
        qf_element_free(next_ok(b));
    expect_end(b);
    cr_expect_eq(qf_queue_size(qf_batcher_queue(b)), 5, "the remainder stays in the queue");
    qf_shape os = qf_batcher_output_shape(b, 0);
    cr_expect_eq(os.rank, 1);
    cr_expect_eq(os.dims[0], 10, "static batch dimension without allow_smaller");
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

static void smaller_final(int threads)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 35, .value = -1};
    qf_batch_options o = {.num_threads = threads, .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 10, &o, &b), QF_OK);
    for (size_t c = 0; c < 2; c++)
        cr_expect_eq(qf_batcher_output_shape(b, c).dims[0], QF_UNKNOWN_DIM,
                     "static first dimension is None");
    started st = start(rt, NULL, s);
    int64_t all[35];
    for (int k = 0; k < 4; k++) {
        qf_element *e = next_ok(b);
        int64_t want = k < 3 ? 10 : 5;
        cr_expect_eq(dim(e, 0, 0), want, "batch %d", k);
        cr_expect_eq(dim(e, 1, 0), want, "every component's first dimension");
        for (int i = 0; i < want; i++) {
            all[k * 10 + i] = i64_at(e, 0, i);
            if (threads == 1)
                cr_expect_eq(all[k * 10 + i], k * 10 + i);
        }
        qf_element_free(e);
    }
    expect_end(b);
    expect_exactly_range(all, 35, 0);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_164_allow_smaller_final_batch_returns_the_last_five)
{
    /* spec 164: 35 examples: 3 full batches, then [30..34], then OutOfRange */
    smaller_final(1);
}

Test(batch, spec_164_with_four_threads_the_final_batch_still_has_five)
{
    /* spec 164: num_threads=4: the final batch has exactly 5, the whole set
     * covers 0..34 */
    smaller_final(4);
}

Test(batch, spec_165_enqueue_many_rebatches_rows)
{
    /* spec 165: the counter pre-batched by 2, re-batched by 10:
     * [0..9], [10..19], [20..29], then OutOfRange */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 15, .value = -1, .rows = 2};
    qf_batch_options o = {.enqueue_many = true};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 10, &o, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        for (int i = 0; i < 10; i++)
            cr_expect_eq(i64_at(e, 0, i), k * 10 + i);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_166_four_threads_give_every_example_once)
{
    /* spec 166: num_threads=4, 30 examples: each batch 10, all 30 values
     * exactly once, then OutOfRange */
    qf_runtime *rt = mkrt(4);
    qf_scope *s = mkscope();
    gen g = {.limit = 30, .value = -1};
    qf_batch_options o = {.num_threads = 4};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 10, &o, &b), QF_OK);
    started st = start(rt, NULL, s);
    cr_expect_eq(st.n, 4, "one task per thread");
    int64_t all[30];
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        cr_expect_eq(dim(e, 0, 0), 10);
        for (int i = 0; i < 10; i++)
            all[k * 10 + i] = i64_at(e, 0, i);
        qf_element_free(e);
    }
    expect_end(b);
    expect_exactly_range(all, 30, 0);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_167_dynamic_pad_pads_to_the_longest_in_each_batch)
{
    /* spec 167: component 1 is "string" tiled counter times; batch i is
     * padded with "" to length 10i+9 */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 30, .value = -1, .pad = true};
    qf_batch_options o = {.dynamic_pad = true};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 10, &o, &b), QF_OK, "%s", qf_last_message());
    qf_shape os = qf_batcher_output_shape(b, 1);
    cr_expect_eq(os.rank, 2);
    cr_expect_eq(os.dims[1], QF_UNKNOWN_DIM, "the padded dimension is not static");
    started st = start(rt, NULL, s);
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        int64_t width = 10 * k + 9;
        cr_expect_eq(dim(e, 1, 0), 10);
        cr_expect_eq(dim(e, 1, 1), width, "batch %d", k);
        for (int i = 0; i < 10; i++) {
            int64_t v = i64_at(e, 0, i);
            cr_expect_eq(v, 10 * k + i);
            for (int64_t j = 0; j < width; j++)
                cr_expect_str_eq(str_at(e, 1, i * width + j), j < v ? "string" : "");
        }
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_168_unknown_rank_and_undefined_shapes_are_refused)
{
    /* spec 168: unknown rank: "Cannot infer Tensor's rank"; without
     * dynamic_pad a not fully defined shape fails building the FIFOQueue */
    qf_scope *s = mkscope();
    gen g = {.limit = 1, .value = -1};
    qf_batcher *b = NULL;
    qf_components c = {.n = 2, .dtypes = GEN_DT, .shapes = NULL};
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_produce(&c, gen_produce, &g, &src), QF_OK);
    cr_expect_eq(qf_batch(s, src, 2, NULL, &b), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "Cannot infer Tensor's rank") != NULL, "%s",
              qf_last_message());
    qf_shape unk[2] = {qf_shape_unknown(), qf_shape_scalar()};
    c.shapes = unk;
    cr_assert_eq(qf_batch_source_produce(&c, gen_produce, &g, &src), QF_OK);
    qf_batch_options pad = {.dynamic_pad = true};
    cr_expect_eq(qf_batch(s, src, 2, &pad, &b), QF_INVALID_ARGUMENT, "also with dynamic_pad");
    cr_expect(strstr(qf_last_message(), "Cannot infer Tensor's rank") != NULL);
    gen gp = {.limit = 1, .value = -1, .pad = true};
    cr_expect_eq(qf_batch(s, gen_source(&gp), 2, NULL, &b), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "fully defined") != NULL, "%s", qf_last_message());
    cr_expect_null(b);
    cr_expect_eq(qf_batch(s, gen_source(&g), 0, NULL, &b), QF_INVALID_ARGUMENT, "batch_size 0");
    cr_expect_eq(qf_batch(s, NULL, 2, NULL, &b), QF_INVALID_ARGUMENT);
    qf_queue_runner *rs[2];
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, rs, 2), 0, "nothing was added");
    qf_scope_free(s);
}

/* Six named int64 scalars {"a":1,"b":2,"c":3,"aa":11,"bb":22,"cc":33}. */
static const char *const DICT_NAMES[] = {"a", "b", "c", "aa", "bb", "cc"};
static const int64_t DICT_VALUES[] = {1, 2, 3, 11, 22, 33};

static qf_code dict_produce(void *arg, qf_element **ret)
{
    atomic_long *runs = arg;
    if (atomic_fetch_add(runs, 1) >= 4)
        return qf_set_error(QF_OUT_OF_RANGE, "done");
    qf_tensor *t[6];
    for (int i = 0; i < 6; i++)
        t[i] = qf_tensor_new_i64(DICT_VALUES[i]);
    qf_element *e = qf_element_of(6, t);
    qf_element_set_names(e, DICT_NAMES); /* a dictionary */
    *ret = e;
    return QF_OK;
}

Test(batch, spec_169_named_components_are_ordered_by_sorted_keys)
{
    /* spec 169: output keys equal input keys; queue components ordered by
     * sorted keys: [1,11,2,22,3,33] */
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    qf_dtype dt[6];
    qf_shape sh[6];
    for (int i = 0; i < 6; i++) {
        dt[i] = QF_INT64;
        sh[i] = qf_shape_scalar();
    }
    qf_components c = {.n = 6, .dtypes = dt, .shapes = sh, .names = DICT_NAMES};
    atomic_long runs = 0;
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_produce(&c, dict_produce, &runs, &src), QF_OK);
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, src, 4, NULL, &b), QF_OK, "%s", qf_last_message());
    static const char *const sorted[] = {"a", "aa", "b", "bb", "c", "cc"};
    static const int64_t flat[] = {1, 11, 2, 22, 3, 33};
    cr_assert_eq(qf_batcher_num_components(b), 6);
    for (size_t i = 0; i < 6; i++)
        cr_expect_str_eq(qf_batcher_component_name(b, i), sorted[i]);
    started st = start(rt, NULL, s);
    qf_element *e = next_ok(b);
    for (size_t i = 0; i < 6; i++) {
        cr_expect_str_eq(qf_element_name(e, i), sorted[i]);
        for (int r = 0; r < 4; r++)
            cr_expect_eq(i64_at(e, i, r), flat[i], "component %zu row %d", i, r);
    }
    cr_expect_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get_by_name(e, "bb")), 22);
    qf_element_free(e);
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_169_static_shape_of_a_named_component)
{
    /* spec 169: batch({"c":[12,12]}, batch_size=8)["c"] has shape (8,2) */
    qf_scope *s = mkscope();
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(2);
    const char *nm[] = {"c"};
    qf_components c = {.n = 1, .dtypes = &dt, .shapes = &sh, .names = nm};
    gen g = {0};
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_produce(&c, gen_produce, &g, &src), QF_OK);
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, src, 8, NULL, &b), QF_OK);
    qf_shape os = qf_batcher_output_shape(b, 0);
    qf_shape want = QF_SHAPE(8, 2);
    cr_expect(qf_shape_equal(&os, &want));
    cr_expect_str_eq(qf_batcher_component_name(b, 0), "c");
    cr_expect_eq(qf_batcher_dtype(b, 0), QF_INT32);
    qf_batcher_free(b);
    qf_scope_free(s);
}

Test(batch, spec_170_shared_name_reaches_the_queue)
{
    /* spec 170: shared_name reaches the queue attribute */
    qf_scope *s = mkscope();
    gen g = {.limit = 1, .value = -1};
    qf_batch_options o = {.shared_name = "SHARED_NAME_XYZ"};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 2, &o, &b), QF_OK);
    cr_expect_str_eq(qf_queue_shared_name(qf_batcher_queue(b)), "SHARED_NAME_XYZ");
    qf_batcher_free(b);
    qf_scope_free(s);
}

/* -------------------------------------------------------------- maybe_batch */

static bool keep_even(void *arg, const qf_element *ex, int64_t row, size_t source)
{
    (void)arg;
    (void)source;
    return i64_at(ex, 0, row) % 2 == 0;
}

typedef qf_code (*maybe_fn)(qf_scope *, qf_batch_source *, const qf_keep_input *, int64_t,
                            const qf_batch_options *, qf_batcher **);

static qf_code maybe_shuffle(qf_scope *s, qf_batch_source *src, const qf_keep_input *k, int64_t bs,
                             const qf_batch_options *o, qf_batcher **ret)
{
    qf_batch_options so = *o;
    so.capacity = 10;
    so.min_after_dequeue = 1;
    so.seed = 7;
    return qf_maybe_shuffle_batch(s, src, k, bs, &so, ret);
}

static qf_code maybe_shuffle_join(qf_scope *s, qf_batch_source *src, const qf_keep_input *k,
                                  int64_t bs, const qf_batch_options *o, qf_batcher **ret)
{
    qf_batch_options so = *o;
    so.capacity = 10;
    so.min_after_dequeue = 1;
    so.seed = 7;
    return qf_maybe_shuffle_batch_join(s, &src, 1, k, bs, &so, ret);
}

static qf_code maybe_join(qf_scope *s, qf_batch_source *src, const qf_keep_input *k, int64_t bs,
                          const qf_batch_options *o, qf_batcher **ret)
{
    return qf_maybe_batch_join(s, &src, 1, k, bs, o, ret);
}

/* 40 examples (20 runs of 2 with many), keep the even ones: 20 values. */
static void keep_evens(maybe_fn fn, bool many, bool by_component)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = many ? 20 : 40, .value = -1, .rows = many ? 2 : 0, .keep = by_component};
    qf_keep_input k = {
        .kind = by_component ? QF_KEEP_COMPONENT : QF_KEEP_FN, .fn = keep_even, .component = 2};
    qf_batch_options o = {.enqueue_many = many};
    qf_batcher *b = NULL;
    cr_assert_eq(fn(s, gen_source(&g), &k, 5, &o, &b), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_batcher_num_components(b), 2, "the keep component is not batched");
    started st = start(rt, NULL, s);
    int64_t all[20];
    for (int kb = 0; kb < 4; kb++) {
        qf_element *e = next_ok(b);
        for (int i = 0; i < 5; i++) {
            all[kb * 5 + i] = i64_at(e, 0, i);
            cr_expect_eq(all[kb * 5 + i] % 2, 0, "every batch is all even");
        }
        qf_element_free(e);
    }
    expect_end(b);
    for (int i = 0; i < 20; i++)
        all[i] /= 2;
    expect_exactly_range(all, 20, 0);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_172_maybe_batch_scalar_keep_skips_examples)
{
    /* spec 172: a scalar keep_input enqueues or skips each example */
    keep_evens(qf_maybe_batch, false, false);
    keep_evens(qf_maybe_batch, false, true);
}

Test(batch, spec_172_maybe_batch_vector_keep_filters_rows)
{
    /* spec 172: with enqueue_many a bool vector filters row by row (keep
     * even counters: every batch is all even) */
    keep_evens(qf_maybe_batch, true, false);
    keep_evens(qf_maybe_batch, true, true);
}

/* 20 runs of 2 rows, counters 0..39; each run's keep_input one scalar
 * (even runs): rows 0, 1, 4, 5, 8, 9, ... in 4 batches of 5, then the end. */
static void keep_whole_runs(maybe_fn fn)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 20, .value = -1, .rows = 2, .keep = true, .keep_whole = true};
    qf_keep_input k = {.kind = QF_KEEP_COMPONENT, .component = 2};
    qf_batch_options o = {.enqueue_many = true};
    qf_batcher *b = NULL;
    cr_assert_eq(fn(s, gen_source(&g), &k, 5, &o, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    int64_t all[20];
    for (int kb = 0; kb < 4; kb++) {
        qf_element *e = next_ok(b);
        for (int i = 0; i < 5; i++) {
            int64_t v = i64_at(e, 0, i);
            cr_expect_eq(v / 2 % 2, 0, "row %lld came from a dropped run", (long long)v);
            all[kb * 5 + i] = v / 4 * 2 + v % 2; /* 0,1,4,5,8,9.. -> 0,1,2,3,4,5.. */
        }
        qf_element_free(e);
    }
    expect_end(b);
    expect_exactly_range(all, 20, 0);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_172_a_scalar_keep_with_enqueue_many_keeps_or_drops_the_whole_batch)
{
    /* spec 172: TensorFlow's KeepInputEnqueueMany tests squeeze the keep
     * flag of a batch to a scalar, which keeps or drops that batch whole */
    keep_whole_runs(qf_maybe_batch);
    keep_whole_runs(maybe_join);
    keep_whole_runs(maybe_shuffle);
    keep_whole_runs(maybe_shuffle_join);
}

Test(batch, spec_172_maybe_batch_join_filters_the_same_way)
{
    /* spec 172 for maybe_batch_join */
    keep_evens(maybe_join, false, true);
    keep_evens(maybe_join, true, false);
}

/* The three ValueErrors of spec 172 (and 182) for one maybe_ variant. */
static void keep_errors(maybe_fn fn)
{
    qf_scope *s = mkscope();
    gen g = {.limit = 1, .value = -1, .keep = true};
    qf_batcher *b = NULL;
    qf_keep_input k = {.kind = QF_KEEP_COMPONENT, .component = 2};
    qf_dtype dt[3] = {QF_INT64, QF_STRING, QF_BOOL};
    qf_batch_source *src = NULL;
    qf_batch_options none = {0}, many = {.enqueue_many = true};

    /* a vector keep_input without enqueue_many */
    qf_shape vec[3] = {qf_shape_scalar(), qf_shape_scalar(), QF_SHAPE(1)};
    qf_components c = {.n = 3, .dtypes = dt, .shapes = vec};
    cr_assert_eq(qf_batch_source_produce(&c, gen_produce, &g, &src), QF_OK);
    cr_expect_eq(fn(s, src, &k, 2, &none, &b), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "`keep_input` cannot be a vector when `enqueue_many=False`.");

    /* rank > 1 */
    cr_assert_eq(qf_batch_source_produce(&c, gen_produce, &g, &src), QF_OK);
    cr_expect_eq(fn(s, src, &k, 2, &many, &b), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "`keep_input` must be 0 or 1 dimensions.");

    /* unknown rank */
    qf_shape unk[3] = {qf_shape_scalar(), qf_shape_scalar(), qf_shape_unknown()};
    c.shapes = unk;
    cr_assert_eq(qf_batch_source_produce(&c, gen_produce, &g, &src), QF_OK);
    cr_expect_eq(fn(s, src, &k, 2, &none, &b), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "`keep_input` dimensions must be known at graph construction.");

    /* not bool; out of range; no function; no keep at all */
    qf_keep_input k0 = {.kind = QF_KEEP_COMPONENT, .component = 0};
    cr_expect_eq(fn(s, gen_source(&g), &k0, 2, &none, &b), QF_INVALID_ARGUMENT);
    qf_keep_input k9 = {.kind = QF_KEEP_COMPONENT, .component = 9};
    cr_expect_eq(fn(s, gen_source(&g), &k9, 2, &none, &b), QF_INVALID_ARGUMENT);
    qf_keep_input kf = {.kind = QF_KEEP_FN};
    cr_expect_eq(fn(s, gen_source(&g), &kf, 2, &none, &b), QF_INVALID_ARGUMENT);
    cr_expect_eq(fn(s, gen_source(&g), NULL, 2, &none, &b), QF_INVALID_ARGUMENT);
    cr_expect_null(b);
    qf_queue_runner *rs[2];
    cr_expect_eq(qf_scope_get_collection(s, NULL, NULL, rs, 2), 0);
    qf_scope_free(s);
}

Test(batch, spec_172_maybe_batch_keep_input_shape_errors)
{
    /* spec 172: the three ValueErrors */
    keep_errors(qf_maybe_batch);
    keep_errors(maybe_join);
}

/* ------------------------------------------------------------- batch_join */

/* Count the a's (their values in order) and b's of batches from `b`. */
typedef struct tally {
    int64_t a[128];
    int na, nb, batches, mixed;
} tally;

static void tally_batch(tally *t, const qf_element *e)
{
    int64_t n = dim(e, 0, 0);
    int has_a = 0, has_b = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *tag = str_at(e, 1, i);
        if (strcmp(tag, "a") == 0) {
            cr_assert_lt(t->na, 128);
            t->a[t->na++] = i64_at(e, 0, i);
            has_a = 1;
        } else {
            cr_expect_str_eq(tag, "b");
            cr_expect_eq(i64_at(e, 0, i), 99);
            t->nb++;
            has_b = 1;
        }
    }
    t->batches++;
    t->mixed += has_a && has_b;
}

/* batch_join of a = (0..na-1, "a") and b = (99, "b") x nb, batch 5. With
 * pad, component 1 is the tag tiled `value` times (dynamic_pad), and rows
 * are told apart by value (a's never reach 99). */
static void join_ab(long na, long nb, bool smaller, bool pad, tally *t, int *ret_last)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen a = {.limit = na, .value = -1, .tag = "a", .pad = pad};
    gen bb = {.limit = nb, .value = 99, .tag = "b", .pad = pad};
    qf_batch_source *srcs[2] = {gen_source(&a), gen_source(&bb)};
    qf_batch_options o = {.allow_smaller_final_batch = smaller, .dynamic_pad = pad};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch_join(s, srcs, 2, 5, &o, &b), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_queue_runner_num_ops(qf_batcher_runner(b)), 2, "one op per source");
    qf_shape os0 = qf_batcher_output_shape(b, 0);
    cr_expect_eq(os0.dims[0], smaller ? QF_UNKNOWN_DIM : 5, "static shapes (5,) or (None,)");
    if (pad) {
        qf_shape os1 = qf_batcher_output_shape(b, 1);
        cr_expect_eq(os1.rank, 2);
        cr_expect_eq(os1.dims[0], QF_UNKNOWN_DIM);
        cr_expect_eq(os1.dims[1], QF_UNKNOWN_DIM, "string component static shape (None,None)");
    }
    started st = start(rt, NULL, s);
    *ret_last = 0;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        *ret_last = (int)dim(e, 0, 0);
        if (pad) {
            for (int64_t i = 0; i < dim(e, 0, 0); i++) {
                int64_t v = i64_at(e, 0, i);
                if (v == 99) {
                    t->nb++;
                } else {
                    cr_assert_lt(t->na, 128);
                    t->a[t->na++] = v;
                }
            }
            t->batches++;
        } else {
            tally_batch(t, e);
        }
        qf_element_free(e);
    }
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_173_batch_join_keeps_each_sources_order)
{
    /* spec 173: a = (0..69, "a"), b = (99, "b") x 90, batch 5: 32 full
     * batches; the a's are exactly 0..69 in order; 90 b's; OutOfRange */
    static tally t;
    memset(&t, 0, sizeof(t));
    int last = 0;
    join_ab(70, 90, false, false, &t, &last);
    cr_expect_eq(t.batches, 32);
    cr_expect_eq(last, 5);
    cr_expect_eq(t.na, 70);
    for (int i = 0; i < t.na; i++)
        cr_expect_eq(t.a[i], i, "a's keep their order");
    cr_expect_eq(t.nb, 90);
}

Test(batch, spec_174_the_queue_closes_only_after_the_last_source)
{
    /* spec 174 (item 131): b keeps filling after a is done */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_dtype dt[2] = {QF_INT64, QF_STRING};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options qo = {
        .capacity = 8, .num_components = 2, .dtypes = dt, .shapes = sh, .name = "gate"};
    qf_queue *gate = NULL;
    cr_assert_eq(qf_fifo_queue_new(&qo, &gate), QF_OK);
    gen a = {.limit = 3, .value = -1, .tag = "a"};
    qf_batch_source *srcs[2] = {gen_source(&a), NULL};
    cr_assert_eq(qf_batch_source_queue(gate, &srcs[1]), QF_OK);
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch_join(s, srcs, 2, 3, NULL, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    qf_element *e = next_ok(b);
    for (int i = 0; i < 3; i++)
        cr_expect_str_eq(str_at(e, 1, i), "a");
    qf_element_free(e);
    /* a's task retires; b's is parked on the empty gate */
    qf_queue_runner *r = qf_batcher_runner(b);
    qf_deadline d = soon();
    while (qf_queue_runner_running(r, rt) != 1)
        cr_assert_not(qf_deadline_passed(d), "a's op never retired");
    cr_expect_not(qf_queue_is_closed(qf_batcher_queue(b)), "b is still running");
    for (int i = 0; i < 3; i++) {
        qf_tensor *t[2] = {qf_tensor_new_i64(100 + i), qf_tensor_new_cstr("b")};
        cr_assert_eq(qf_queue_enqueue(gate, qf_element_of(2, t)), QF_OK);
    }
    e = next_ok(b);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(i64_at(e, 0, i), 100 + i);
    qf_element_free(e);
    qf_queue_close(gate, false);
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(gate);
}

Test(batch, spec_175_batch_join_smaller_final_batch)
{
    /* spec 175: 72 a's and 92 b's: 32 full batches plus a final batch of 4,
     * then OutOfRange; static shapes (None,) */
    static tally t;
    memset(&t, 0, sizeof(t));
    int last = 0;
    join_ab(72, 92, true, false, &t, &last);
    cr_expect_eq(t.batches, 33);
    cr_expect_eq(last, 4);
    cr_expect_eq(t.na, 72);
    cr_expect_eq(t.nb, 92);
}

Test(batch, spec_175_batch_join_dynamic_pad_smaller_final_batch)
{
    /* spec 175: with dynamic_pad the final batch is also 4 and the string
     * component's static shape is (None,None) */
    static tally t;
    memset(&t, 0, sizeof(t));
    int last = 0;
    join_ab(72, 92, true, true, &t, &last);
    cr_expect_eq(t.batches, 33);
    cr_expect_eq(last, 4);
    cr_expect_eq(t.na, 72);
    cr_expect_eq(t.nb, 92);
}

Test(batch, spec_176_join_sources_must_agree)
{
    /* spec 176: different keys: "must have the same keys"; different
     * dtypes: "Expected types to be consistent" */
    qf_scope *s = mkscope();
    qf_dtype dt[2] = {QF_INT64, QF_INT64};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    const char *n1[] = {"x", "y"}, *n2[] = {"x", "z"};
    gen g = {.limit = 1};
    qf_components c1 = {.n = 2, .dtypes = dt, .shapes = sh, .names = n1};
    qf_components c2 = {.n = 2, .dtypes = dt, .shapes = sh, .names = n2};
    qf_batch_source *srcs[2];
    cr_assert_eq(qf_batch_source_produce(&c1, gen_produce, &g, &srcs[0]), QF_OK);
    cr_assert_eq(qf_batch_source_produce(&c2, gen_produce, &g, &srcs[1]), QF_OK);
    qf_batcher *b = NULL;
    cr_expect_eq(qf_batch_join(s, srcs, 2, 2, NULL, &b), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "must have the same keys") != NULL, "%s",
              qf_last_message());
    qf_dtype dt2[2] = {QF_INT64, QF_FLOAT32};
    qf_components c3 = {.n = 2, .dtypes = dt2, .shapes = sh};
    qf_components c4 = {.n = 2, .dtypes = dt, .shapes = sh};
    cr_assert_eq(qf_batch_source_produce(&c3, gen_produce, &g, &srcs[0]), QF_OK);
    cr_assert_eq(qf_batch_source_produce(&c4, gen_produce, &g, &srcs[1]), QF_OK);
    cr_expect_eq(qf_batch_join(s, srcs, 2, 2, NULL, &b), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "Expected types to be consistent") != NULL, "%s",
              qf_last_message());
    cr_expect_eq(qf_batch_join(s, srcs, 0, 2, NULL, &b), QF_INVALID_ARGUMENT);
    cr_expect_null(b);
    qf_scope_free(s);
}

/* ----------------------------------------------------------- shuffle_batch */

Test(batch, spec_177_shuffle_batch_uses_a_random_shuffle_queue)
{
    /* spec 177: RandomShuffleQueue; no dynamic_pad; capacity <= min raises
     * "capacity X must be bigger than min_after_dequeue Y." */
    qf_scope *s = mkscope();
    gen g = {.limit = 1, .value = -1};
    qf_batch_options o = {.capacity = 32, .min_after_dequeue = 16, .seed = 1};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_shuffle_batch(s, gen_source(&g), 4, &o, &b), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_queue_get_kind(qf_batcher_queue(b)), QF_QUEUE_RANDOM_SHUFFLE);
    cr_expect_str_eq(qf_queue_name(qf_batcher_queue(b)), "shuffle_batch/random_shuffle_queue");
    cr_expect_eq(qf_queue_min_after_dequeue(qf_batcher_queue(b)), 16);
    qf_batcher_free(b);
    qf_batch_options bad = {.capacity = 16, .min_after_dequeue = 16};
    cr_expect_eq(qf_shuffle_batch(s, gen_source(&g), 4, &bad, &b), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "capacity 16 must be bigger than min_after_dequeue 16.");
    qf_batch_options pad = {.capacity = 32, .dynamic_pad = true};
    cr_expect_eq(qf_shuffle_batch(s, gen_source(&g), 4, &pad, &b), QF_INVALID_ARGUMENT);
    qf_scope_free(s);
}

Test(batch, spec_178_fraction_over_min_gauge)
{
    /* spec 178: "fraction_over_<min>_of_<capacity-min>_full" =
     * max(0, size-min)/(capacity-min) */
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    gen g = {.limit = 24, .value = -1};
    qf_batch_options o = {.capacity = 32, .min_after_dequeue = 16, .seed = 3};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_shuffle_batch(s, gen_source(&g), 4, &o, &b), QF_OK);
    const qf_fill_gauge *gg = qf_batcher_gauge(b);
    cr_expect_str_eq(gg->name, "shuffle_batch/fraction_over_16_of_16_full");
    cr_expect_float_eq(qf_batcher_fraction_full(b), 0.0, 1e-12);
    started st = start(rt, NULL, s);
    join_all(&st); /* 24 in, closed */
    cr_expect_float_eq(qf_batcher_fraction_full(b), 8.0 / 16.0, 1e-12);
    for (int i = 0; i < 3; i++) /* 12 left: under the minimum */
        qf_element_free(next_ok(b));
    cr_expect_float_eq(qf_batcher_fraction_full(b), 0.0, 1e-12);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

static void shuffle30(int threads, int64_t seed)
{
    qf_runtime *rt = mkrt(threads);
    qf_scope *s = mkscope();
    gen g = {.limit = 30, .value = -1};
    qf_batch_options o = {
        .capacity = 32, .min_after_dequeue = 16, .seed = seed, .num_threads = threads};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_shuffle_batch(s, gen_source(&g), 10, &o, &b), QF_OK);
    started st = start(rt, NULL, s);
    int64_t all[30];
    bool arithmetic = true;
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        cr_expect_eq(dim(e, 0, 0), 10);
        for (int i = 0; i < 10; i++) {
            all[k * 10 + i] = i64_at(e, 0, i);
            arithmetic = arithmetic && all[k * 10 + i] == k * 10 + i;
        }
        qf_element_free(e);
    }
    expect_end(b);
    cr_expect_not(arithmetic, "not in arithmetic order");
    expect_exactly_range(all, 30, 0);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_179_shuffle_batch_covers_everything_once)
{
    /* spec 179: 30 examples, capacity 32, min 16, seed 141421, batch 10:
     * three batches covering 0..29 once, not in order, then OutOfRange (the
     * close lifts min_after_dequeue so all 30 drain) */
    shuffle30(1, 141421);
}

Test(batch, spec_179_shuffle_batch_with_four_threads)
{
    /* spec 179: the same with 4 threads and seed 173205 */
    shuffle30(4, 173205);
}

Test(batch, spec_180_shuffle_batch_smaller_final_batch)
{
    /* spec 180: 35 examples: 3 x 10 plus a final [5]; all once */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 35, .value = -1};
    qf_batch_options o = {
        .capacity = 32, .min_after_dequeue = 16, .seed = 9, .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_shuffle_batch(s, gen_source(&g), 10, &o, &b), QF_OK);
    started st = start(rt, NULL, s);
    int64_t all[35];
    for (int k = 0; k < 4; k++) {
        qf_element *e = next_ok(b);
        int64_t n = dim(e, 0, 0);
        cr_expect_eq(n, k < 3 ? 10 : 5);
        for (int64_t i = 0; i < n; i++)
            all[k * 10 + i] = i64_at(e, 0, i);
        qf_element_free(e);
    }
    expect_end(b);
    expect_exactly_range(all, 35, 0);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

static void shuffle_join_ab(long na, long nb, bool smaller, tally *t, int *ret_last)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen a = {.limit = na, .value = -1, .tag = "a"};
    gen bb = {.limit = nb, .value = 99, .tag = "b"};
    qf_batch_source *srcs[2] = {gen_source(&a), gen_source(&bb)};
    qf_batch_options o = {.capacity = 32,
                          .min_after_dequeue = 16,
                          .seed = 223607,
                          .allow_smaller_final_batch = smaller};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_shuffle_batch_join(s, srcs, 2, 5, &o, &b), QF_OK, "%s", qf_last_message());
    cr_expect_str_eq(qf_batcher_gauge(b)->name, "shuffle_batch_join/fraction_over_16_of_16_full");
    started st = start(rt, NULL, s);
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        *ret_last = (int)dim(e, 0, 0);
        tally_batch(t, e);
        qf_element_free(e);
    }
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, spec_181_shuffle_batch_join_mixes_sources)
{
    /* spec 181: 25 a's and 35 b's, capacity 32, min 16, seed 223607, batch
     * 5: 12 batches, more than one mixes a and b, all a's appear shuffled,
     * 35 b's, then OutOfRange */
    static tally t;
    memset(&t, 0, sizeof(t));
    int last = 0;
    shuffle_join_ab(25, 35, false, &t, &last);
    cr_expect_eq(t.batches, 12);
    cr_expect_gt(t.mixed, 1, "batches mixing a and b: %d", t.mixed);
    cr_expect_eq(t.nb, 35);
    cr_assert_eq(t.na, 25);
    bool in_order = true;
    for (int i = 0; i < 25; i++)
        in_order = in_order && t.a[i] == i;
    cr_expect_not(in_order, "the a's are shuffled");
    expect_exactly_range(t.a, 25, 0);
}

Test(batch, spec_181_shuffle_batch_join_smaller_final_batch)
{
    /* spec 181: 27 a's and 37 b's with allow_smaller_final_batch: the final
     * batch has 4 */
    static tally t;
    memset(&t, 0, sizeof(t));
    int last = 0;
    shuffle_join_ab(27, 37, true, &t, &last);
    cr_expect_eq(t.batches, 13);
    cr_expect_eq(last, 4);
    cr_expect_eq(t.na, 27);
    cr_expect_eq(t.nb, 37);
}

Test(batch, spec_181_shuffle_batch_join_mismatched_keys)
{
    /* spec 181: mismatched dict keys raise */
    qf_scope *s = mkscope();
    qf_dtype dt[1] = {QF_INT64};
    qf_shape sh[1] = {qf_shape_scalar()};
    const char *n1[] = {"x"}, *n2[] = {"y"};
    gen g = {.limit = 1};
    qf_components c1 = {.n = 1, .dtypes = dt, .shapes = sh, .names = n1};
    qf_components c2 = {.n = 1, .dtypes = dt, .shapes = sh, .names = n2};
    qf_batch_source *srcs[2];
    cr_assert_eq(qf_batch_source_produce(&c1, gen_produce, &g, &srcs[0]), QF_OK);
    cr_assert_eq(qf_batch_source_produce(&c2, gen_produce, &g, &srcs[1]), QF_OK);
    qf_batch_options o = {.capacity = 32, .min_after_dequeue = 16};
    qf_batcher *b = NULL;
    cr_expect_eq(qf_shuffle_batch_join(s, srcs, 2, 2, &o, &b), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "must have the same keys") != NULL);
    qf_scope_free(s);
}

Test(batch, spec_182_maybe_shuffle_batch_filters_and_checks_keep)
{
    /* spec 182: maybe_shuffle_batch and maybe_shuffle_batch_join (capacity
     * 10, min 1) filter like maybe_batch and raise the same ValueErrors */
    keep_evens(maybe_shuffle, false, false);
    keep_evens(maybe_shuffle, true, true);
    keep_evens(maybe_shuffle_join, false, true);
    keep_evens(maybe_shuffle_join, true, false);
    keep_errors(maybe_shuffle);
    keep_errors(maybe_shuffle_join);
}

/* ------------------------------------------------------- sources, pollers */

Test(batch, queue_source_batches_a_producer_queue_and_ends_with_it)
{
    /* spec 149 + 161: batch(range_input_producer): the producer's end
     * travels down as OUT_OF_RANGE through the batch queue */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_input_producer_options po = {.num_epochs = 2, .shuffle = QF_SHUFFLE_OFF};
    qf_queue *ints = NULL;
    cr_assert_eq(qf_range_input_producer(s, 6, &po, &ints), QF_OK);
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_queue(ints, &src), QF_OK);
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, src, 4, NULL, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    cr_expect_eq(st.n, 2, "two runners: the producer's and the batch's");
    for (int k = 0; k < 3; k++) {
        qf_element *e = next_ok(b);
        for (int i = 0; i < 4; i++)
            cr_expect_eq(((const int32_t *)qf_tensor_cdata(qf_element_get(e, 0)))[i],
                         (k * 4 + i) % 6);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
    qf_queue_unref(ints);
}

static qf_code double_it(void *arg, qf_element *in, qf_element **ret_out)
{
    (void)arg;
    int64_t v = i64_at(in, 0, 0);
    qf_element_free(in);
    if (v % 3 == 0) { /* drop multiples of 3 */
        *ret_out = NULL;
        return QF_OK;
    }
    qf_tensor *t = qf_tensor_new_i64(2 * v);
    *ret_out = qf_element_of(1, &t);
    return QF_OK;
}

static void free_counter(void *arg)
{
    atomic_int *n = arg;
    atomic_fetch_add(n, 1);
}

Test(batch, map_source_transforms_and_drops_and_its_arg_is_freed_with_the_scope)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = 12, .value = -1};
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_components out = {.n = 1, .dtypes = &dt, .shapes = &sh};
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_map(gen_source(&g), &out, double_it, NULL, &src), QF_OK);
    atomic_int freed = 0;
    qf_batch_source_on_free(src, free_counter, &freed);
    cr_expect_eq(qf_batch_source_components(src)->n, 1);
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, src, 4, NULL, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    static const int64_t want[] = {2, 4, 8, 10, 14, 16, 20, 22};
    for (int k = 0; k < 2; k++) {
        qf_element *e = next_ok(b);
        for (int i = 0; i < 4; i++)
            cr_expect_eq(i64_at(e, 0, i), want[k * 4 + i]);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_batcher_free(b);
    cr_expect_eq(atomic_load(&freed), 0, "the runner still holds the source");
    qf_scope_free(s);
    cr_expect_eq(atomic_load(&freed), 1, "freed with the scope's runner");
    qf_runtime_free(rt);
}

Test(batch, source_from_op_template)
{
    /* a qf_enqueue_op template: PRODUCE with many must match enqueue_many */
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    gen g = {.limit = 4, .value = -1, .rows = 2};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_components c = {.n = 2, .dtypes = GEN_DT, .shapes = sh};
    qf_enqueue_op op = {.kind = QF_OP_PRODUCE, .produce = gen_produce, .arg = &g, .many = true};
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_from_op(&c, &op, &src), QF_OK);
    qf_batcher *b = NULL;
    cr_expect_eq(qf_batch(s, src, 4, NULL, &b), QF_INVALID_ARGUMENT, "many vs enqueue_many");
    cr_assert_eq(qf_batch_source_from_op(&c, &op, &src), QF_OK);
    qf_batch_options o = {.enqueue_many = true};
    cr_assert_eq(qf_batch(s, src, 4, &o, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, NULL, s);
    for (int k = 0; k < 2; k++) {
        qf_element *e = next_ok(b);
        for (int i = 0; i < 4; i++)
            cr_expect_eq(i64_at(e, 0, i), k * 4 + i);
        qf_element_free(e);
    }
    expect_end(b);
    join_all(&st);
    qf_enqueue_op pop = {.kind = QF_OP_POLL};
    cr_expect_eq(qf_batch_source_from_op(&c, &pop, &src), QF_INVALID_ARGUMENT);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, source_errors_reach_the_coordinator_and_stop_the_pipeline)
{
    /* spec 133-134 through a batch: a source yielding the wrong components
     * is an op error; the stop closes the batch queue */
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    gen g = {.limit = 5, .value = -1, .keep = true}; /* yields 3 components */
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_components decl = {.n = 2, .dtypes = GEN_DT, .shapes = sh}; /* declares 2 */
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_produce(&decl, gen_produce, &g, &src), QF_OK);
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, src, 2, NULL, &b), QF_OK);
    started st = start(rt, c, s);
    expect_end(b);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "yielded 3 components") != NULL, "%s", qf_last_message());
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
}

/* A consumer task: takes batches with the poll form until the end. */
typedef struct consumer {
    qf_batcher_poller *p;
    int64_t sum;
    int batches;
    qf_code end;
} consumer;

static qf_code consume_task(qf_task *t, void *arg)
{
    consumer *c = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_poll_next(c->p, qf_task_waker(t), &e);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc != QF_OK) {
            c->end = rc;
            return QF_OK;
        }
        for (int64_t i = 0; i < dim(e, 0, 0); i++)
            c->sum += i64_at(e, 0, i);
        c->batches++;
        qf_element_free(e);
    }
}

static void poller_run(bool smaller, bool padded, int64_t n_examples, int64_t *ret_sum,
                       int *ret_batches)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = n_examples, .value = -1, .pad = padded};
    qf_batch_options o = {
        .capacity = 4, .allow_smaller_final_batch = smaller, .dynamic_pad = padded};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 3, &o, &b), QF_OK, "%s", qf_last_message());
    consumer c = {0};
    cr_assert_eq(qf_batcher_poller_new(b, &c.p), QF_OK);
    qf_task *ct = NULL;
    qf_task_options to = {.name = "consumer"};
    cr_assert_eq(qf_task_spawn(rt, consume_task, &c, &to, &ct), QF_OK);
    started st = start(rt, NULL, s);
    cr_assert_eq(qf_task_join(ct, soon(), NULL), QF_OK);
    cr_expect_eq(c.end, QF_OUT_OF_RANGE);
    *ret_sum = c.sum;
    *ret_batches = c.batches;
    qf_task_unref(ct);
    join_all(&st);
    qf_batcher_poller_free(c.p);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, poller_takes_batches_from_a_task_without_blocking_a_worker)
{
    /* spec 163-164 through the poll form, with a capacity (4) above the
     * batch (3) so consumer and producer hand off through parks */
    int64_t sum;
    int n;
    poller_run(false, false, 20, &sum, &n); /* 6 batches; 18,19 dropped */
    cr_expect_eq(n, 6);
    cr_expect_eq(sum, 17 * 18 / 2);
    poller_run(true, false, 20, &sum, &n); /* plus [18,19] */
    cr_expect_eq(n, 7);
    cr_expect_eq(sum, 19 * 20 / 2);
    poller_run(true, true, 20, &sum, &n); /* padded stacking */
    cr_expect_eq(n, 7);
    cr_expect_eq(sum, 19 * 20 / 2);
}

/* ------------------------------------------- pollers at the end of data
 *
 * A batch over a queue source the test fills by hand, so what each poller
 * sees is decided by observable state (queue sizes, closed), not timing. */
typedef struct handfed {
    qf_runtime *rt;
    qf_scope *s;
    qf_queue *in;
    qf_batcher *b;
    started st;
} handfed;

static void handfed_make(handfed *h, int64_t batch, bool smaller)
{
    h->rt = mkrt(2);
    h->s = mkscope();
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options qo = {.capacity = 64, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    cr_assert_eq(qf_fifo_queue_new(&qo, &h->in), QF_OK);
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_queue(h->in, &src), QF_OK);
    qf_batch_options o = {.capacity = 64, .allow_smaller_final_batch = smaller};
    cr_assert_eq(qf_batch(h->s, src, batch, &o, &h->b), QF_OK, "%s", qf_last_message());
    h->st = start(h->rt, NULL, h->s);
}

/* Put values [from, to) into the input; close it when `close`; then wait
 * until the batch queue holds `size` examples (and is closed when `close`:
 * the runner closes it once its source ended). */
static void handfed_feed(handfed *h, int64_t from, int64_t to, bool close, int64_t size)
{
    for (int64_t v = from; v < to; v++)
        cr_assert_eq(
            qf_queue_enqueue(h->in, qf_element_of(1, (qf_tensor *[]){qf_tensor_new_i64(v)})),
            QF_OK);
    if (close)
        cr_assert_eq(qf_queue_close(h->in, false), QF_OK);
    qf_queue *bq = qf_batcher_queue(h->b);
    qf_deadline end = soon();
    while (qf_queue_size(bq) != size || (close && !qf_queue_is_closed(bq))) {
        cr_assert(!qf_deadline_passed(end), "batch queue at %lld, closed %d",
                  (long long)qf_queue_size(bq), qf_queue_is_closed(bq));
        qft_nap();
    }
}

static void handfed_free(handfed *h)
{
    join_all(&h->st);
    qf_batcher_free(h->b);
    qf_runtime_free(h->rt);
    qf_scope_free(h->s);
    qf_queue_unref(h->in);
}

/* One poll from the test thread; a waker still registered by the last
 * poll is waited for first (every test below ends with a close, which
 * wakes it). */
static qf_code poll_once(qf_batcher_poller *p, qf_waker *w, qf_element **e)
{
    if (qf_waker_state(w) != QF_WAKER_IDLE) {
        cr_assert_eq(qf_waker_wait_until(w, soon()), QF_OK, "a parked poller was never woken");
        qf_waker_init_thread(w);
    }
    *e = NULL;
    return qf_batcher_poll_next(p, w, e);
}

static void expect_values(qf_element *e, int64_t from, int64_t n)
{
    cr_assert_not_null(e);
    cr_expect_eq(dim(e, 0, 0), n);
    for (int64_t i = 0; i < n && i < dim(e, 0, 0); i++)
        cr_expect_eq(i64_at(e, 0, i), from + i, "row %lld", (long long)i);
    qf_element_free(e);
}

Test(batch, spec_163_a_batch_begun_by_one_poller_is_finished_by_another)
{
    /* The keep_input pattern's loss: pollers gathered a batch each, so the
     * end of the data (40 rows in batches of 4) could end as 3 rows held by
     * one poller and 1 by another, and both were dropped. Pollers of one
     * batcher now share the batch in progress. */
    handfed h;
    handfed_make(&h, 4, false);
    qf_batcher_poller *a = NULL, *b = NULL;
    cr_assert_eq(qf_batcher_poller_new(h.b, &a), QF_OK);
    cr_assert_eq(qf_batcher_poller_new(h.b, &b), QF_OK);
    qf_waker wa, wb;
    qf_waker_init_thread(&wa);
    qf_waker_init_thread(&wb);
    qf_element *e;
    handfed_feed(&h, 0, 3, false, 3);
    cr_expect_eq(poll_once(a, &wa, &e), QF_PENDING, "3 of 4: a waits");
    handfed_feed(&h, 3, 4, true, 1);
    cr_assert_eq(poll_once(b, &wb, &e), QF_OK, "b finishes the batch a began: %s",
                 qf_last_message());
    expect_values(e, 0, 4);
    cr_expect_eq(poll_once(a, &wa, &e), QF_OUT_OF_RANGE);
    cr_expect_eq(poll_once(b, &wb, &e), QF_OUT_OF_RANGE);
    qf_batcher_poller_free(a);
    qf_batcher_poller_free(b);
    handfed_free(&h);
}

Test(batch, spec_163_pollers_leave_fewer_than_batch_size_for_the_whole_batcher)
{
    /* 10 rows, batch 4, three pollers taking turns: two batches, and the 2
     * rows left over are left over once (not up to 3 per poller) */
    handfed h;
    handfed_make(&h, 4, false);
    qf_batcher_poller *p[3];
    qf_waker w[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(qf_batcher_poller_new(h.b, &p[i]), QF_OK);
        qf_waker_init_thread(&w[i]);
    }
    qf_element *e;
    int64_t next = 0;
    for (int i = 0; i < 3; i++) { /* one row each: all three hold a part */
        handfed_feed(&h, next, next + 1, false, 1);
        next++;
        cr_expect_eq(poll_once(p[i], &w[i], &e), QF_PENDING);
    }
    handfed_feed(&h, next, 10, true, 7);
    cr_assert_eq(poll_once(p[2], &w[2], &e), QF_OK, "%s", qf_last_message());
    expect_values(e, 0, 4);
    cr_assert_eq(poll_once(p[0], &w[0], &e), QF_OK, "%s", qf_last_message());
    expect_values(e, 4, 4);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(poll_once(p[i], &w[i], &e), QF_OUT_OF_RANGE, "poller %d", i);
    expect_end(h.b); /* the thread form sees the same end */
    for (int i = 0; i < 3; i++)
        qf_batcher_poller_free(p[i]);
    handfed_free(&h);
}

Test(batch, spec_164_pollers_return_one_smaller_final_batch)
{
    handfed h;
    handfed_make(&h, 4, true);
    qf_batcher_poller *p[2];
    qf_waker w[2];
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(qf_batcher_poller_new(h.b, &p[i]), QF_OK);
        qf_waker_init_thread(&w[i]);
    }
    qf_element *e;
    handfed_feed(&h, 0, 1, false, 1);
    cr_expect_eq(poll_once(p[0], &w[0], &e), QF_PENDING);
    handfed_feed(&h, 1, 2, false, 1);
    cr_expect_eq(poll_once(p[1], &w[1], &e), QF_PENDING);
    handfed_feed(&h, 2, 6, true, 4);
    cr_assert_eq(poll_once(p[0], &w[0], &e), QF_OK, "%s", qf_last_message());
    expect_values(e, 0, 4);
    cr_assert_eq(poll_once(p[1], &w[1], &e), QF_OK, "%s", qf_last_message());
    expect_values(e, 4, 2); /* [4, 5]: the one short batch */
    cr_expect_eq(poll_once(p[0], &w[0], &e), QF_OUT_OF_RANGE);
    cr_expect_eq(poll_once(p[1], &w[1], &e), QF_OUT_OF_RANGE);
    for (int i = 0; i < 2; i++)
        qf_batcher_poller_free(p[i]);
    handfed_free(&h);
}

/* A poller whose batch in progress is empty and whose queue holds a whole
 * batch takes it in one take (qf_batcher.c, poll_whole_batch()): the
 * queue loses batch_size examples at once, in order; at the end, a short
 * remainder is returned whole with allow_smaller_final_batch (spec 164)
 * and never without it (spec 163), for the thread form too. */
/* A poller of h's batcher, and w made ready for it. */
static qf_batcher_poller *handfed_poller(handfed *h, qf_waker *w)
{
    qf_batcher_poller *p = NULL;
    cr_assert_eq(qf_batcher_poller_new(h->b, &p), QF_OK);
    qf_waker_init_thread(w);
    return p;
}

/* The end of a test of one poller: the thread form sees the end too. */
static void handfed_end(handfed *h, qf_batcher_poller *p)
{
    expect_end(h->b);
    qf_batcher_poller_free(p);
    handfed_free(h);
}

Test(batch, poller_takes_a_whole_batch_in_one_take)
{
    handfed h;
    handfed_make(&h, 4, false);
    qf_waker w;
    qf_batcher_poller *p = handfed_poller(&h, &w);
    qf_element *e;
    qf_queue *bq = qf_batcher_queue(h.b);
    handfed_feed(&h, 0, 8, false, 8);
    cr_assert_eq(poll_once(p, &w, &e), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_queue_size(bq), 4, "one take of the first 4");
    expect_values(e, 0, 4);
    cr_assert_eq(poll_once(p, &w, &e), QF_OK, "%s", qf_last_message());
    cr_expect_eq(qf_queue_size(bq), 0);
    expect_values(e, 4, 4);
    handfed_feed(&h, 8, 10, true, 2);
    cr_expect_eq(poll_once(p, &w, &e), QF_OUT_OF_RANGE, "2 of 4 at the end: never returned");
    cr_expect_null(e);
    cr_expect_eq(poll_once(p, &w, &e), QF_OUT_OF_RANGE);
    handfed_end(&h, p);
}

Test(batch, poller_takes_a_short_final_batch_whole)
{
    handfed h;
    handfed_make(&h, 4, true);
    qf_waker w;
    qf_batcher_poller *p = handfed_poller(&h, &w);
    qf_element *e;
    handfed_feed(&h, 0, 6, true, 6);
    cr_assert_eq(poll_once(p, &w, &e), QF_OK, "%s", qf_last_message());
    expect_values(e, 0, 4);
    cr_assert_eq(poll_once(p, &w, &e), QF_OK, "%s", qf_last_message());
    expect_values(e, 4, 2); /* [4, 5]: the one short batch */
    cr_expect_eq(poll_once(p, &w, &e), QF_OUT_OF_RANGE);
    handfed_end(&h, p);
}

Test(batch, spec_163_the_thread_form_finishes_a_batch_a_poller_began)
{
    handfed h;
    handfed_make(&h, 4, false);
    qf_batcher_poller *p = NULL;
    cr_assert_eq(qf_batcher_poller_new(h.b, &p), QF_OK);
    qf_waker w;
    qf_waker_init_thread(&w);
    qf_element *e;
    handfed_feed(&h, 0, 3, false, 3);
    cr_expect_eq(poll_once(p, &w, &e), QF_PENDING);
    qf_batcher_poller_free(p); /* the batch in progress is the batcher's */
    handfed_feed(&h, 3, 5, true, 2);
    expect_values(next_ok(h.b), 0, 4);
    expect_end(h.b); /* [4] is left over, as TensorFlow leaves it */
    handfed_free(&h);
}

Test(batch, try_next_and_blocking_calls_inside_a_task)
{
    qf_runtime *rt = mkrt(1);
    qf_scope *s = mkscope();
    gen g = {.limit = 5, .value = -1};
    qf_batch_options o = {.allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 4, &o, &b), QF_OK);
    qf_element *e = NULL;
    cr_expect_eq(qf_batcher_try_next(b, &e), QF_UNAVAILABLE, "nothing yet");
    cr_expect_eq(qf_batcher_next_until(b, qf_deadline_in_s(0.01), &e), QF_DEADLINE_EXCEEDED);
    started st = start(rt, NULL, s);
    join_all(&st); /* 5 in, closed */
    cr_assert_eq(qf_batcher_try_next(b, &e), QF_OK);
    cr_expect_eq(dim(e, 0, 0), 4);
    qf_element_free(e);
    cr_assert_eq(qf_batcher_try_next(b, &e), QF_OK, "the smaller final batch");
    cr_expect_eq(dim(e, 0, 0), 1);
    qf_element_free(e);
    cr_expect_eq(qf_batcher_try_next(b, &e), QF_OUT_OF_RANGE);
    cr_expect_eq(qf_batcher_next(NULL, &e), QF_INVALID_ARGUMENT);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

/* ---------------------------------------------------- the whole pipeline */

typedef struct tmpdir {
    char path[64];
    char files[4][96];
    int n;
} tmpdir;

static void write_files(tmpdir *d, int nfiles, int nlines)
{
    snprintf(d->path, sizeof(d->path), "/tmp/qf_batch_XXXXXX");
    cr_assert_not_null(mkdtemp(d->path), "mkdtemp: %s", strerror(errno));
    d->n = nfiles;
    for (int f = 0; f < nfiles; f++) {
        snprintf(d->files[f], sizeof(d->files[f]), "%s/f%d.txt", d->path, f);
        FILE *fp = fopen(d->files[f], "w");
        cr_assert_not_null(fp);
        for (int l = 0; l < nlines; l++)
            fprintf(fp, "%d: %d\n", f, l);
        fclose(fp);
    }
}

static void remove_files(tmpdir *d)
{
    for (int f = 0; f < d->n; f++)
        unlink(d->files[f]);
    rmdir(d->path);
}

static void pipeline(bool one_reader, int threads)
{
    /* string_input_producer over files -> TextLineReader source ->
     * shuffle_batch -> a consumer with a Coordinator, ending with
     * OUT_OF_RANGE after num_epochs (spec 149, 152, 177-180, 183, 190) */
    enum { FILES = 3, LINES = 5, EPOCHS = 2, BATCH = 4 };
    tmpdir d;
    write_files(&d, FILES, LINES);
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    const char *names[FILES];
    for (int f = 0; f < FILES; f++)
        names[f] = d.files[f];
    qf_input_producer_options po = {.num_epochs = EPOCHS, .seed = 17};
    qf_queue *files = NULL;
    cr_assert_eq(qf_string_input_producer(s, names, FILES, &po, &files), QF_OK);
    qf_batch_source *src = NULL;
    if (one_reader) {
        qf_reader *r = NULL;
        cr_assert_eq(qf_text_line_reader_new(0, &r), QF_OK);
        cr_assert_eq(qf_batch_source_reader(r, files, &src), QF_OK);
    } else {
        qf_reader_options ro = {.kind = QF_READER_TEXT_LINE};
        cr_assert_eq(qf_batch_source_reader_options(&ro, files, &src), QF_OK);
    }
    qf_batch_options bo = {.capacity = 20,
                           .min_after_dequeue = 5,
                           .seed = 3,
                           .num_threads = threads,
                           .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_shuffle_batch(s, src, BATCH, &bo, &b), QF_OK, "%s", qf_last_message());
    started st = start(rt, c, s);
    int seen[FILES][LINES] = {{0}};
    int total = 0, batches = 0;
    qf_code rc;
    while (!qf_coord_should_stop(c)) {
        qf_element *e = NULL;
        rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE) {
            qf_coord_request_stop(c, qf_status_new(rc, "%s", qf_last_message()));
            break;
        }
        cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
        batches++;
        for (int64_t i = 0; i < dim(e, 0, 0); i++) {
            int f = -1, l = -1, kf = -1, kl = -1;
            cr_assert_eq(sscanf(str_at(e, 1, i), "%d: %d", &f, &l), 2);
            const char *key = str_at(e, 0, i);
            const char *colon = strrchr(key, ':');
            cr_assert_not_null(colon);
            kl = atoi(colon + 1);
            for (int j = 0; j < FILES; j++)
                if (strncmp(key, d.files[j], strlen(d.files[j])) == 0)
                    kf = j;
            cr_expect_eq(kf, f, "key %s names the file of value %s", key, str_at(e, 1, i));
            cr_expect_eq(kl, l + 1, "keys count lines from 1");
            seen[f][l]++;
            total++;
        }
        qf_element_free(e);
    }
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    cr_expect_eq(total, FILES * LINES * EPOCHS);
    cr_expect_eq(batches, (FILES * LINES * EPOCHS + BATCH - 1) / BATCH);
    for (int f = 0; f < FILES; f++)
        for (int l = 0; l < LINES; l++)
            cr_expect_eq(seen[f][l], EPOCHS, "line %d of file %d", l, f);
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(files);
    remove_files(&d);
}

Test(batch, pipeline_files_reader_shuffle_batch_coordinator)
{
    pipeline(true, 1);
}

Test(batch, pipeline_with_three_readers)
{
    pipeline(false, 3);
}

Test(batch, one_reader_cannot_feed_several_tasks)
{
    qf_scope *s = mkscope();
    const char *names[] = {"x"};
    qf_queue *files = NULL;
    cr_assert_eq(qf_string_input_producer(s, names, 1, NULL, &files), QF_OK);
    qf_reader *r = NULL;
    cr_assert_eq(qf_identity_reader_new(&r), QF_OK);
    qf_batch_source *src = NULL;
    cr_assert_eq(qf_batch_source_reader(r, files, &src), QF_OK);
    qf_batch_options o = {.num_threads = 2};
    qf_batcher *b = NULL;
    cr_expect_eq(qf_batch(s, src, 2, &o, &b), QF_INVALID_ARGUMENT);
    qf_reader_options bad = {.kind = QF_READER_FIXED_LENGTH_RECORD, .record_bytes = 0};
    cr_expect_eq(qf_batch_source_reader_options(&bad, files, &src), QF_INVALID_ARGUMENT);
    qf_queue_unref(files);
    qf_scope_free(s);
}

/* ------------------------------------------------------------- concurrency */

typedef struct taker {
    qf_batcher *b;
    int64_t *seen; /* indexed by value */
    atomic_long *count;
} taker;

static void *take_batches(void *arg)
{
    taker *t = arg;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(t->b, soon(), &e);
        if (rc != QF_OK)
            return (void *)(intptr_t)rc;
        for (int64_t i = 0; i < dim(e, 0, 0); i++) {
            int64_t v = i64_at(e, 0, i);
            atomic_fetch_add(t->count, 1);
            __atomic_fetch_add(&t->seen[v], 1, __ATOMIC_RELAXED);
        }
        qf_element_free(e);
    }
}

Test(batch, four_consumers_and_four_producer_tasks_see_every_example_once)
{
    /* spec 164 + 166 under contention: 4 enqueue tasks, 4 consumer threads
     * calling next at once; every example arrives exactly once */
    long n = qft_stress_scale(20000, 1);
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen g = {.limit = n, .value = -1};
    qf_batch_options o = {.num_threads = 4, .capacity = 16, .allow_smaller_final_batch = true};
    qf_batcher *b = NULL;
    cr_assert_eq(qf_batch(s, gen_source(&g), 7, &o, &b), QF_OK);
    int64_t *seen = calloc((size_t)n, sizeof(*seen));
    atomic_long count = 0;
    taker t = {.b = b, .seen = seen, .count = &count};
    started st = start(rt, NULL, s);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, take_batches, &t);
    for (int i = 0; i < 4; i++) {
        void *rc = NULL;
        pthread_join(th[i], &rc);
        cr_expect_eq((qf_code)(intptr_t)rc, QF_OUT_OF_RANGE, "consumer %d ended with %s", i,
                     qf_code_name((int)(intptr_t)rc));
    }
    cr_expect_eq(atomic_load(&count), n);
    for (long v = 0; v < n; v++)
        cr_expect_eq(seen[v], 1, "value %ld seen %" PRId64 " times", v, seen[v]);
    join_all(&st);
    free(seen);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_scope_free(s);
}

Test(batch, many_pipelines_share_two_workers)
{
    /* DESIGN: runners are tasks; many producer -> batch pipelines on two
     * workers all finish, each in order */
    long pipes = qft_stress_scale(200, 1);
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    gen *gs = calloc((size_t)pipes, sizeof(*gs));
    qf_batcher **bs = calloc((size_t)pipes, sizeof(*bs));
    for (long i = 0; i < pipes; i++) {
        gs[i].limit = 50;
        gs[i].value = -1;
        qf_batch_options o = {.capacity = 8};
        cr_assert_eq(qf_batch(s, gen_source(&gs[i]), 5, &o, &bs[i]), QF_OK);
    }
    started st = start(rt, NULL, s);
    cr_expect_eq((long)st.n, pipes);
    for (int k = 0; k < 10; k++) /* round-robin: every pipeline advances */
        for (long i = 0; i < pipes; i++) {
            qf_element *e = next_ok(bs[i]);
            for (int j = 0; j < 5; j++)
                cr_expect_eq(i64_at(e, 0, j), k * 5 + j);
            qf_element_free(e);
        }
    for (long i = 0; i < pipes; i++) {
        expect_end(bs[i]);
        qf_batcher_free(bs[i]);
    }
    join_all(&st);
    free(bs);
    free(gs);
    qf_runtime_free(rt);
    qf_scope_free(s);
}
