/* test_queue_packed.c - FIFO queues of small dense components, whose slots
 * carry the values instead of the element (issue 27; queues/qf_queue_packed-impl.h).
 *
 * What a user can see of the representation: values arrive exactly as
 * sent, for every numeric and bool dtype and at the size boundary
 * (QF__PACKED_MAX_BYTES, 512 bytes of values: packed; one byte more: the
 * element itself travels); a dequeue of a packed queue gives new tensors
 * (the queue kept no reference to the ones sent), a queue above the
 * boundary or with strings, pointers or sparse components gives the very
 * tensors that were sent; names, batches both ways, a partial enqueue_many,
 * close and cancel, and leftovers freed with the queue. A bounded stress
 * (4 producers, 4 consumers) checks exactly-once and per-producer order with
 * single and batch calls. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qf_test_stress.h"
#include "qflow.h"

static qf_queue *fifo(int64_t cap, size_t n, const qf_dtype *dt, const qf_shape *sh,
                      const char *const *names)
{
    qf_queue_options o = {
        .capacity = cap, .num_components = n, .dtypes = dt, .shapes = sh, .names = names};
    qf_queue *q = NULL;
    cr_assert_eq(qf_fifo_queue_new(&o, &q), QF_OK, "%s", qf_last_message());
    return q;
}

/* A tensor of dtype dt and shape sh whose bytes are a pattern of seed. */
static qf_tensor *patterned(qf_dtype dt, const qf_shape *sh, unsigned seed)
{
    qf_tensor *t = qf_tensor_new(dt, sh);
    cr_assert_not_null(t, "%s", qf_last_message());
    size_t nb = (size_t)qf_shape_num_elements(sh) * qf_dtype_size(dt);
    unsigned char *b = qf_tensor_data(t);
    for (size_t i = 0; i < nb; i++)
        b[i] = dt == QF_BOOL ? (unsigned char)((seed + i) & 1) : (unsigned char)(seed * 31 + i);
    return t;
}

static void expect_same_values(const qf_tensor *got, const qf_tensor *want)
{
    cr_assert_eq(qf_tensor_dtype(got), qf_tensor_dtype(want));
    cr_assert(qf_shape_equal(qf_tensor_shape(got), qf_tensor_shape(want)));
    cr_assert(qf_tensor_equal(got, want));
}

static const qf_dtype numeric[] = {QF_FLOAT32,    QF_FLOAT64,   QF_INT32,  QF_UINT8, QF_INT16,
                                   QF_INT8,       QF_COMPLEX64, QF_INT64,  QF_BOOL,  QF_UINT16,
                                   QF_COMPLEX128, QF_FLOAT16,   QF_UINT32, QF_UINT64};

/* One component of each shape kind: scalar, vector, matrix, and an empty
 * one (no values at all), for every numeric and bool dtype. */
Test(queue_packed, every_dtype_and_shape_arrives_as_sent)
{
    for (size_t d = 0; d < sizeof(numeric) / sizeof(numeric[0]); d++) {
        qf_dtype dt[4] = {numeric[d], numeric[d], numeric[d], numeric[d]};
        qf_shape sh[4] = {qf_shape_scalar(), QF_SHAPE(3), QF_SHAPE(2, 3), QF_SHAPE(0)};
        qf_queue *q = fifo(4, 4, dt, sh, NULL);
        qf_tensor *want[4];
        for (unsigned r = 0; r < 3; r++) {
            qf_tensor *ts[4];
            for (int c = 0; c < 4; c++)
                ts[c] = patterned(dt[c], &sh[c], r * 4 + (unsigned)c);
            cr_assert_eq(qf_queue_enqueue(q, qf_element_of(4, ts)), QF_OK, "%s", qf_last_message());
        }
        for (unsigned r = 0; r < 3; r++) {
            qf_element *e = NULL;
            cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK, "%s", qf_last_message());
            cr_assert_eq(qf_element_size(e), 4);
            for (int c = 0; c < 4; c++) {
                want[c] = patterned(dt[c], &sh[c], r * 4 + (unsigned)c);
                expect_same_values(qf_element_get(e, (size_t)c), want[c]);
                qf_tensor_unref(want[c]);
            }
            qf_element_free(e);
        }
        qf_queue_unref(q);
    }
}

/* A tensor the producer still holds: a packed queue copied its values
 * and let go of it; a queue that moves elements hands over the same one. */
