/* impl_qflow_kinds.c - qflow's RandomShuffleQueue, PriorityQueue and
 * PaddingFIFOQueue behind the benchmark interface (baseline.h), with the
 * element work of bench_kinds.h. A status other than the expected
 * end-of-stream codes is a bug in the queue: the benchmark stops with its
 * message. */
#include "bench.h"
#include "bench_kinds.h"
#include "impl_qflow.h"

_Noreturn static void fail_on(qf_code c, const char *what)
{
    bench_fail("%s: %s: %s", what, qf_code_name(c), qf_last_message());
}

/* ------------------------------------------------------------- shuffle */

static bq *shuffle_create(size_t capacity, unsigned flags)
{
    (void)flags;
    qf_dtype dt = QF_PTR;
    qf_shape sh = qf_shape_scalar();
    /* Fixed seeds: the same draws every repetition. */
    qf_queue_options o = {.capacity = (int64_t)capacity,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .name = "bench",
                          .min_after_dequeue = KB_MIN_AFTER_DEQUEUE,
                          .seed = 1729,
                          .seed2 = 87654321};
    qf_queue *q = NULL;
    qf_code c = qf_random_shuffle_queue_new(&o, &q);
    if (c != QF_OK)
        fail_on(c, "qf_random_shuffle_queue_new");
    if (!qf_queue_is_inline(q))
        bench_fail("qf_random_shuffle_queue_new: a QF_PTR queue is not inline");
    return (bq *)q;
}

static int shuffle_enqueue(bq *q, void *p)
{
    return bq_qflow_check(qf_queue_enqueue_ptr((qf_queue *)q, p), QF_CANCELLED,
                          "qf_queue_enqueue_ptr");
}

static int shuffle_dequeue(bq *q, void **ret_p)
{
    return bq_qflow_check(qf_queue_dequeue_ptr((qf_queue *)q, ret_p), QF_OUT_OF_RANGE,
                          "qf_queue_dequeue_ptr");
}

const bq_impl bq_qflow_shuffle = {
    .name = "qflow",
    .note = NULL,
    .create = shuffle_create,
    .destroy = bq_qflow_destroy,
    .enqueue = shuffle_enqueue,
    .dequeue = shuffle_dequeue,
    .close = bq_qflow_close,
};

/* ------------------------------------------------------------ priority */

static bq *priority_create(size_t capacity, unsigned flags)
{
    (void)flags;
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options o = {.capacity = (int64_t)capacity,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .name = "bench"};
    qf_queue *q = NULL;
    qf_code c = qf_priority_queue_new(&o, &q);
    if (c != QF_OK)
        fail_on(c, "qf_priority_queue_new");
    return (bq *)q;
}

static int priority_enqueue(bq *q, void *p)
{
    qf_element *e = kb_prio_element(p);
    qf_code c = qf_queue_enqueue((qf_queue *)q, e);
    if (c != QF_OK)
        qf_element_free(e); /* a failed enqueue leaves it with the caller */
    return bq_qflow_check(c, QF_CANCELLED, "qf_queue_enqueue");
}

static int priority_dequeue(bq *q, void **ret_p)
{
    qf_element *e;
    if (bq_qflow_check(qf_queue_dequeue((qf_queue *)q, &e), QF_OUT_OF_RANGE, "qf_queue_dequeue") !=
        0)
        return -1;
    *ret_p = kb_prio_open(e);
    return 0;
}

const bq_impl bq_qflow_priority = {
    .name = "qflow",
    .note = NULL,
    .create = priority_create,
    .destroy = bq_qflow_destroy,
    .enqueue = priority_enqueue,
    .dequeue = priority_dequeue,
    .close = bq_qflow_close,
};

/* ------------------------------------------------------------- padding */

static bq *padding_create(size_t capacity, unsigned flags)
{
    (void)flags;
    qf_dtype dt = QF_INT64;
    qf_shape sh = QF_SHAPE(QF_UNKNOWN_DIM);
    qf_queue_options o = {.capacity = (int64_t)capacity,
                          .num_components = 1,
                          .dtypes = &dt,
                          .shapes = &sh,
                          .name = "bench"};
    qf_queue *q = NULL;
    qf_code c = qf_padding_fifo_queue_new(&o, &q);
    if (c != QF_OK)
        fail_on(c, "qf_padding_fifo_queue_new");
    return (bq *)q;
}

static int padding_enqueue(bq *q, void *p)
{
    qf_element *e = kb_pad_element(p);
    qf_code c = qf_queue_enqueue((qf_queue *)q, e);
    if (c != QF_OK)
        qf_element_free(e);
    return bq_qflow_check(c, QF_CANCELLED, "qf_queue_enqueue");
}

/* dequeue_many fails once the queue is closed with fewer than n left (and
 * puts back what it took); then dequeue_up_to takes what is left. */
static size_t padding_dequeue_many(bq *q, void **ret_ps, size_t n)
{
    qf_queue *qq = (qf_queue *)q;
    qf_element *b;
    if (bq_qflow_check(qf_queue_dequeue_many(qq, (int64_t)n, &b), QF_OUT_OF_RANGE,
                       "qf_queue_dequeue_many") != 0 &&
        bq_qflow_check(qf_queue_dequeue_up_to(qq, (int64_t)n, &b), QF_OUT_OF_RANGE,
                       "qf_queue_dequeue_up_to") != 0)
        return 0;
    const qf_tensor *t = qf_element_get(b, 0);
    size_t got = (size_t)qf_tensor_shape(t)->dims[0];
    if (got == 0 || got > n)
        bench_fail("qflow padding: a batch of %zu rows for a request of %zu", got, n);
    kb_pad_check(t, got, ret_ps, "qflow padding");
    qf_element_free(b);
    return got;
}

static int padding_dequeue(bq *q, void **ret_p)
{
    return padding_dequeue_many(q, ret_p, 1) == 1 ? 0 : -1;
}

const bq_impl bq_qflow_padding = {
    .name = "qflow",
    .note = NULL,
    .create = padding_create,
    .destroy = bq_qflow_destroy,
    .enqueue = padding_enqueue,
    .dequeue = padding_dequeue,
    .dequeue_many = padding_dequeue_many,
    .close = bq_qflow_close,
};
