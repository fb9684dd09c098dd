/* test_padding_queue.c - PaddingFIFOQueue (spec 85-96 of
 * docs/semantics.md), and the FIFO behaviours it must keep
 * with fully defined shapes (spec 92 repeats items 43-62 for it).
 *
 * Skipped (Python only or not expressible in the C API):
 *   - 85, second half: "a flat list such as (3,2) or [None] is rejected" is
 *     about Python's shape-list parsing; qflow takes one qf_shape per
 *     component, so there is nothing to mis-parse.
 *   - 87 is about the graph attribute proto; its C counterpart (an unknown
 *     dimension is stored as -1, QF_UNKNOWN_DIM) is tested.
 *   - from 92: 61 (a count produced by another graph op) and 59 (qflow's
 *     plain close takes effect at once, a documented difference tested for
 *     the FIFO queue in test_queue.c).
 *   - 95: qflow deliberately says "PaddingFIFOQueue" in every message (see
 *     qf_padding_queue.c); the substrings TensorFlow's tests match are kept.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qf_test_park.h"
#include "qflow.h"

#define UNK QF_UNKNOWN_DIM

/* ---------------------------------------------------------------- helpers */

/* Let the watched thread block first: wait until it is parked on q (or
 * has finished). No assertion depends on it; it makes the blocking path
 * the one exercised. */
static void until_parked(int tid, const qf_queue *q, const _Atomic bool *done)
{
    qft_wait_parked(tid, q, 4096, done, 10 * 1000000000LL);
}

static qf_queue *mkq(int64_t cap, size_t n, const qf_dtype *dts, const qf_shape *shs,
                     const char *name)
{
    qf_queue_options o = {
        .capacity = cap, .num_components = n, .dtypes = dts, .shapes = shs, .name = name};
    qf_queue *q = NULL;
    qf_code rc = qf_padding_fifo_queue_new(&o, &q);
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
    cr_assert_not_null(q);
    return q;
}

/* One int32 component of shape `sh`. */
static qf_queue *mkq_i32(int64_t cap, qf_shape sh)
{
    qf_dtype dt = QF_INT32;
    return mkq(cap, 1, &dt, &sh, "pq");
}

static qf_tensor *ti32(qf_shape sh, const int32_t *v)
{
    qf_tensor *t =
        qf_tensor_new_from(QF_INT32, &sh, v, (size_t)qf_shape_num_elements(&sh) * sizeof(int32_t));
    cr_assert_not_null(t, "%s", qf_last_message());
    return t;
}

static qf_tensor *tstrs(size_t n, const char *const *s)
{
    qf_shape sh = QF_SHAPE((int64_t)n);
    qf_tensor *t = qf_tensor_new(QF_STRING, &sh);
    cr_assert_not_null(t);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(qf_tensor_set_string(t, (int64_t)i, s[i], strlen(s[i])), QF_OK);
    return t;
}

static qf_element *el1(qf_tensor *a)
{
    qf_element *e = qf_element_of(1, &a);
    cr_assert_not_null(e);
    return e;
}

static qf_element *el2(qf_tensor *a, qf_tensor *b)
{
    qf_tensor *ts[2] = {a, b};
    qf_element *e = qf_element_of(2, ts);
    cr_assert_not_null(e);
    return e;
}

static void enq(qf_queue *q, qf_element *e)
{
    qf_code rc = qf_queue_enqueue(q, e);
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
}

/* An int32 vector [v...] of length n. */
static qf_tensor *vec(size_t n, const int32_t *v)
{
    return ti32(QF_SHAPE((int64_t)n), v);
}

static void enq_vec(qf_queue *q, size_t n, const int32_t *v)
{
    enq(q, el1(vec(n, v)));
}

static bool has_shape(const qf_tensor *t, qf_shape want)
{
    return qf_shape_equal(qf_tensor_shape(t), &want);
}

static const int32_t *i32s(const qf_tensor *t)
{
    return qf_tensor_cdata(t);
}

static void expect_str_at(const qf_tensor *t, int64_t i, const char *want)
{
    size_t len = 0;
    const char *s = qf_tensor_string(t, i, &len);
    cr_assert(s || len == 0);
    cr_expect(len == strlen(want) && memcmp(s ? s : "", want, len) == 0,
              "string %lld is '%.*s', expected '%s'", (long long)i, (int)len, s ? s : "", want);
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

/* Scalar float queue values (spec 92 repeats). */
static void enq_f(qf_queue *q, float v)
{
    enq(q, el1(qf_tensor_new_f32(v)));
}

static float deq_f(qf_queue *q)
{
    qf_element *e = NULL;
    qf_code rc = qf_queue_dequeue(q, &e);
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
    float v = *(const float *)qf_tensor_cdata(qf_element_get(e, 0));
    qf_element_free(e);
    return v;
}

static qf_queue *mkq_f(int64_t cap)
{
    qf_dtype dt = QF_FLOAT32;
    qf_shape sh = qf_shape_scalar();
    return mkq(cap, 1, &dt, &sh, "pf");
}

static qf_element *fbatch(size_t n, const float *v)
{
    qf_shape sh = QF_SHAPE((int64_t)n);
    return el1(qf_tensor_new_from(QF_FLOAT32, &sh, v, n * sizeof(float)));
}

static void expect_floats(const qf_element *b, size_t n, const float *want)
{
    const qf_tensor *t = qf_element_get(b, 0);
    cr_assert(has_shape(t, QF_SHAPE((int64_t)n)));
    cr_expect_arr_eq(qf_tensor_cdata(t), want, n * sizeof(float));
}

/* Generic check of a padded int32 batch against the original elements
 * (deep copies), any rank: every position inside element i's own shape
 * holds its value, every position outside holds 0 (spec 90-91, 94). */
static void check_padded(const qf_tensor *batch, qf_tensor *const *orig, size_t n)
{
    const qf_shape *bs = qf_tensor_shape(batch);
    int r = qf_tensor_shape(orig[0])->rank;
    cr_assert_eq(bs->rank, r + 1);
    cr_assert_eq(bs->dims[0], (int64_t)n);
    for (int d = 0; d < r; d++) {
        int64_t mx = 0;
        for (size_t i = 0; i < n; i++)
            if (qf_tensor_shape(orig[i])->dims[d] > mx)
                mx = qf_tensor_shape(orig[i])->dims[d];
        cr_expect_eq(bs->dims[d + 1], mx, "dim %d padded to the batch's largest", d);
    }
    const int32_t *bd = i32s(batch);
    int64_t per = qf_tensor_num_elements(batch) / (int64_t)n;
    for (size_t i = 0; i < n; i++) {
        const qf_shape *es = qf_tensor_shape(orig[i]);
        const int32_t *ed = i32s(orig[i]);
        for (int64_t k = 0; k < per; k++) {
            /* k -> multi-index in the padded element shape */
            int64_t idx[QF_MAX_RANK], rem = k;
            for (int d = r - 1; d >= 0; d--) {
                idx[d] = rem % bs->dims[d + 1];
                rem /= bs->dims[d + 1];
            }
            bool inside = true;
            int64_t off = 0;
            for (int d = 0; d < r; d++) {
                inside = inside && idx[d] < es->dims[d];
                off = off * es->dims[d] + idx[d];
            }
            int32_t want = inside ? ed[off] : 0;
            cr_assert_eq(bd[(int64_t)i * per + k], want, "element %zu, flat %lld", i, (long long)k);
        }
    }
}

/* ------------------------------------------------------- construction */

/* spec 85 */
Test(padding_queue, shapes_are_mandatory)
{
    qf_dtype dt = QF_INT32;
    qf_queue_options o = {.capacity = 10, .num_components = 1, .dtypes = &dt};
    qf_queue *q = (qf_queue *)0x1;
    cr_expect_eq(qf_padding_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "When providing partial shapes, a list of shapes must be provided.");
    cr_expect_eq(q, (qf_queue *)0x1, "output untouched on failure");
}

/* spec 7 still applies */
Test(padding_queue, empty_component_types_rejected)
{
    qf_shape sh = QF_SHAPE(UNK);
    qf_queue_options o = {.capacity = 10, .num_components = 0, .shapes = &sh};
    qf_queue *q = NULL;
    cr_expect_eq(qf_padding_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "Empty component types for queue"));
    cr_expect_eq(qf_padding_fifo_queue_new(NULL, &q), QF_INVALID_ARGUMENT);
}