static void check_identity(qf_dtype dt0, const qf_shape *sh0, bool packed)
{
    qf_dtype dt[2] = {QF_INT64, dt0};
    qf_shape sh[2] = {qf_shape_scalar(), *sh0};
    qf_queue *q = fifo(2, 2, dt, sh, NULL);
    qf_tensor *ts[2] = {qf_tensor_new_i64(7), patterned(dt0, sh0, 5)};
    qf_tensor *kept = qf_tensor_ref(ts[1]);
    cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, ts)), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_tensor_refcount(kept), packed ? 1u : 2u);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_assert_eq(qf_element_get(e, 1) == kept, !packed);
    expect_same_values(qf_element_get(e, 1), kept);
    cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)), 7);
    qf_element_free(e);
    qf_tensor_unref(kept);
    qf_queue_unref(q);
}

/* 8 bytes of label and 504 of uint8 make the 512 a slot holds; one more
 * byte of row and the element travels itself. */
Test(queue_packed, size_boundary_decides_between_copy_and_move)
{
    qf_shape fits = QF_SHAPE(504), over = QF_SHAPE(505);
    check_identity(QF_UINT8, &fits, true);
    check_identity(QF_UINT8, &over, false);
    qf_shape f32_fits = QF_SHAPE(2, 63); /* 8 + 504 bytes */
    check_identity(QF_FLOAT32, &f32_fits, true);
}

Test(queue_packed, strings_pointers_and_sparse_components_keep_moving_the_element)
{
    qf_shape sc = qf_shape_scalar();
    /* string */
    qf_dtype dts[2] = {QF_INT64, QF_STRING};
    qf_shape shs[2] = {sc, sc};
    qf_queue *q = fifo(2, 2, dts, shs, NULL);
    qf_tensor *ts[2] = {qf_tensor_new_i64(1), qf_tensor_new_cstr("label")};
    qf_tensor *kept = qf_tensor_ref(ts[1]);
    cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, ts)), QF_OK);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_assert_eq(qf_element_get(e, 1), kept);
    qf_element_free(e);
    qf_tensor_unref(kept);
    qf_queue_unref(q);

    /* sparse */
    qf_dtype dtp[2] = {QF_INT64, QF_SPARSE};
    q = fifo(2, 2, dtp, shs, NULL);
    int64_t idx[2] = {0, 1}, dense[2] = {2, 2};
    float vals[1] = {3.5f};
    qf_sparse *sp = NULL;
    cr_assert_eq(qf_sparse_new_from(QF_FLOAT32, 1, 2, idx, vals, dense, &sp), QF_OK);
    qf_tensor *tp[2] = {qf_tensor_new_i64(2), qf_tensor_new_sparse(sp)};
    kept = qf_tensor_ref(tp[1]);
    cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, tp)), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_assert_eq(qf_element_get(e, 1), kept);
    qf_element_free(e);
    qf_tensor_unref(kept);
    qf_queue_unref(q);

    /* pointers */
    qf_dtype dtq[2] = {QF_INT64, QF_PTR};
    q = fifo(2, 2, dtq, shs, NULL);
    int obj = 0;
    qf_tensor *tq[2] = {qf_tensor_new_i64(3), qf_tensor_new_scalar_ptr(&obj, NULL)};
    kept = qf_tensor_ref(tq[1]);
    cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, tq)), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_assert_eq(qf_element_get(e, 1), kept);
    cr_assert_eq(qf_tensor_ptr(qf_element_get(e, 1), 0), &obj);
    qf_element_free(e);
    qf_tensor_unref(kept);
    qf_queue_unref(q);
}

/* A component taken out of a dequeued element outlives the element (the
 * element and its tensors share one block until the last is gone). */
Test(queue_packed, a_taken_component_outlives_its_element)
{
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(16)};
    qf_queue *q = fifo(4, 2, dt, sh, NULL);
    qf_tensor *ts[2] = {qf_tensor_new_i64(11), patterned(QF_FLOAT32, &sh[1], 3)};
    cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, ts)), QF_OK);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    qf_tensor *row = qf_element_take(e, 1);
    qf_tensor *label = qf_tensor_ref(qf_element_get(e, 0));
    qf_element_free(e);
    qf_tensor *want = patterned(QF_FLOAT32, &sh[1], 3);
    expect_same_values(row, want);
    cr_assert_eq(*(const int64_t *)qf_tensor_cdata(label), 11);
    /* A component that is the caller's alone may be written. */
    ((float *)qf_tensor_data(row))[0] = 1.0f;
    qf_tensor_unref(want);
    qf_tensor_unref(row);
    qf_tensor_unref(label);
    qf_queue_unref(q);
}

