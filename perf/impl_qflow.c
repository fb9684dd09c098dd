/* impl_qflow.c - qflow's FIFOQueue behind the benchmark interface, through
 * the zero-allocation inline pointer path (qf_ptr_queue_new and the _ptr
 * calls). A status other than the expected end-of-stream codes is a bug
 * in the queue: the benchmark stops with its message. */
#include "baseline.h"
#include "bench.h"
#include "qflow.h"

static bq *qf_create(size_t capacity, unsigned flags)
{
    unsigned qflags = 0;
    if (flags & BQ_SINGLE_PRODUCER)
        qflags |= QF_QUEUE_SINGLE_PRODUCER;
    if (flags & BQ_SINGLE_CONSUMER)
        qflags |= QF_QUEUE_SINGLE_CONSUMER;
    qf_queue *q = NULL;
    qf_code c = qf_ptr_queue_new((int64_t)capacity, "bench", qflags, NULL, &q);
    if (c != QF_OK)
        bench_fail("qf_ptr_queue_new: %s: %s", qf_code_name(c), qf_last_message());
    return (bq *)q;
}

static void qf_destroy(bq *q)
{
    qf_queue_unref((qf_queue *)q);
}

static int check(qf_code c, qf_code end, const char *what)
{
    if (c == QF_OK)
        return 0;
    if (c == end)
        return -1;
    bench_fail("%s: %s: %s", what, qf_code_name(c), qf_last_message());
}

static int qf_enqueue(bq *q, void *p)
{
    return check(qf_queue_enqueue_ptr((qf_queue *)q, p), QF_CANCELLED, "qf_queue_enqueue_ptr");
}

static int qf_dequeue(bq *q, void **ret_p)
{
    return check(qf_queue_dequeue_ptr((qf_queue *)q, ret_p), QF_OUT_OF_RANGE,
                 "qf_queue_dequeue_ptr");
}

static int qf_enqueue_many(bq *q, void *const *ps, size_t n)
{
    return check(qf_queue_enqueue_many_ptrs((qf_queue *)q, ps, n, NULL), QF_CANCELLED,
                 "qf_queue_enqueue_many_ptrs");
}

/* dequeue_many fails once the queue is closed with fewer than n left (and
 * puts back what it took); then dequeue_up_to takes what is left. */
static size_t qf_dequeue_many(bq *q, void **ret_ps, size_t n)
{
    qf_queue *qq = (qf_queue *)q;
    if (check(qf_queue_dequeue_many_ptrs(qq, n, ret_ps), QF_OUT_OF_RANGE,
              "qf_queue_dequeue_many_ptrs") == 0)
        return n;
    size_t got = 0;
    if (check(qf_queue_dequeue_up_to_ptrs(qq, n, ret_ps, &got), QF_OUT_OF_RANGE,
              "qf_queue_dequeue_up_to_ptrs") != 0)
        return 0;
    return got;
}

static void qf_close(bq *q)
{
    qf_code c = qf_queue_close((qf_queue *)q, false);
    if (c != QF_OK)
        bench_fail("qf_queue_close: %s: %s", qf_code_name(c), qf_last_message());
}

const bq_impl bq_qflow = {
    .name = "qflow",
    .note = NULL,
    .create = qf_create,
    .destroy = qf_destroy,
    .enqueue = qf_enqueue,
    .dequeue = qf_dequeue,
    .enqueue_many = qf_enqueue_many,
    .dequeue_many = qf_dequeue_many,
    .close = qf_close,
};