/* spec 86 */
Test(padding_queue, unknown_rank_rejected)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_shape shs[2] = {QF_SHAPE(UNK), qf_shape_unknown()};
    qf_queue_options o = {.capacity = 10, .num_components = 2, .dtypes = dts, .shapes = shs};
    qf_queue *q = NULL;
    cr_expect_eq(qf_padding_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "must have a defined rank"), "%s", qf_last_message());
    cr_expect_null(q);
}

/* spec 86: a None dimension is allowed and means "variable length". */
Test(padding_queue, unknown_dimensions_allowed)
{
    qf_dtype dts[3] = {QF_INT32, QF_STRING, QF_FLOAT64};
    qf_shape shs[3] = {QF_SHAPE(UNK), QF_SHAPE(UNK, 3, UNK), qf_shape_scalar()};
    qf_queue *q = mkq(10, 3, dts, shs, NULL);
    cr_expect_eq(qf_queue_get_kind(q), QF_QUEUE_PADDING_FIFO);
    qf_queue_unref(q);
}

/* The FIFO and RandomShuffle constructors still refuse such shapes (spec 8). */
Test(padding_queue, fifo_still_needs_fully_defined_shapes)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(UNK);
    qf_queue_options o = {.capacity = 10, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *q = NULL;
    cr_expect_eq(qf_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "All shapes must be fully defined"));
}

/* An invalid shape (a dimension below -1) is refused. */
Test(padding_queue, invalid_shape_rejected)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(-5);
    qf_queue_options o = {.capacity = 10, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *q = NULL;
    cr_expect_eq(qf_padding_fifo_queue_new(&o, &q), QF_INVALID_ARGUMENT);
    cr_expect_null(q);
}

/* spec 5, 95: default name, kind name. */
Test(padding_queue, default_name_and_kind_name)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(UNK);
    qf_queue *q = mkq(10, 1, &dt, &sh, NULL);
    cr_expect_str_eq(qf_queue_name(q), "padding_fifo_queue");
    cr_expect_str_eq(qf_queue_kind_name(q), "PaddingFIFOQueue");
    cr_expect_eq(qf_queue_capacity(q), 10);
    cr_expect_null(qf_queue_shared_name(q));
    cr_expect_eq(qf_queue_min_after_dequeue(q), 0);
    qf_queue_unref(q);
    q = mkq(-1, 1, &dt, &sh, "named");
    cr_expect_str_eq(qf_queue_name(q), "named");
    cr_expect_eq(qf_queue_capacity(q), INT32_MAX, "spec 6: unbounded");
    qf_queue_unref(q);
}

/* spec 87: an unknown dimension is stored (and reported) as -1. */
Test(padding_queue, unknown_dimension_reads_as_minus_one)
{
    qf_dtype dt = QF_FLOAT32;
    qf_shape sh = QF_SHAPE(UNK, 3);
    qf_queue *q = mkq(10, 1, &dt, &sh, NULL);
    const qf_shape *got = qf_queue_shape(q, 0);
    cr_assert_not_null(got);
    cr_expect_eq(got->rank, 2);
    cr_expect_eq(got->dims[0], -1);
    cr_expect_eq(got->dims[1], 3);
    char buf[64];
    cr_expect_str_eq(qf_shape_format(got, buf, sizeof(buf)), "[?,3]");
    qf_queue_unref(q);
}

/* The inline fast path: only for one scalar component (nothing to pad);
 * a component with a dimension, known or not, is stored as elements. */
Test(padding_queue, inline_mode_only_for_scalars)
{
    qf_dtype pt = QF_PTR, i64 = QF_INT64;
    qf_shape sc = qf_shape_scalar(), v = QF_SHAPE(UNK), one = QF_SHAPE(1);
    qf_queue *q = mkq(10, 1, &pt, &sc, NULL);
    cr_expect(qf_queue_is_inline(q), "a scalar pointer queue keeps the fast path");
    int objs[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(qf_queue_enqueue_ptr(q, &objs[i]), QF_OK);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 2, &b), QF_OK);
    const qf_tensor *t = qf_element_get(b, 0);
    cr_expect(has_shape(t, QF_SHAPE(2)));
    cr_expect(qf_tensor_ptr(t, 0) == &objs[0] && qf_tensor_ptr(t, 1) == &objs[1]);
    qf_element_free(b);
    void *p = NULL;
    cr_assert_eq(qf_queue_dequeue_ptr(q, &p), QF_OK);
    cr_expect_eq(p, (void *)&objs[2]);
    qf_queue_unref(q);
    /* a scalar number works either way */
    q = mkq(10, 1, &i64, &sc, NULL);
    for (int64_t i = 1; i <= 3; i++)
        enq(q, el1(qf_tensor_new_i64(i * 10)));
    cr_assert_eq(qf_queue_dequeue_many(q, 3, &b), QF_OK);
    t = qf_element_get(b, 0);
    cr_expect(has_shape(t, QF_SHAPE(3)));
    const int64_t *d = qf_tensor_cdata(t);
    cr_expect(d[0] == 10 && d[1] == 20 && d[2] == 30);
    qf_element_free(b);
    qf_queue_unref(q);
    q = mkq(10, 1, &pt, &v, NULL);
    cr_expect_not(qf_queue_is_inline(q));
    cr_expect_eq(qf_queue_enqueue_ptr(q, &objs[0]), QF_INVALID_ARGUMENT);
    qf_queue_unref(q);
    q = mkq(10, 1, &pt, &one, NULL);
    cr_expect_not(qf_queue_is_inline(q));
    qf_queue_unref(q);
}

/* ------------------------------------------------------ validation */