/* What a producer's enqueue lets go of: an element that came out of a
 * packed queue (its tensors share one block with it), and an element mixing
 * a tensor of such a block with one of its own. Both pass on through a second
 * queue, and the components still held elsewhere stay whole. */
Test(queue_packed, an_element_taken_from_one_packed_queue_passes_on_through_another)
{
    qf_dtype dt[2] = {QF_INT64, QF_INT64};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue *a = fifo(4, 2, dt, sh, NULL), *b = fifo(4, 2, dt, sh, NULL);
    qf_tensor *ts[2] = {qf_tensor_new_i64(5), qf_tensor_new_i64(-5)};
    cr_assert_eq(qf_queue_enqueue(a, qf_element_of(2, ts)), QF_OK);
    cr_assert_eq(qf_queue_enqueue(a, qf_element_of(2, (qf_tensor *[]){qf_tensor_new_i64(6),
                                                                      qf_tensor_new_i64(-6)})),
                 QF_OK);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(a, &e), QF_OK);
    cr_assert_eq(qf_queue_enqueue(b, e), QF_OK, "%s", qf_last_message());

    cr_assert_eq(qf_queue_dequeue(a, &e), QF_OK);
    qf_tensor *held = qf_tensor_ref(qf_element_get(e, 0)); /* lives in e's block */
    qf_tensor *mixed[2] = {qf_tensor_ref(held), qf_tensor_new_i64(-60)};
    qf_element_free(e);
    cr_assert_eq(qf_queue_enqueue(b, qf_element_of(2, mixed)), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_tensor_refcount(held), 1u);
    cr_assert_eq(*(const int64_t *)qf_tensor_cdata(held), 6);

    const int64_t want[2][2] = {{5, -5}, {6, -60}};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(qf_queue_dequeue(b, &e), QF_OK);
        for (size_t c = 0; c < 2; c++)
            cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(e, c)), want[i][c]);
        qf_element_free(e);
    }
    qf_tensor_unref(held);
    qf_queue_unref(a);
    qf_queue_unref(b);
}

Test(queue_packed, names_are_the_queues_on_the_way_out)
{
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT64};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(2)};
    const char *names[2] = {"label", "x"};
    qf_queue *q = fifo(4, 2, dt, sh, names);
    /* Sent in the other order: the queue puts the components in its own. */
    double xs[2] = {1.5, -2.5};
    qf_tensor *ts[2] = {qf_tensor_new_from(QF_FLOAT64, &sh[1], xs, sizeof xs),
                        qf_tensor_new_i64(42)};
    qf_element *in = qf_element_of(2, ts);
    const char *rev[2] = {"x", "label"};
    cr_assert_eq(qf_element_set_names(in, rev), QF_OK);
    cr_assert_eq(qf_queue_enqueue(q, in), QF_OK, "%s", qf_last_message());
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK);
    cr_assert_str_eq(qf_element_name(e, 0), "label");
    cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get_by_name(e, "label")), 42);
    const double *x = qf_tensor_cdata(qf_element_get_by_name(e, "x"));
    cr_assert(x[0] == 1.5 && x[1] == -2.5);
    qf_element_free(e);
    qf_queue_unref(q);
}

static qf_element *label_batch(int64_t from, int64_t rows)
{
    qf_shape sl = QF_SHAPE(rows), sf = QF_SHAPE(rows, 4);
    qf_tensor *l = qf_tensor_new(QF_INT64, &sl), *f = qf_tensor_new(QF_FLOAT32, &sf);
    for (int64_t i = 0; i < rows; i++) {
        ((int64_t *)qf_tensor_data(l))[i] = from + i;
        for (int k = 0; k < 4; k++)
            ((float *)qf_tensor_data(f))[i * 4 + k] = (float)((from + i) * 4 + k);
    }
    qf_tensor *ts[2] = {l, f};
    return qf_element_of(2, ts);
}

