/* impl_qflow_i64.c - qflow's FIFOQueue of one int64 scalar component
 * behind the benchmark interface, through the element calls a user with
 * typed tensors makes: a tensor and an element per item on each side
 * (qf_tensor_new_i64, qf_element_of, qf_queue_enqueue; qf_queue_dequeue,
 * qf_element_free). The value carried is the benchmark's pointer value as
 * an int64. Such a queue stores the numbers in its slots (qf_queue_is_inline()),
 * so the tensor and element a producer made are freed on its own thread by
 * the enqueue and the consumer's come from its own caches. Set beside the
 * pointer queue (impl "qflow") in one run, it shows what the element path
 * costs (issue 18: >= 0.5x the pointer queue, no allocation in the steady
 * state). The two-int64 (qflow_int64x2) and (int64 label, float32 [16]
 * features) (qflow_tuple) queues below are packed (issue 27): the values
 * travel in the ring's cells, the producer's tensors and element are freed
 * on its thread and the consumer's made in one block from its own cache. */
#include <stdint.h>

#include "baseline.h"
#include "bench.h"
#include "impl_qflow.h"
#include "qflow.h"

static bq *i64_create(size_t capacity, unsigned flags)
{
    (void)flags;
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {
        .capacity = (int64_t)capacity, .num_components = 1, .dtypes = &dt, .shapes = &sh};
    qf_queue *q = NULL;
    if (qf_fifo_queue_new(&o, &q) != QF_OK)
        bench_fail("qf_fifo_queue_new: %s", qf_last_message());
    return (bq *)q;
}

static int i64_enqueue(bq *q, void *p)
{
    qf_tensor *t = qf_tensor_new_i64((int64_t)(uintptr_t)p);
    qf_element *e = t ? qf_element_of(1, &t) : NULL;
    if (!e)
        bench_fail("making an int64 element: %s", qf_last_message());
    return bq_qflow_check(qf_queue_enqueue((qf_queue *)q, e), QF_CANCELLED, "qf_queue_enqueue");
}

static int i64_dequeue(bq *q, void **ret_p)
{
    qf_element *e = NULL;
    int rc =
        bq_qflow_check(qf_queue_dequeue((qf_queue *)q, &e), QF_OUT_OF_RANGE, "qf_queue_dequeue");
    if (rc != 0)
        return rc;
    *ret_p = (void *)(uintptr_t) * (const int64_t *)qf_tensor_cdata(qf_element_get(e, 0));
    qf_element_free(e);
    return 0;
}

/* A batch is one [n] int64 tensor in one element each way (enqueue_many,
 * dequeue_many; dequeue_up_to for what is left after the close). */
static int i64_enqueue_many(bq *q, void *const *ps, size_t n)
{
    qf_shape sh = QF_SHAPE((int64_t)n);
    qf_tensor *t = qf_tensor_new(QF_INT64, &sh);
    if (!t)
        bench_fail("making an int64 batch: %s", qf_last_message());
    int64_t *v = qf_tensor_data(t);
    for (size_t i = 0; i < n; i++)
        v[i] = (int64_t)(uintptr_t)ps[i];
    return bq_qflow_check(qf_queue_enqueue_many((qf_queue *)q, qf_element_of(1, &t), NULL),
                          QF_CANCELLED, "qf_queue_enqueue_many");
}

static size_t i64_dequeue_many(bq *q, void **ret_ps, size_t n)
{
    qf_queue *qq = (qf_queue *)q;
    qf_element *b = NULL;
    if (bq_qflow_check(qf_queue_dequeue_many(qq, (int64_t)n, &b), QF_OUT_OF_RANGE,
                       "qf_queue_dequeue_many") != 0 &&
        bq_qflow_check(qf_queue_dequeue_up_to(qq, (int64_t)n, &b), QF_OUT_OF_RANGE,
                       "qf_queue_dequeue_up_to") != 0)
        return 0; /* closed and drained */
    const qf_tensor *t = qf_element_get(b, 0);
    size_t k = (size_t)qf_tensor_num_elements(t);
    const int64_t *v = qf_tensor_cdata(t);
    for (size_t i = 0; i < k; i++)
        ret_ps[i] = (void *)(uintptr_t)v[i];
    qf_element_free(b);
    return k;
}

const bq_impl bq_qflow_i64 = {
    .name = "qflow_int64",
    .note = "FIFOQueue of one int64 scalar, a tensor and an element per item on each side",
    .create = i64_create,
    .destroy = bq_qflow_destroy,
    .enqueue = i64_enqueue,
    .dequeue = i64_dequeue,
    .enqueue_many = i64_enqueue_many,
    .dequeue_many = i64_dequeue_many,
    .close = bq_qflow_close,
};