/* spec 88: fixed dimensions are still checked. */
Test(padding_queue, fixed_dimensions_checked_on_enqueue)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(UNK, 3);
    qf_queue *q = mkq(10, 1, &dt, &sh, NULL);
    int32_t v[12] = {0};
    qf_element *e = el1(ti32(QF_SHAPE(3, 4), v));
    cr_expect_eq(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Shape mismatch in tuple component 0. Expected [?,3], got [3,4]");
    qf_element_free(e); /* the caller kept it */
    /* wrong rank */
    e = el1(ti32(QF_SHAPE(3), v));
    cr_expect_eq(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT);
    qf_element_free(e);
    /* any first dimension is fine */
    enq(q, el1(ti32(QF_SHAPE(4, 3), v)));
    enq(q, el1(ti32(QF_SHAPE(0, 3), v)));
    cr_expect_eq(qf_queue_size(q), 2);
    qf_queue_unref(q);
}

/* spec 88: enqueue_many puts the batch dimension in front. */
Test(padding_queue, fixed_dimensions_checked_on_enqueue_many)
{
    qf_dtype dts[2] = {QF_INT32, QF_INT32};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(UNK, 3)};
    qf_queue *q = mkq(10, 2, dts, shs, NULL);
    int32_t v[24] = {0};
    qf_element *b = el2(ti32(QF_SHAPE(2), v), ti32(QF_SHAPE(2, 3, 4), v));
    cr_expect_eq(qf_queue_enqueue_many(q, b, NULL), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(),
                     "Shape mismatch in tuple component 1. Expected [2,?,3], got [2,3,4]");
    cr_expect_eq(qf_queue_size(q), 0);
    qf_element_free(b);
    b = el2(ti32(QF_SHAPE(2), v), ti32(QF_SHAPE(2, 4, 3), v));
    cr_assert_eq(qf_queue_enqueue_many(q, b, NULL), QF_OK);
    cr_expect_eq(qf_queue_size(q), 2);
    qf_queue_unref(q);
}

/* spec 17 still applies: dtype mismatch. */
Test(padding_queue, dtype_checked)
{
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(UNK);
    qf_queue *q = mkq(10, 1, &dt, &sh, NULL);
    qf_element *e = el1(qf_tensor_new_f32(1.0f));
    cr_expect_eq(qf_queue_enqueue(q, e), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "Type mismatch in tuple component 0"));
    qf_element_free(e);
    qf_queue_unref(q);
}

/* ------------------------------------------------------------ padding */

/* spec 89: dequeue returns the element exactly as enqueued. */
Test(padding_queue, dequeue_returns_element_unpadded)
{
    qf_dtype dts[2] = {QF_STRING, QF_INT32};
    qf_shape shs[2] = {QF_SHAPE(UNK), QF_SHAPE(1, UNK)};
    qf_queue *q = mkq(10, 2, dts, shs, NULL);
    const char *s1[] = {"a"}, *s4[] = {"abc", "d", "e", "f"};
    int32_t i1[] = {1}, i4[] = {1, 2, 3, 4};
    enq(q, el2(tstrs(1, s1), ti32(QF_SHAPE(1, 1), i1)));
    enq(q, el2(tstrs(4, s4), ti32(QF_SHAPE(1, 4), i4)));
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_expect(has_shape(qf_element_get(e, 0), QF_SHAPE(1)));
    cr_expect(has_shape(qf_element_get(e, 1), QF_SHAPE(1, 1)));
    qf_element_free(e);
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    const qf_tensor *s = qf_element_get(e, 0), *i = qf_element_get(e, 1);
    cr_expect(has_shape(s, QF_SHAPE(4)));
    for (int k = 0; k < 4; k++)
        expect_str_at(s, k, s4[k]);
    cr_expect(has_shape(i, QF_SHAPE(1, 4)));
    cr_expect_arr_eq(i32s(i), i4, sizeof(i4));
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 90: TensorFlow's example, for dequeue_many and dequeue_up_to. */
static void spec90(bool up_to)
{
    qf_dtype dts[2] = {QF_STRING, QF_INT32};
    qf_shape shs[2] = {QF_SHAPE(UNK), QF_SHAPE(1, UNK)};
    qf_queue *q = mkq(10, 2, dts, shs, "spec90");
    static const char *strs[6][4] = {
        {"a"}, {"ab"}, {"abc"}, {"abc", "d"}, {"abc", "d", "e"}, {"abc", "d", "e", "f"}};
    static const int32_t ints[6][4] = {{1}, {2}, {3}, {1, 2}, {1, 2, 3}, {1, 2, 3, 4}};
    static const size_t lens[6] = {1, 1, 1, 2, 3, 4};
    for (int k = 0; k < 6; k++)
        enq(q, el2(tstrs(lens[k], strs[k]), ti32(QF_SHAPE(1, (int64_t)lens[k]), ints[k])));

    qf_element *b = NULL;
    qf_code rc = up_to ? qf_queue_dequeue_up_to(q, 5, &b) : qf_queue_dequeue_many(q, 5, &b);
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
    const qf_tensor *s = qf_element_get(b, 0), *i = qf_element_get(b, 1);
    cr_assert(has_shape(s, QF_SHAPE(5, 3)));
    static const char *want_s[5][3] = {
        {"a", "", ""}, {"ab", "", ""}, {"abc", "", ""}, {"abc", "d", ""}, {"abc", "d", "e"}};
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 3; c++)
            expect_str_at(s, r * 3 + c, want_s[r][c]);
    cr_assert(has_shape(i, QF_SHAPE(5, 1, 3)));
    static const int32_t want_i[15] = {1, 0, 0, 2, 0, 0, 3, 0, 0, 1, 2, 0, 1, 2, 3};
    cr_expect_arr_eq(i32s(i), want_i, sizeof(want_i));
    qf_element_free(b);

    /* the 6th comes back unpadded */
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    s = qf_element_get(e, 0);
    i = qf_element_get(e, 1);
    cr_assert(has_shape(s, QF_SHAPE(4)));
    for (int k = 0; k < 4; k++)
        expect_str_at(s, k, strs[5][k]);
    cr_assert(has_shape(i, QF_SHAPE(1, 4)));
    cr_expect_arr_eq(i32s(i), ints[5], 4 * sizeof(int32_t));
    qf_element_free(e);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

Test(padding_queue, dequeue_many_pads_to_batch_maximum)
{
    spec90(false);
}

Test(padding_queue, dequeue_up_to_pads_like_dequeue_many)
{
    spec90(true);
}

/* spec 91: the padded size comes from the elements of that batch only. */
Test(padding_queue, padded_size_is_per_batch)
{
    qf_queue *q = mkq_i32(10, QF_SHAPE(UNK));
    int32_t v[5] = {1, 2, 3, 4, 5};
    enq_vec(q, 5, v);
    enq_vec(q, 1, v);
    enq_vec(q, 2, v);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 1, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(1, 5)));
    qf_element_free(b);
    cr_assert_eq(qf_queue_dequeue_many(q, 2, &b), QF_OK);
    const qf_tensor *t = qf_element_get(b, 0);
    cr_assert(has_shape(t, QF_SHAPE(2, 2)), "not padded to the earlier 5");
    const int32_t want[4] = {1, 0, 1, 2};
    cr_expect_arr_eq(i32s(t), want, sizeof(want));
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 91: fully defined dimensions are copied as they are, mixed with
 * padded ones in one shape. */