static void expect_rows(const qf_element *b, int64_t from, int64_t rows)
{
    const qf_tensor *l = qf_element_get(b, 0), *f = qf_element_get(b, 1);
    cr_assert_eq(qf_tensor_shape(l)->dims[0], rows);
    cr_assert_eq(qf_tensor_shape(f)->rank, 2);
    cr_assert_eq(qf_tensor_shape(f)->dims[0], rows);
    cr_assert_eq(qf_tensor_shape(f)->dims[1], 4);
    for (int64_t i = 0; i < rows; i++) {
        cr_assert_eq(((const int64_t *)qf_tensor_cdata(l))[i], from + i);
        for (int k = 0; k < 4; k++)
            cr_assert(((const float *)qf_tensor_cdata(f))[i * 4 + k] ==
                      (float)((from + i) * 4 + k));
    }
}

Test(queue_packed, batches_both_ways_and_a_partial_enqueue_many)
{
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(4)};
    qf_queue *q = fifo(5, 2, dt, sh, NULL);
    size_t done = 0;
    cr_assert_eq(qf_queue_enqueue_many(q, label_batch(0, 3), &done), QF_OK);
    cr_assert_eq(done, 3);
    /* Room for 2 of 4: two go in, the last two stay with the caller. */
    qf_element *b = label_batch(3, 4);
    qf_code rc = qf_queue_enqueue_many_until(q, b, qf_deadline_in_ns(20000000), &done);
    cr_assert_eq(rc, QF_DEADLINE_EXCEEDED, "%s", qf_code_name(rc));
    cr_assert_eq(done, 2);
    expect_rows(b, 5, 2);
    qf_element_free(b);

    qf_element *out = NULL;
    cr_assert_eq(qf_queue_dequeue_many(q, 2, &out), QF_OK);
    expect_rows(out, 0, 2);
    qf_element_free(out);
    qf_element *one = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &one), QF_OK);
    cr_assert_eq(qf_tensor_shape(qf_element_get(one, 1))->rank, 1);
    expect_same_values(qf_element_get(one, 0), qf_element_get(one, 0));
    cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(one, 0)), 2);
    qf_element_free(one);
    cr_assert_eq(qf_queue_close(q, false), QF_OK);
    cr_assert_eq(qf_queue_dequeue_up_to(q, 10, &out), QF_OK);
    expect_rows(out, 3, 2);
    qf_element_free(out);
    cr_assert_eq(qf_queue_dequeue_up_to(q, 10, &out), QF_OUT_OF_RANGE);
    qf_queue_unref(q);
}

/* The ways a packed queue can hold its values: in its ring's cells (a
 * bounded queue whose ring of cells is small enough), and in blocks of
 * their own (an unbounded queue and one of 2^20, whose rings spill into a
 * list, and one of 2^17, whose ring does not spill but whose cells would
 * take more than the engine makes). */
static const int64_t holds[] = {8, -1, (int64_t)1 << 20, (int64_t)1 << 17};

/* A dequeue_many that times out with some rows taken gives them back to
 * the front (the engine keeps copies of values it held in cells), in
 * order; rows given back and never taken are freed with the queue. */
Test(queue_packed, a_timed_out_batch_goes_back_to_the_front_in_order)
{
    for (size_t h = 0; h < sizeof holds / sizeof holds[0]; h++) {
        qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
        qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(4)};
        qf_queue *q = fifo(holds[h], 2, dt, sh, NULL);
        size_t done = 0;
        cr_assert_eq(qf_queue_enqueue_many(q, label_batch(0, 3), &done), QF_OK);
        qf_element *out = NULL;
        qf_code rc = qf_queue_dequeue_many_until(q, 5, qf_deadline_in_ns(20000000), &out);
        cr_assert_eq(rc, QF_DEADLINE_EXCEEDED, "capacity %lld: %s", (long long)holds[h],
                     qf_code_name(rc));
        cr_assert_eq(qf_queue_size(q), 3);
        cr_assert_eq(qf_queue_enqueue_many(q, label_batch(3, 3), &done), QF_OK);
        cr_assert_eq(qf_queue_dequeue_many(q, 5, &out), QF_OK, "%s", qf_last_message());
        expect_rows(out, 0, 5);
        qf_element_free(out);
        /* The last row goes back once more and stays there. */
        rc = qf_queue_dequeue_many_until(q, 2, qf_deadline_in_ns(1000000), &out);
        cr_assert_eq(rc, QF_DEADLINE_EXCEEDED, "%s", qf_code_name(rc));
        qf_element *one = NULL;
        cr_assert_eq(qf_queue_dequeue(q, &one), QF_OK);
        cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(one, 0)), 5);
        qf_element_free(one);
        cr_assert_eq(qf_queue_enqueue_many(q, label_batch(6, 2), &done), QF_OK);
        rc = qf_queue_dequeue_many_until(q, 3, qf_deadline_in_ns(1000000), &out);
        cr_assert_eq(rc, QF_DEADLINE_EXCEEDED, "%s", qf_code_name(rc));
        cr_assert_eq(qf_queue_size(q), 2);
        qf_queue_unref(q); /* two given back: freed with the queue (LeakSanitizer) */
    }
}