/* Two int64 scalar components (the value and its negation): a packed
 * queue, so 16 bytes of values travel from the producer's core to the
 * consumer's in a cell of the ring, not the element and its two tensors. */
static bq *pair_create(size_t capacity, unsigned flags)
{
    (void)flags;
    qf_dtype dt[2] = {QF_INT64, QF_INT64};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options o = {
        .capacity = (int64_t)capacity, .num_components = 2, .dtypes = dt, .shapes = sh};
    qf_queue *q = NULL;
    if (qf_fifo_queue_new(&o, &q) != QF_OK)
        bench_fail("qf_fifo_queue_new: %s", qf_last_message());
    return (bq *)q;
}

static int pair_enqueue(bq *q, void *p)
{
    int64_t v = (int64_t)(uintptr_t)p;
    qf_tensor *t[2] = {qf_tensor_new_i64(v), qf_tensor_new_i64(-v)};
    qf_element *e = t[0] && t[1] ? qf_element_of(2, t) : NULL;
    if (!e)
        bench_fail("making a two-int64 element: %s", qf_last_message());
    return bq_qflow_check(qf_queue_enqueue((qf_queue *)q, e), QF_CANCELLED, "qf_queue_enqueue");
}

const bq_impl bq_qflow_i64_pair = {
    .name = "qflow_int64x2",
    .note = "FIFOQueue of two int64 scalars, a tensor pair and an element per item on each side; "
            "packed: the values cross the cores in a cell of the ring",
    .create = pair_create,
    .destroy = bq_qflow_destroy,
    .enqueue = pair_enqueue,
    .dequeue = i64_dequeue,
    .enqueue_many = NULL,
    .dequeue_many = NULL,
    .close = bq_qflow_close,
};

/* The shape of a TF1 input pipeline's example: an int64 label (the value)
 * and a float32 [16] feature row derived from it, which the consumer reads
 * and checks as a training step would read it. Packed like the pair: 72
 * bytes of values cross the cores per item, in a 128-byte cell. */
#define TUPLE_FEATURES 16

static bq *tuple_create(size_t capacity, unsigned flags)
{
    (void)flags;
    qf_dtype dt[2] = {QF_INT64, QF_FLOAT32};
    qf_shape sh[2] = {qf_shape_scalar(), QF_SHAPE(TUPLE_FEATURES)};
    qf_queue_options o = {
        .capacity = (int64_t)capacity, .num_components = 2, .dtypes = dt, .shapes = sh};
    qf_queue *q = NULL;
    if (qf_fifo_queue_new(&o, &q) != QF_OK)
        bench_fail("qf_fifo_queue_new: %s", qf_last_message());
    return (bq *)q;
}

/* Feature i of the row sent with label v: whole numbers below 2^20, so
 * float32 holds them exactly and the check can compare with ==. */
static float tuple_feature(int64_t v, int i)
{
    return (float)(((uint32_t)v & 0xffffu) * TUPLE_FEATURES + (uint32_t)i);
}

/* Fails the benchmark unless row f is the one sent with label v. */
static void tuple_check(const char *impl, int64_t v, const float *f)
{
    for (int i = 0; i < TUPLE_FEATURES; i++)
        if (f[i] != tuple_feature(v, i))
            bench_fail("%s: label %#llx arrived with feature %d = %g, sent %g", impl,
                       (unsigned long long)v, i, (double)f[i], (double)tuple_feature(v, i));
}

static int tuple_enqueue(bq *q, void *p)
{
    int64_t v = (int64_t)(uintptr_t)p;
    qf_shape sh = QF_SHAPE(TUPLE_FEATURES);
    qf_tensor *t[2] = {qf_tensor_new_i64(v), qf_tensor_new(QF_FLOAT32, &sh)};
    if (t[1]) {
        float *f = qf_tensor_data(t[1]);
        for (int i = 0; i < TUPLE_FEATURES; i++)
            f[i] = tuple_feature(v, i);
    }
    qf_element *e = t[0] && t[1] ? qf_element_of(2, t) : NULL;
    if (!e)
        bench_fail("making a (label, features) element: %s", qf_last_message());
    return bq_qflow_check(qf_queue_enqueue((qf_queue *)q, e), QF_CANCELLED, "qf_queue_enqueue");
}