Test(padding_queue, fixed_dimensions_copied_between_padded_ones)
{
    qf_queue *q = mkq_i32(10, QF_SHAPE(UNK, 2, UNK));
    int32_t a[2 * 2 * 1] = {1, 2, 3, 4}, c[1 * 2 * 3] = {5, 6, 7, 8, 9, 10};
    qf_tensor *orig[2] = {ti32(QF_SHAPE(2, 2, 1), a), ti32(QF_SHAPE(1, 2, 3), c)};
    for (int k = 0; k < 2; k++)
        enq(q, el1(qf_tensor_copy(orig[k])));
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 2, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(2, 2, 2, 3)));
    check_padded(qf_element_get(b, 0), orig, 2);
    qf_element_free(b);
    for (int k = 0; k < 2; k++)
        qf_tensor_unref(orig[k]);
    qf_queue_unref(q);
}

/* spec 90: padding values for other dtypes: 0.0, false, "". */
Test(padding_queue, padding_values_per_dtype)
{
    qf_dtype dts[3] = {QF_FLOAT64, QF_BOOL, QF_STRING};
    qf_shape shs[3] = {QF_SHAPE(UNK), QF_SHAPE(UNK), QF_SHAPE(UNK)};
    qf_queue *q = mkq(4, 3, dts, shs, NULL);
    double d1[1] = {1.5}, d2[2] = {2.5, 3.5};
    bool b1[1] = {true}, b2[2] = {true, true};
    const char *s1[] = {"x"}, *s2[] = {"y", "z"};
    qf_shape one = QF_SHAPE(1), two = QF_SHAPE(2);
    qf_tensor *e1[3] = {qf_tensor_new_from(QF_FLOAT64, &one, d1, sizeof(d1)),
                        qf_tensor_new_from(QF_BOOL, &one, b1, sizeof(b1)), tstrs(1, s1)};
    qf_tensor *e2[3] = {qf_tensor_new_from(QF_FLOAT64, &two, d2, sizeof(d2)),
                        qf_tensor_new_from(QF_BOOL, &two, b2, sizeof(b2)), tstrs(2, s2)};
    enq(q, qf_element_of(3, e1));
    enq(q, qf_element_of(3, e2));
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 2, &b), QF_OK);
    const double *dd = qf_tensor_cdata(qf_element_get(b, 0));
    cr_expect(dd[0] == 1.5 && dd[1] == 0.0 && dd[2] == 2.5 && dd[3] == 3.5);
    const bool *bb = qf_tensor_cdata(qf_element_get(b, 1));
    cr_expect(bb[0] && !bb[1] && bb[2] && bb[3]);
    const qf_tensor *st = qf_element_get(b, 2);
    expect_str_at(st, 0, "x");
    expect_str_at(st, 1, "");
    expect_str_at(st, 2, "y");
    expect_str_at(st, 3, "z");
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 93: dequeue_many(0) / dequeue_up_to(0) give [0, 0] for (None,),
 * at once, even on a closed empty queue. */
Test(padding_queue, zero_count_dequeue_gives_zero_dims)
{
    qf_queue *q = mkq_i32(10, QF_SHAPE(UNK));
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 0, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(0, 0)));
    qf_element_free(b);
    int32_t v[3] = {1, 2, 3};
    enq_vec(q, 3, v);
    cr_assert_eq(qf_queue_dequeue_up_to(q, 0, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(0, 0)));
    qf_element_free(b);
    cr_expect_eq(qf_queue_size(q), 1);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    qf_element_free(e);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_assert_eq(qf_queue_dequeue_many(q, 0, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(0, 0)));
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 93: an empty [0,2,3] batch into a (None,None) queue leaves size 0. */
Test(padding_queue, empty_enqueue_many_leaves_size_zero)
{
    qf_queue *q = mkq_i32(10, QF_SHAPE(UNK, UNK));
    qf_element *b = el1(ti32(QF_SHAPE(0, 2, 3), NULL));
    cr_assert_eq(qf_queue_enqueue_many(q, b, NULL), QF_OK);
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* enqueue_many splits a rectangular batch into rows of the batch's size. */
Test(padding_queue, enqueue_many_rows_then_padded_batch)
{
    qf_queue *q = mkq_i32(10, QF_SHAPE(UNK));
    int32_t rows[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(qf_queue_enqueue_many(q, el1(ti32(QF_SHAPE(2, 3), rows)), NULL), QF_OK);
    int32_t v[1] = {9};
    enq_vec(q, 1, v);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_expect(has_shape(qf_element_get(e, 0), QF_SHAPE(3)));
    qf_element_free(e);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 2, &b), QF_OK);
    const int32_t want[6] = {4, 5, 6, 9, 0, 0};
    cr_assert(has_shape(qf_element_get(b, 0), QF_SHAPE(2, 3)));
    cr_expect_arr_eq(i32s(qf_element_get(b, 0)), want, sizeof(want));
    qf_element_free(b);
    qf_queue_unref(q);
}

/* spec 94: TensorFlow stops at rank 4 (Unimplemented); qflow pads any
 * element rank whose batch still fits QF_MAX_RANK. */
static void padded_rank(int rank)
{
    qf_shape pat = {rank, {0}};
    for (int d = 0; d < rank; d++)
        pat.dims[d] = d % 2 == 0 ? UNK : 2; /* unknown, 2, unknown, 2, ... */
    qf_queue *q = mkq_i32(8, pat);
    enum { N = 3 };
    qf_tensor *orig[N];
    for (int i = 0; i < N; i++) {
        qf_shape es = {rank, {0}};
        for (int d = 0; d < rank; d++)
            es.dims[d] = pat.dims[d] == UNK ? 1 + (i + d) % 3 : 2;
        int64_t n = qf_shape_num_elements(&es);
        int32_t *v = malloc((size_t)n * sizeof(int32_t));
        cr_assert_not_null(v);
        for (int64_t k = 0; k < n; k++)
            v[k] = (int32_t)(1000 * (i + 1) + k);
        orig[i] = ti32(es, v);
        free(v);
        enq(q, el1(qf_tensor_copy(orig[i])));
    }
    qf_element *b = NULL;
    qf_code rc = qf_queue_dequeue_many(q, N, &b);
    cr_assert_eq(rc, QF_OK, "rank %d: %s", rank, qf_last_message());
    check_padded(qf_element_get(b, 0), orig, N);
    qf_element_free(b);
    for (int i = 0; i < N; i++)
        qf_tensor_unref(orig[i]);
    qf_queue_unref(q);
}

Test(padding_queue, rank5_elements_are_padded)
{
    padded_rank(5);
}