Test(queue_packed, closed_queue_leaves_the_element_with_the_caller_and_frees_leftovers)
{
    qf_dtype dt[2] = {QF_INT32, QF_UINT8};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(8)};
    qf_queue *q = fifo(8, 2, dt, sh, NULL);
    for (unsigned i = 0; i < 5; i++) {
        qf_tensor *ts[2] = {qf_tensor_new_i32((int32_t)i), patterned(QF_UINT8, &sh[1], i)};
        cr_assert_eq(qf_queue_enqueue(q, qf_element_of(2, ts)), QF_OK);
    }
    cr_assert_eq(qf_queue_close(q, true), QF_OK);
    qf_tensor *ts[2] = {qf_tensor_new_i32(9), patterned(QF_UINT8, &sh[1], 9)};
    qf_element *late = qf_element_of(2, ts);
    cr_assert_eq(qf_queue_enqueue(q, late), QF_CANCELLED);
    cr_assert_eq(*(const int32_t *)qf_tensor_cdata(qf_element_get(late, 0)), 9);
    qf_element_free(late);
    qf_element *e = NULL;
    cr_assert_eq(qf_queue_dequeue(q, &e), QF_OK); /* what is there still comes */
    cr_assert_eq(*(const int32_t *)qf_tensor_cdata(qf_element_get(e, 0)), 0);
    qf_element_free(e);
    qf_queue_unref(q); /* four left: freed with the queue (LeakSanitizer) */
}

/* ------------------------------------------------------------------ stress */

#define NP 4
#define NC 4
#define FEATURES 16

typedef struct {
    qf_queue *q;
    long per_producer;
    int batch;
    long next[NP]; /* per producer: the next seq a consumer may see (order) */
    pthread_mutex_t mu;
    uint8_t *seen;
    atomic_long received;
    atomic_int errors;
} stress;

typedef struct {
    stress *s;
    int id;
} targ;

static float feature(int64_t v, int k)
{
    return (float)((v & 0xffff) * FEATURES + k);
}

static void *producer(void *a)
{
    targ *t = a;
    stress *s = t->s;
    qf_shape sf = QF_SHAPE(FEATURES);
    for (long i = 0; i < s->per_producer;) {
        int k = s->batch;
        if (k > s->per_producer - i)
            k = (int)(s->per_producer - i);
        qf_code rc;
        if (s->batch == 1) {
            int64_t v = ((int64_t)t->id << 40) | i;
            qf_tensor *f = qf_tensor_new(QF_FLOAT32, &sf);
            for (int j = 0; j < FEATURES; j++)
                ((float *)qf_tensor_data(f))[j] = feature(v, j);
            qf_tensor *ts[2] = {qf_tensor_new_i64(v), f};
            qf_element *e = qf_element_of(2, ts);
            rc = qf_queue_enqueue(s->q, e);
            if (rc != QF_OK)
                qf_element_free(e);
        } else {
            qf_shape sl = QF_SHAPE(k), sb = QF_SHAPE(k, FEATURES);
            qf_tensor *l = qf_tensor_new(QF_INT64, &sl), *f = qf_tensor_new(QF_FLOAT32, &sb);
            for (int r = 0; r < k; r++) {
                int64_t v = ((int64_t)t->id << 40) | (i + r);
                ((int64_t *)qf_tensor_data(l))[r] = v;
                for (int j = 0; j < FEATURES; j++)
                    ((float *)qf_tensor_data(f))[r * FEATURES + j] = feature(v, j);
            }
            qf_tensor *ts[2] = {l, f};
            qf_element *b = qf_element_of(2, ts);
            rc = qf_queue_enqueue_many(s->q, b, NULL);
            if (rc != QF_OK)
                qf_element_free(b);
        }
        if (rc != QF_OK)
            atomic_fetch_add(&s->errors, 1);
        i += k;
    }
    return NULL;
}