static int tuple_dequeue(bq *q, void **ret_p)
{
    qf_element *e = NULL;
    int rc =
        bq_qflow_check(qf_queue_dequeue((qf_queue *)q, &e), QF_OUT_OF_RANGE, "qf_queue_dequeue");
    if (rc != 0)
        return rc;
    int64_t v = *(const int64_t *)qf_tensor_cdata(qf_element_get(e, 0));
    tuple_check("qflow_tuple", v, qf_tensor_cdata(qf_element_get(e, 1)));
    *ret_p = (void *)(uintptr_t)v;
    qf_element_free(e);
    return 0;
}

const bq_impl bq_qflow_tuple = {
    .name = "qflow_tuple",
    .note = "FIFOQueue of (int64 label, float32 [16] features), a TF1 input pipeline's example, "
            "packed: the values cross the cores in a cell of the ring; the consumer checks the row",
    .create = tuple_create,
    .destroy = bq_qflow_destroy,
    .enqueue = tuple_enqueue,
    .dequeue = tuple_dequeue,
    .enqueue_many = NULL,
    .dequeue_many = NULL,
    .close = bq_qflow_close,
};

/* The same two queues through the _values calls (qf_queue_enqueue_values,
 * qf_queue_dequeue_values): the values go from the producer's buffers into
 * a cell of the ring and from there into the consumer's, with no tensor,
 * element or block on either side (both fit a cell); what a C producer of
 * fixed-shape examples would call. */
static int pair_values_enqueue(bq *q, void *p)
{
    int64_t v[2] = {(int64_t)(uintptr_t)p, -(int64_t)(uintptr_t)p};
    const void *vals[2] = {&v[0], &v[1]};
    return bq_qflow_check(qf_queue_enqueue_values((qf_queue *)q, vals), QF_CANCELLED,
                          "qf_queue_enqueue_values");
}

static int pair_values_dequeue(bq *q, void **ret_p)
{
    int64_t v[2];
    void *outs[2] = {&v[0], &v[1]};
    int rc = bq_qflow_check(qf_queue_dequeue_values((qf_queue *)q, outs), QF_OUT_OF_RANGE,
                            "qf_queue_dequeue_values");
    if (rc != 0)
        return rc;
    if (v[1] != -v[0])
        bench_fail("qflow_int64x2_values: %lld arrived with %lld", (long long)v[0],
                   (long long)v[1]);
    *ret_p = (void *)(uintptr_t)v[0];
    return 0;
}

const bq_impl bq_qflow_i64_pair_values = {
    .name = "qflow_int64x2_values",
    .note = "the two-int64 FIFOQueue through qf_queue_enqueue_values / dequeue_values: the "
            "caller's buffers to a cell of the ring and back, no tensor or element",
    .create = pair_create,
    .destroy = bq_qflow_destroy,
    .enqueue = pair_values_enqueue,
    .dequeue = pair_values_dequeue,
    .enqueue_many = NULL,
    .dequeue_many = NULL,
    .close = bq_qflow_close,
};

static int tuple_values_enqueue(bq *q, void *p)
{
    int64_t v = (int64_t)(uintptr_t)p;
    float f[TUPLE_FEATURES];
    for (int i = 0; i < TUPLE_FEATURES; i++)
        f[i] = tuple_feature(v, i);
    const void *vals[2] = {&v, f};
    return bq_qflow_check(qf_queue_enqueue_values((qf_queue *)q, vals), QF_CANCELLED,
                          "qf_queue_enqueue_values");
}

static int tuple_values_dequeue(bq *q, void **ret_p)
{
    int64_t v;
    float f[TUPLE_FEATURES];
    void *outs[2] = {&v, f};
    int rc = bq_qflow_check(qf_queue_dequeue_values((qf_queue *)q, outs), QF_OUT_OF_RANGE,
                            "qf_queue_dequeue_values");
    if (rc != 0)
        return rc;
    tuple_check("qflow_tuple_values", v, f);
    *ret_p = (void *)(uintptr_t)v;
    return 0;
}

const bq_impl bq_qflow_tuple_values = {
    .name = "qflow_tuple_values",
    .note = "the (int64 label, float32 [16] features) FIFOQueue through qf_queue_enqueue_values / "
            "dequeue_values; the consumer checks the row",
    .create = tuple_create,
    .destroy = bq_qflow_destroy,
    .enqueue = tuple_values_enqueue,
    .dequeue = tuple_values_dequeue,
    .enqueue_many = NULL,
    .dequeue_many = NULL,
    .close = bq_qflow_close,
};