Test(padding_queue, rank6_elements_are_padded)
{
    padded_rank(6);
}

Test(padding_queue, rank7_elements_are_padded)
{
    padded_rank(QF_MAX_RANK - 1);
}

/* spec 94: an element of rank QF_MAX_RANK has no batch shape (the batch
 * would need one more dimension): dequeue_many fails with Unimplemented,
 * as TensorFlow's padded copy does for ranks it cannot handle, and the
 * element stays whole in the queue for a plain dequeue. */
Test(padding_queue, max_rank_elements_cannot_be_batched_but_are_kept)
{
    qf_shape pat = {QF_MAX_RANK, {0}}, es = {QF_MAX_RANK, {0}};
    for (int d = 0; d < QF_MAX_RANK; d++) {
        pat.dims[d] = d == 0 ? UNK : 1;
        es.dims[d] = 1;
    }
    qf_queue *q = mkq_i32(4, pat);
    int32_t v[1] = {42};
    enq(q, el1(ti32(es, v)));
    qf_element *b = NULL;
    cr_expect_eq(qf_queue_dequeue_many(q, 1, &b), QF_UNIMPLEMENTED);
    cr_expect(strstr(qf_last_message(), "its batch would need rank 9"), "%s", qf_last_message());
    cr_expect_null(b);
    cr_expect_eq(qf_queue_size(q), 1);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_expect_eq(i32s(qf_element_get(e, 0))[0], 42);
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 94, 92: rank 5 through dequeue_up_to after close, fewer than asked. */
Test(padding_queue, rank5_dequeue_up_to_after_close)
{
    qf_queue *q = mkq_i32(8, QF_SHAPE(UNK, 1, UNK, 1, UNK));
    int32_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    qf_tensor *orig[2] = {ti32(QF_SHAPE(2, 1, 1, 1, 2), v), ti32(QF_SHAPE(1, 1, 2, 1, 1), v + 4)};
    enq(q, el1(qf_tensor_copy(orig[0])));
    enq(q, el1(qf_tensor_copy(orig[1])));
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_up_to(q, 5, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(2, 2, 1, 2, 1, 2)));
    check_padded(qf_element_get(b, 0), orig, 2);
    qf_element_free(b);
    qf_tensor_unref(orig[0]);
    qf_tensor_unref(orig[1]);
    qf_queue_unref(q);
}

/* spec 95: the closed-queue errors. qflow names the real kind everywhere. */
Test(padding_queue, closed_queue_error_texts)
{
    qf_queue *q = mkq_i32(4, QF_SHAPE(UNK));
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    int32_t v[1] = {1};
    qf_element *e = el1(vec(1, v));
    cr_expect_eq(qf_queue_enqueue(q, e), QF_CANCELLED);
    cr_expect_str_eq(qf_last_message(), "PaddingFIFOQueue 'pq' is closed.");
    qf_element_free(e);
    qf_element *b = NULL;
    cr_expect_eq(qf_queue_dequeue(q, &b), QF_OUT_OF_RANGE);
    cr_expect(contains(qf_last_message(), "is closed and has insufficient elements"));
    cr_expect_eq(qf_queue_dequeue_many(q, 2, &b), QF_OUT_OF_RANGE);
    cr_expect(contains(qf_last_message(),
                       "PaddingFIFOQueue 'pq' is closed and has insufficient elements "
                       "(requested 2, current size 0)"),
              "%s", qf_last_message());
    cr_expect_eq(qf_queue_dequeue_up_to(q, 2, &b), QF_OUT_OF_RANGE);
    cr_expect(contains(qf_last_message(), "PaddingFIFOQueue 'pq' is closed"));
    qf_queue_unref(q);
}

/* ------------------------------------ spec 92: fully defined = FIFOQueue */

/* spec 92 (43) */
Test(padding_queue, fifo_order_scalars)
{
    qf_queue *q = mkq_f(10);
    enq_f(q, 10);
    enq_f(q, 20);
    enq_f(q, 30);
    cr_expect_eq(deq_f(q), 10);
    cr_expect_eq(deq_f(q), 20);
    cr_expect_eq(deq_f(q), 30);
    qf_queue_unref(q);
}

/* spec 92 (44) */
Test(padding_queue, fifo_order_two_components)
{
    qf_dtype dts[2] = {QF_INT32, QF_FLOAT32};
    qf_shape shs[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue *q = mkq(10, 2, dts, shs, NULL);
    for (int k = 1; k <= 3; k++)
        enq(q, el2(qf_tensor_new_i32(5 * k), qf_tensor_new_f32(10.0f * (float)k)));
    for (int k = 1; k <= 3; k++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
        cr_expect_eq(*(const int32_t *)qf_tensor_cdata(qf_element_get(e, 0)), 5 * k);
        cr_expect_eq(*(const float *)qf_tensor_cdata(qf_element_get(e, 1)), 10.0f * (float)k);
        qf_element_free(e);
    }
    qf_queue_unref(q);
}

/* spec 92 (45-48) */
Test(padding_queue, fifo_enqueue_many_dequeue_many_and_up_to)
{
    qf_dtype dts[2] = {QF_FLOAT32, QF_INT32};
    qf_shape shs[2] = {qf_shape_scalar(), QF_SHAPE(2)};
    qf_queue *q = mkq(10, 2, dts, shs, NULL);
    float f[10];
    int32_t iv[20];
    for (int k = 0; k < 10; k++) {
        f[k] = 10.0f * (float)(k + 1);
        iv[2 * k] = 2 * k + 1;
        iv[2 * k + 1] = 2 * k + 2;
    }
    qf_shape fs = QF_SHAPE(10);
    qf_element *b =
        el2(qf_tensor_new_from(QF_FLOAT32, &fs, f, sizeof(f)), ti32(QF_SHAPE(10, 2), iv));
    cr_assert_eq(qf_queue_enqueue_many(q, b, NULL), QF_OK);
    cr_expect_eq(qf_queue_size(q), 10);
    cr_assert_eq(qf_queue_dequeue_many(q, 4, &b), QF_OK);
    cr_expect_arr_eq(qf_tensor_cdata(qf_element_get(b, 0)), f, 4 * sizeof(float));
    cr_expect(has_shape(qf_element_get(b, 1), QF_SHAPE(4, 2)));
    cr_expect_arr_eq(i32s(qf_element_get(b, 1)), iv, 8 * sizeof(int32_t));
    qf_element_free(b);
    cr_assert_eq(qf_queue_dequeue_up_to(q, 4, &b), QF_OK);
    cr_expect_arr_eq(qf_tensor_cdata(qf_element_get(b, 0)), f + 4, 4 * sizeof(float));
    cr_expect_arr_eq(i32s(qf_element_get(b, 1)), iv + 8, 8 * sizeof(int32_t));
    qf_element_free(b);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_expect_eq(*(const float *)qf_tensor_cdata(qf_element_get(e, 0)), 90.0f);
    qf_element_free(e);
    qf_queue_unref(q);
}

/* spec 92 (49): exact round trip of 10x4x4x4x4, with shape (4,4,4,4) and
 * with (4,None,4,None). */
static void roundtrip_4x4x4x4(qf_shape sh)
{
    qf_queue *q = mkq_i32(10, sh);
    int32_t *v = malloc(10 * 256 * sizeof(int32_t));
    cr_assert_not_null(v);
    for (int k = 0; k < 10 * 256; k++)
        v[k] = k * 7 - 3;
    cr_assert_eq(qf_queue_enqueue_many(q, el1(ti32(QF_SHAPE(10, 4, 4, 4, 4), v)), NULL), QF_OK);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 10, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(10, 4, 4, 4, 4)));
    cr_expect_arr_eq(i32s(qf_element_get(b, 0)), v, 10 * 256 * sizeof(int32_t));
    qf_element_free(b);
    free(v);
    qf_queue_unref(q);
}