static void take(stress *s, int64_t v, const float *f)
{
    int p = (int)(v >> 40);
    long seq = (long)(v & ((1LL << 40) - 1));
    if (p < 0 || p >= NP || seq >= s->per_producer) {
        atomic_fetch_add(&s->errors, 1);
        return;
    }
    for (int j = 0; j < FEATURES; j++)
        if (f[j] != feature(v, j))
            atomic_fetch_add(&s->errors, 1);
    uint8_t *slot = &s->seen[(size_t)p * (size_t)s->per_producer + (size_t)seq];
    if (__atomic_exchange_n(slot, 1, __ATOMIC_RELAXED))
        atomic_fetch_add(&s->errors, 1); /* twice */
    atomic_fetch_add(&s->received, 1);
}

static void *consumer(void *a)
{
    stress *s = a;
    /* Per producer, what this consumer saw last: FIFO order per producer
     * holds for each consumer's view. */
    long last[NP];
    for (int p = 0; p < NP; p++)
        last[p] = -1;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc =
            s->batch == 1 ? qf_queue_dequeue(s->q, &e) : qf_queue_dequeue_up_to(s->q, s->batch, &e);
        if (rc == QF_OUT_OF_RANGE)
            return NULL;
        if (rc != QF_OK) {
            atomic_fetch_add(&s->errors, 1);
            return NULL;
        }
        const qf_tensor *l = qf_element_get(e, 0);
        const float *f = qf_tensor_cdata(qf_element_get(e, 1));
        int64_t n = qf_tensor_num_elements(l);
        for (int64_t r = 0; r < n; r++) {
            int64_t v = ((const int64_t *)qf_tensor_cdata(l))[r];
            int p = (int)(v >> 40);
            long seq = (long)(v & ((1LL << 40) - 1));
            if (p >= 0 && p < NP) {
                if (seq <= last[p])
                    atomic_fetch_add(&s->errors, 1); /* out of order */
                last[p] = seq;
            }
            take(s, v, f + r * FEATURES);
        }
        qf_element_free(e);
    }
}

static void stress_report(void *a)
{
    stress *s = a;
    fprintf(stderr, "queue_packed stress hung: %ld of %ld received, %d errors\n",
            atomic_load(&s->received), s->per_producer * NP, atomic_load(&s->errors));
}

static void run_stress(int64_t cap, int batch, long per_producer)
{
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(FEATURES)};
    stress s = {.q = fifo(cap, 2, dt, sh, NULL),
                .per_producer = qft_stress_scale(per_producer, 1000),
                .batch = batch};
    s.seen = calloc((size_t)NP * (size_t)s.per_producer, 1);
    cr_assert_not_null(s.seen);
    qft_watchdog wd;
    qft_watchdog_start(&wd, 240, stress_report, &s);
    pthread_t pt[NP], ct[NC];
    targ ta[NP];
    for (int i = 0; i < NC; i++)
        pthread_create(&ct[i], NULL, consumer, &s);
    for (int i = 0; i < NP; i++) {
        ta[i] = (targ){&s, i};
        pthread_create(&pt[i], NULL, producer, &ta[i]);
    }
    for (int i = 0; i < NP; i++)
        pthread_join(pt[i], NULL);
    cr_assert_eq(qf_queue_close(s.q, false), QF_OK);
    for (int i = 0; i < NC; i++)
        pthread_join(ct[i], NULL);
    qft_watchdog_stop(&wd);
    cr_assert_eq(atomic_load(&s.errors), 0);
    cr_assert_eq(atomic_load(&s.received), s.per_producer * NP);
    for (long i = 0; i < NP * s.per_producer; i++)
        cr_assert_eq(s.seen[i], 1, "value %ld never arrived", i);
    free(s.seen);
    qf_queue_unref(s.q);
}

Test(queue_packed, stress_4x4_single_calls_exactly_once_in_order, .timeout = 300)
{
    run_stress(16, 1, 50000);
}

Test(queue_packed, stress_4x4_batches_exactly_once_in_order, .timeout = 300)
{
    run_stress(10, 7, 50000);
}

/* A ring large enough that small cells would be spread: the (int64,
 * float32 [16]) cells of 128 bytes are laid out in order instead
 * (queues/engine/qf_ring-impl.h, note 8), laps and all. */
Test(queue_packed, stress_4x4_capacity_1024_cells_in_order_exactly_once, .timeout = 300)
{
    run_stress(1024, 1, 50000);
}

/* Values in blocks of their own: an unbounded queue's ring spills. */
Test(queue_packed, stress_4x4_unbounded_exactly_once_in_order, .timeout = 300)
{
    run_stress(-1, 1, 20000);
}

/* Close with cancel while producers are blocked on a full queue: each
 * enqueue either went in (and arrives once) or failed and left its element
 * with its producer; what arrives is exactly what went in. */
typedef struct {
    qf_queue *q;
    atomic_long ok, got;
    atomic_int errors;
} cancel_run;

static void *cancel_producer(void *a)
{
    cancel_run *c = a;
    for (int64_t i = 0;; i++) {
        qf_tensor *ts[2] = {qf_tensor_new_i64(i), qf_tensor_new_i64(-i)};
        qf_element *e = qf_element_of(2, ts);
        qf_code rc = qf_queue_enqueue(c->q, e);
        if (rc != QF_OK) {
            if (rc != QF_CANCELLED)
                atomic_fetch_add(&c->errors, 1);
            qf_element_free(e); /* still ours */
            return NULL;
        }
        atomic_fetch_add(&c->ok, 1);
    }
}

static void *cancel_consumer(void *a)
{
    cancel_run *c = a;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_queue_dequeue(c->q, &e);
        if (rc != QF_OK) {
            if (rc != QF_OUT_OF_RANGE)
                atomic_fetch_add(&c->errors, 1);
            return NULL;
        }
        int64_t a0 = *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0));
        int64_t a1 = *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 1));
        if (a1 != -a0)
            atomic_fetch_add(&c->errors, 1);
        atomic_fetch_add(&c->got, 1);
        qf_element_free(e);
    }
}

static void cancel_report(void *a)
{
    cancel_run *c = a;
    fprintf(stderr, "queue_packed cancel hung: %ld in, %ld out\n", atomic_load(&c->ok),
            atomic_load(&c->got));
}