Test(padding_queue, fifo_roundtrip_4x4x4x4_fixed)
{
    roundtrip_4x4x4x4(QF_SHAPE(4, 4, 4, 4));
}

Test(padding_queue, roundtrip_4x4x4x4_through_partial_shape)
{
    roundtrip_4x4x4x4(QF_SHAPE(4, UNK, 4, UNK));
}

struct delayed {
    qf_queue *q;
    int consumer_tid; /* enqueue each element once it waits */
    int n;
    float first;
    qf_code rc;
};

static void *delayed_enqueues(void *arg)
{
    struct delayed *d = arg;
    for (int k = 0; k < d->n; k++) {
        until_parked(d->consumer_tid, d->q, NULL);
        qf_element *e = el1(qf_tensor_new_f32(d->first + (float)k));
        d->rc = qf_queue_enqueue(d->q, e);
        if (d->rc != QF_OK) {
            qf_element_free(e);
            break;
        }
    }
    return NULL;
}

/* spec 92 (50): a dequeue on an empty queue blocks until elements come. */
Test(padding_queue, fifo_dequeue_blocks_until_element)
{
    qf_queue *q = mkq_f(3);
    struct delayed d = {q, qft_tid(), 3, 1.0f, QF_OK};
    pthread_t t;
    pthread_create(&t, NULL, delayed_enqueues, &d);
    cr_expect_eq(deq_f(q), 1.0f);
    cr_expect_eq(deq_f(q), 2.0f);
    cr_expect_eq(deq_f(q), 3.0f);
    pthread_join(t, NULL);
    cr_expect_eq(d.rc, QF_OK);
    qf_queue_unref(q);
}

/* spec 92 (50, 52): dequeue_many(4) gathers over time, past the capacity. */
Test(padding_queue, fifo_dequeue_many_larger_than_capacity)
{
    qf_queue *q = mkq_f(2);
    struct delayed d = {q, qft_tid(), 4, 0.0f, QF_OK};
    pthread_t t;
    pthread_create(&t, NULL, delayed_enqueues, &d);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 4, &b), QF_OK);
    const float want[4] = {0, 1, 2, 3};
    expect_floats(b, 4, want);
    qf_element_free(b);
    pthread_join(t, NULL);
    qf_queue_unref(q);
}

struct blocked_enq {
    qf_queue *q;
    qf_element *e;
    bool many;
    atomic_bool done;
    qf_code rc;
    _Atomic int tid;
};

static void *blocked_enqueue(void *arg)
{
    struct blocked_enq *b = arg;
    atomic_store(&b->tid, qft_tid());
    b->rc = b->many ? qf_queue_enqueue_many(b->q, b->e, NULL) : qf_queue_enqueue(b->q, b->e);
    atomic_store(&b->done, true);
    return NULL;
}

/* spec 92 (51): an enqueue into a full queue blocks until a dequeue. */
Test(padding_queue, fifo_enqueue_blocks_when_full)
{
    qf_queue *q = mkq_f(4);
    const float init[4] = {10, 20, 30, 40};
    cr_assert_eq(qf_queue_enqueue_many(q, fbatch(4, init), NULL), QF_OK);
    const float more[2] = {50, 60};
    struct blocked_enq be = {q, fbatch(2, more), true, false, QF_OK, 0};
    pthread_t t;
    pthread_create(&t, NULL, blocked_enqueue, &be);
    while (atomic_load(&be.tid) == 0)
        qft_nap();
    int parked = qft_wait_parked(atomic_load(&be.tid), q, 4096, &be.done, 10 * 1000000000LL);
    cr_expect_not(atomic_load(&be.done), "enqueue_many blocks while full");
    cr_expect_neq(parked, 0, "the enqueue never blocked");
    for (int k = 0; k < 6; k++)
        cr_expect_eq(deq_f(q), 10.0f * (float)(k + 1));
    pthread_join(t, NULL);
    cr_expect_eq(be.rc, QF_OK);
    qf_queue_unref(q);
}

/* spec 92 (53-54): close, drain, then OutOfRange; a blocked dequeue is
 * woken by the close. */
Test(padding_queue, fifo_close_drain_then_out_of_range)
{
    qf_queue *q = mkq_f(10);
    const float v[4] = {10, 20, 30, 40};
    cr_assert_eq(qf_queue_enqueue_many(q, fbatch(4, v), NULL), QF_OK);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_expect(qf_queue_is_closed(q));
    for (int k = 0; k < 4; k++)
        cr_expect_eq(deq_f(q), v[k]);
    qf_element *e = NULL;
    cr_expect_eq(qf_queue_dequeue(q, &e), QF_OUT_OF_RANGE);
    cr_expect(contains(qf_last_message(), "is closed and has insufficient"));
    qf_queue_unref(q);
}

struct closer {
    qf_queue *q;
    int waiter_tid; /* close once it waits */
};

static void *close_later(void *arg)
{
    struct closer *c = arg;
    until_parked(c->waiter_tid, c->q, NULL);
    qf_queue_close(c->q, false);
    return NULL;
}