Test(queue_packed, cancel_under_load_loses_and_duplicates_nothing, .timeout = 300)
{
    qf_dtype dt[2] = {QF_INT64, QF_INT64};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    cancel_run c = {.q = fifo(4, 2, dt, sh, NULL)};
    qft_watchdog wd;
    qft_watchdog_start(&wd, 240, cancel_report, &c);
    pthread_t pt[NP], ct[2];
    for (int i = 0; i < NP; i++)
        pthread_create(&pt[i], NULL, cancel_producer, &c);
    for (int i = 0; i < 2; i++)
        pthread_create(&ct[i], NULL, cancel_consumer, &c);
    long target = qft_stress_scale(20000, 500);
    while (atomic_load(&c.got) < target)
        sched_yield();
    cr_assert_eq(qf_queue_close(c.q, true), QF_OK);
    for (int i = 0; i < NP; i++)
        pthread_join(pt[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(ct[i], NULL);
    qft_watchdog_stop(&wd);
    cr_assert_eq(atomic_load(&c.errors), 0);
    cr_assert_eq(atomic_load(&c.got), atomic_load(&c.ok));
    qf_queue_unref(c.q);
}

/* ------------------------------------------- inline queues of numbers */

/* An inline queue (one scalar number of at most 8 bytes) carries the value
 * in its slot; what a dequeue gives is an element whose tensor shares one
 * block with it (as a packed queue's), and a dequeue_many's batch the same.
 * For every such dtype: the value arrives whole, the tensor taken out of the
 * element outlives it and is the caller's to write, and the element passes
 * on through a second queue. */
Test(queue_packed, an_inline_queues_element_and_tensor_share_a_block)
{
    for (size_t k = 0; k < sizeof(numeric) / sizeof(numeric[0]); k++) {
        qf_dtype dt = numeric[k];
        if (qf_dtype_size(dt) > 8)
            continue; /* complex128: not inline */
        qf_shape sc = qf_shape_scalar();
        qf_queue *a = fifo(8, 1, &dt, &sc, NULL), *b = fifo(8, 1, &dt, &sc, NULL);
        cr_assert(qf_queue_is_inline(a), "%s", qf_dtype_name(dt));
        for (unsigned seed = 1; seed <= 3; seed++) {
            qf_tensor *t = patterned(dt, &sc, seed);
            cr_assert_eq(qf_queue_enqueue(a, qf_element_of(1, &t)), QF_OK, "%s", qf_last_message());
        }
        qf_element *e = NULL;
        /* The first: its tensor taken out, kept past the element, written. */
        cr_assert_eq(qf_queue_dequeue(a, &e), QF_OK);
        qf_tensor *got = qf_element_take(e, 0);
        qf_element_free(e);
        qf_tensor *want = patterned(dt, &sc, 1);
        expect_same_values(got, want);
        memset(qf_tensor_data(got), 0, qf_dtype_size(dt));
        qf_tensor_unref(got);
        qf_tensor_unref(want);
        /* The second: passed on whole to another queue; its tensor still
         * held here too. */
        cr_assert_eq(qf_queue_dequeue(a, &e), QF_OK);
        qf_tensor *held = qf_tensor_ref(qf_element_get(e, 0));
        cr_assert_eq(qf_queue_enqueue(b, e), QF_OK, "%s", qf_last_message());
        want = patterned(dt, &sc, 2);
        expect_same_values(held, want);
        cr_assert_eq(qf_queue_dequeue(b, &e), QF_OK);
        expect_same_values(qf_element_get(e, 0), want);
        qf_element_free(e);
        qf_tensor_unref(held);
        qf_tensor_unref(want);
        /* The third, as a batch of one, whose tensor outlives the batch. */
        cr_assert_eq(qf_queue_dequeue_many(a, 1, &e), QF_OK);
        got = qf_element_take(e, 0);
        qf_element_free(e);
        qf_shape one = QF_SHAPE(1);
        cr_assert(qf_shape_equal(qf_tensor_shape(got), &one));
        want = patterned(dt, &sc, 3);
        cr_assert_eq(memcmp(qf_tensor_cdata(got), qf_tensor_cdata(want), qf_dtype_size(dt)), 0,
                     "%s", qf_dtype_name(dt));
        qf_tensor_unref(got);
        qf_tensor_unref(want);
        qf_queue_unref(a);
        qf_queue_unref(b);
    }
}

/* A batch of an inline queue of int64 taken whole and in pieces: the values
 * in order, its shape [n], and the batch handed on through enqueue_many
 * into a second queue with its tensor still held by the caller. */
Test(queue_packed, an_inline_queues_batch_passes_on_and_outlives_its_element)
{
    qf_dtype dt = QF_INT64;
    qf_shape sc = qf_shape_scalar();
    qf_queue *a = fifo(64, 1, &dt, &sc, NULL), *b = fifo(64, 1, &dt, &sc, NULL);
    for (int64_t i = 0; i < 40; i++) {
        qf_tensor *t = qf_tensor_new_i64(i * 7 - 3);
        cr_assert_eq(qf_queue_enqueue(a, qf_element_of(1, &t)), QF_OK);
    }
    qf_element *batch = NULL;
    cr_assert_eq(qf_queue_dequeue_many(a, 32, &batch), QF_OK, "%s", qf_last_message());
    qf_tensor *held = qf_tensor_ref(qf_element_get(batch, 0));
    qf_shape want_sh = QF_SHAPE(32);
    cr_assert(qf_shape_equal(qf_tensor_shape(held), &want_sh));
    cr_assert_eq(qf_queue_enqueue_many(b, batch, NULL), QF_OK, "%s", qf_last_message());
    const int64_t *v = qf_tensor_cdata(held);
    for (int64_t i = 0; i < 32; i++)
        cr_assert_eq(v[i], i * 7 - 3);
    qf_tensor_unref(held);
    cr_assert_eq(qf_queue_close(a, false), QF_OK); /* up_to gives fewer once closed */
    cr_assert_eq(qf_queue_dequeue_up_to(a, 32, &batch), QF_OK, "%s", qf_last_message());
    qf_tensor *rest = qf_element_take(batch, 0);
    qf_element_free(batch);
    cr_assert_eq(qf_tensor_num_elements(rest), 8);
    for (int64_t i = 0; i < 8; i++)
        cr_assert_eq(((const int64_t *)qf_tensor_cdata(rest))[i], (32 + i) * 7 - 3);
    qf_tensor_unref(rest);
    for (int64_t i = 0; i < 32; i++) {
        qf_element *e = NULL;
        cr_assert_eq(qf_queue_dequeue(b, &e), QF_OK);
        cr_assert_eq(*(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0)), i * 7 - 3);
        qf_element_free(e);
    }
    qf_queue_unref(a);
    qf_queue_unref(b);
}