/* spec 92 (54) */
Test(padding_queue, fifo_blocked_dequeue_many_fails_on_close)
{
    qf_queue *q = mkq_i32(4, QF_SHAPE(UNK));
    struct closer c = {q, qft_tid()};
    pthread_t t;
    pthread_create(&t, NULL, close_later, &c);
    qf_element *b = NULL;
    cr_expect_eq(qf_queue_dequeue_many(q, 4, &b), QF_OUT_OF_RANGE);
    pthread_join(t, NULL);
    cr_expect_eq(qf_queue_dequeue_up_to(q, 4, &b), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* spec 92 (55): a partial batch cut short by close goes back, in order,
 * and a later dequeue still gets it unpadded. */
Test(padding_queue, fifo_partial_batch_restored_on_close)
{
    qf_queue *q = mkq_i32(4, QF_SHAPE(UNK));
    int32_t v[3] = {1, 2, 3};
    enq_vec(q, 1, v);
    enq_vec(q, 2, v);
    enq_vec(q, 3, v);
    struct closer c = {q, qft_tid()};
    pthread_t t;
    pthread_create(&t, NULL, close_later, &c);
    qf_element *b = NULL;
    cr_expect_eq(qf_queue_dequeue_many(q, 4, &b), QF_OUT_OF_RANGE);
    pthread_join(t, NULL);
    cr_expect_eq(qf_queue_size(q), 3);
    for (int64_t n = 1; n <= 3; n++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
        cr_expect(has_shape(qf_element_get(e, 0), QF_SHAPE(n)), "restored in order, unpadded");
        qf_element_free(e);
    }
    cr_expect_eq(qf_queue_size(q), 0);
    qf_queue_unref(q);
}

/* spec 92 (56-57): dequeue_up_to returns the rest once closed; then
 * OutOfRange. */
Test(padding_queue, fifo_dequeue_up_to_returns_rest_after_close)
{
    qf_queue *q = mkq_i32(10, QF_SHAPE(UNK));
    int32_t v[4] = {10, 20, 30, 40};
    for (size_t n = 1; n <= 4; n++)
        enq_vec(q, n, v);
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_up_to(q, 3, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(3, 3)));
    qf_element_free(b);
    struct closer c = {q, qft_tid()};
    pthread_t t;
    pthread_create(&t, NULL, close_later, &c);
    cr_assert_eq(qf_queue_dequeue_up_to(q, 3, &b), QF_OK);
    cr_expect(has_shape(qf_element_get(b, 0), QF_SHAPE(1, 4)));
    cr_expect_arr_eq(i32s(qf_element_get(b, 0)), v, sizeof(v));
    qf_element_free(b);
    pthread_join(t, NULL);
    cr_expect_eq(qf_queue_dequeue_up_to(q, 3, &b), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* spec 92 (38): a deadline leaves the queue usable. */
Test(padding_queue, fifo_timeouts_leave_queue_usable)
{
    qf_queue *q = mkq_i32(1, QF_SHAPE(UNK));
    qf_element *e = NULL, *b = NULL;
    cr_expect_eq(qf_queue_dequeue_until(q, qf_deadline_in_s(0.02), &e), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_queue_dequeue_many_until(q, 2, qf_deadline_in_s(0.02), &b),
                 QF_DEADLINE_EXCEEDED);
    int32_t v[2] = {7, 8};
    enq_vec(q, 2, v);
    qf_element *x = el1(vec(1, v));
    cr_expect_eq(qf_queue_enqueue_until(q, x, qf_deadline_in_s(0.02)), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(qf_queue_try_enqueue(q, x), QF_UNAVAILABLE);
    qf_element_free(x);
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_expect(has_shape(qf_element_get(e, 0), QF_SHAPE(2)));
    qf_element_free(e);
    cr_expect_eq(qf_queue_try_dequeue(q, &e), QF_UNAVAILABLE);
    qf_queue_unref(q);
}

struct upto_reader {
    qf_queue *q;
    int64_t got;
    int64_t sum;
};

static void *read_up_to(void *arg)
{
    struct upto_reader *r = arg;
    for (;;) {
        qf_element *b = NULL;
        if (qf_queue_dequeue_up_to(r->q, 101, &b) != QF_OK)
            break;
        const qf_tensor *t = qf_element_get(b, 0);
        int64_t n = qf_tensor_shape(t)->dims[0];
        int64_t w = qf_tensor_shape(t)->dims[1];
        /* rows are [k] padded to the batch width: the value is in col 0 */
        for (int64_t i = 0; i < n; i++)
            r->sum += i32s(t)[i * w];
        r->got += n;
        qf_element_free(b);
    }
    return NULL;
}

/* spec 92 (58): 10 threads drain a closed 1000-element queue with
 * dequeue_up_to(101): every element exactly once. */
Test(padding_queue, fifo_parallel_dequeue_up_to_after_close)
{
    qf_queue *q = mkq_i32(1000, QF_SHAPE(UNK));
    for (int32_t k = 0; k < 1000; k++) {
        int32_t v[3] = {k, 0, 0};
        enq_vec(q, (size_t)(1 + k % 3), v);
    }
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    struct upto_reader r[10];
    pthread_t t[10];
    for (int i = 0; i < 10; i++) {
        r[i] = (struct upto_reader){q, 0, 0};
        pthread_create(&t[i], NULL, read_up_to, &r[i]);
    }
    int64_t got = 0, sum = 0;
    bool saw_91 = false;
    for (int i = 0; i < 10; i++) {
        pthread_join(t[i], NULL);
        got += r[i].got;
        sum += r[i].sum;
        saw_91 = saw_91 || r[i].got % 101 == 91;
    }
    cr_expect_eq(got, 1000);
    cr_expect_eq(sum, 999 * 1000 / 2);
    cr_expect(saw_91, "one thread got the 91 left over");
    qf_queue_unref(q);
}

/* spec 92 (60): enqueue mixed with enqueue_many keeps FIFO order. */
Test(padding_queue, fifo_order_mixed_enqueue_and_enqueue_many)
{
    qf_queue *q = mkq_i32(300, QF_SHAPE(UNK));
    int32_t next = 0;
    unsigned seed = 12345;
    while (next < 250) {
        seed = seed * 1103515245u + 12345u;
        int32_t cnt = (int32_t)((seed >> 16) % 21);
        if (cnt > 250 - next)
            cnt = 250 - next;
        if (cnt == 1) {
            enq_vec(q, 1, &next);
            next++;
            continue;
        }
        int32_t rows[20];
        for (int32_t k = 0; k < cnt; k++)
            rows[k] = next + k;
        cr_assert_eq(qf_queue_enqueue_many(q, el1(ti32(QF_SHAPE(cnt, 1), rows)), NULL), QF_OK);
        next += cnt;
    }
    qf_element *b = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 250, &b), QF_OK);
    const int32_t *d = i32s(qf_element_get(b, 0));
    for (int32_t k = 0; k < 250; k++)
        cr_assert_eq(d[k], k);
    qf_element_free(b);
    qf_queue_unref(q);
}

/* Exactly once with 4 producers and 4 consumers, variable lengths,
 * consumers mixing dequeue and dequeue_up_to (spec 92 (62)). */
#define PC_PER_PRODUCER 2000
#define PC_TOTAL (4 * PC_PER_PRODUCER)

struct pc_shared {
    qf_queue *q;
    atomic_uchar seen[PC_TOTAL];
    atomic_int producers_left;
    atomic_int bad;
};

struct pc_arg {
    struct pc_shared *s;
    int id;
};

static void *pc_producer(void *arg)
{
    struct pc_arg *a = arg;
    for (int k = 0; k < PC_PER_PRODUCER; k++) {
        int32_t v = a->id * PC_PER_PRODUCER + k;
        int32_t row[4] = {v, v, v, v};
        qf_tensor *t = vec((size_t)(1 + v % 4), row);
        qf_element *e = qf_element_of(1, &t);
        if (qf_queue_enqueue(a->s->q, e) != QF_OK) {
            qf_element_free(e);
            atomic_fetch_add(&a->s->bad, 1);
        }
    }
    if (atomic_fetch_sub(&a->s->producers_left, 1) == 1)
        qf_queue_close(a->s->q, false);
    return NULL;
}

static void pc_mark(struct pc_shared *s, int32_t v, int64_t len, const int32_t *row)
{
    if (v < 0 || v >= PC_TOTAL || len != 1 + v % 4) {
        atomic_fetch_add(&s->bad, 1);
        return;
    }
    for (int64_t i = 0; i < len; i++)
        if (row[i] != v)
            atomic_fetch_add(&s->bad, 1);
    atomic_fetch_add(&s->seen[v], 1);
}

static void *pc_consumer(void *arg)
{
    struct pc_arg *a = arg;
    for (int round = 0;; round++) {
        if ((round + a->id) % 2 == 0) {
            qf_element *e = NULL;
            if (qf_queue_dequeue(a->s->q, &e) != QF_OK)
                break;
            const qf_tensor *t = qf_element_get(e, 0);
            pc_mark(a->s, i32s(t)[0], qf_tensor_shape(t)->dims[0], i32s(t));
            qf_element_free(e);
        } else {
            qf_element *b = NULL;
            if (qf_queue_dequeue_up_to(a->s->q, 7, &b) != QF_OK)
                break;
            const qf_tensor *t = qf_element_get(b, 0);
            int64_t n = qf_tensor_shape(t)->dims[0], w = qf_tensor_shape(t)->dims[1];
            for (int64_t i = 0; i < n; i++) {
                const int32_t *row = i32s(t) + i * w;
                int32_t v = row[0];
                pc_mark(a->s, v, 1 + v % 4, row);
                for (int64_t j = 1 + v % 4; j < w; j++)
                    if (row[j] != 0)
                        atomic_fetch_add(&a->s->bad, 1); /* padding is 0 */
            }
            qf_element_free(b);
        }
    }
    return NULL;
}

Test(padding_queue, exactly_once_4_producers_4_consumers, .timeout = 120)
{
    static struct pc_shared s;
    memset(&s, 0, sizeof(s));
    s.q = mkq_i32(16, QF_SHAPE(UNK));
    atomic_store(&s.producers_left, 4);
    pthread_t tp[4], tc[4];
    struct pc_arg ap[4], ac[4];
    for (int i = 0; i < 4; i++) {
        ac[i] = (struct pc_arg){&s, i};
        pthread_create(&tc[i], NULL, pc_consumer, &ac[i]);
    }
    for (int i = 0; i < 4; i++) {
        ap[i] = (struct pc_arg){&s, i};
        pthread_create(&tp[i], NULL, pc_producer, &ap[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(tp[i], NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(tc[i], NULL);
    cr_expect_eq(atomic_load(&s.bad), 0);
    int missing = 0, dup = 0;
    for (int v = 0; v < PC_TOTAL; v++) {
        unsigned char c = atomic_load(&s.seen[v]);
        missing += c == 0;
        dup += c > 1;
    }
    cr_expect_eq(missing, 0);
    cr_expect_eq(dup, 0);
    qf_queue_unref(s.q);
}

/* ------------------------------------------------ spec 96: shared queues */

static qf_code open_shared(qf_queue_registry *reg, const char *name, qf_shape sh, qf_queue **ret_q)
{
    qf_dtype dt = QF_INT32;
    qf_queue_options o = {.capacity = 10,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .shared_name = name,
                          .registry = reg};
    return qf_padding_fifo_queue_new(&o, ret_q);
}

/* spec 96: [None] attaches to [5]; and the other way round. */
Test(padding_queue, shared_queue_attaches_with_compatible_shapes)
{
    qf_queue_registry *reg = NULL;
    cr_assert_eq(qf_queue_registry_new(&reg), QF_OK);
    qf_queue *q1 = NULL, *q2 = NULL, *q3 = NULL;
    cr_assert_eq(open_shared(reg, "pad", QF_SHAPE(5), &q1), QF_OK);
    qf_code rc = open_shared(reg, "pad", QF_SHAPE(UNK), &q2);
    cr_assert_eq(rc, QF_OK, "%s", qf_last_message());
    cr_expect_eq(q1, q2);
    /* the queue keeps its own shapes */
    cr_expect_eq(qf_queue_shape(q2, 0)->dims[0], 5);
    cr_assert_eq(open_shared(reg, "pad2", QF_SHAPE(UNK, 3), &q3), QF_OK);
    qf_queue *q4 = NULL;
    cr_assert_eq(open_shared(reg, "pad2", QF_SHAPE(7, 3), &q4), QF_OK);
    cr_expect_eq(q3, q4);
    int32_t v[5] = {1, 2, 3, 4, 5};
    enq_vec(q1, 5, v);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q2, &e), QF_OK);
    qf_element_free(e);
    qf_queue_unref(q1);
    qf_queue_unref(q2);
    qf_queue_unref(q3);
    qf_queue_unref(q4);
    qf_queue_registry_free(reg);
}

/* spec 96: a rank or fixed-size conflict fails with "component shapes". */
Test(padding_queue, shared_queue_rejects_incompatible_shapes)
{
    qf_queue_registry *reg = NULL;
    cr_assert_eq(qf_queue_registry_new(&reg), QF_OK);
    qf_queue *q1 = NULL, *q2 = (qf_queue *)0x1;
    cr_assert_eq(open_shared(reg, "pad", QF_SHAPE(5), &q1), QF_OK);
    cr_expect_eq(open_shared(reg, "pad", QF_SHAPE(6), &q2), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Shared queue 'pad' has component shapes [[5]] but "
                                        "requested component shapes were [[6]]");
    cr_expect_eq(open_shared(reg, "pad", QF_SHAPE(UNK, 1), &q2), QF_INVALID_ARGUMENT);
    cr_expect(contains(qf_last_message(), "component shapes"));
    cr_expect(contains(qf_last_message(), "[[?,1]]"), "%s", qf_last_message());
    cr_expect_eq(q2, (qf_queue *)0x1, "output untouched on failure");
    qf_queue_unref(q1);
    qf_queue_registry_free(reg);
}

/* A FIFOQueue with the same name is a different type (TensorFlow's
 * MatchesNodeDefOp), even with identical attributes. */
Test(padding_queue, shared_name_held_by_fifo_queue_is_a_type_conflict)
{
    qf_queue_registry *reg = NULL;
    cr_assert_eq(qf_queue_registry_new(&reg), QF_OK);
    qf_dtype dt = QF_INT32;
    qf_shape sh = QF_SHAPE(5);
    qf_queue_options o = {.capacity = 10,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .shared_name = "both",
                          .registry = reg};
    qf_queue *f = NULL, *p = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &f), QF_OK);
    cr_expect_eq(qf_padding_fifo_queue_new(&o, &p), QF_INVALID_ARGUMENT);
    cr_expect_str_eq(qf_last_message(), "Shared queue 'both' has type 'FIFOQueue' that does not "
                                        "match the requested type 'PaddingFIFOQueue'");
    cr_expect_null(p);
    qf_queue_unref(f);
    qf_queue_registry_free(reg);
}
