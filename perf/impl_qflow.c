/* impl_qflow.c - qflow's FIFOQueue behind the benchmark interface, through
 * the zero-allocation inline pointer path (qf_ptr_queue_new and the _ptr
 * calls). A status other than the expected end-of-stream codes is a bug
 * in the queue: the benchmark stops with its message.
 *
 * Test knob: QFLOW_BENCH_SLOWDOWN=F (a factor from 1 to 10, e.g. 1.3 or
 * 3.5) in the environment makes qflow's FIFO path do F times the work:
 * every element travels with F - 1 filler elements on average (each
 * enqueue also enqueues fillers, each enqueue_many makes calls of as many
 * fillers first, each dequeue takes fillers until it has an element; a
 * fraction is spread over the calls of each thread: 1.3 adds a filler to 3
 * calls in 10), so every queue operation, ring slot, wake and sleep
 * happens F times per element.
 * That is a qflow whose FIFO path is about F times slower, for testing the
 * regression gate (perf/gate-test.sh expects --compare to fail with F = 1.3
 * and 3.5);
 * the queue itself is untouched, the baselines do not see it, and the
 * results file records it. queue.tput.tasks, whose tasks call the poll
 * forms themselves, sends the same fillers (bq_qflow_fillers_now()). */
#include <stdio.h>
#include <stdlib.h>

#include "baseline.h"
#include "bench.h"
#include "bench_run.h"
#include "impl_qflow.h"
#include "qflow.h"

#define MAX_SLOWDOWN 10
#define MAX_BATCH 64 /* the largest batch the queue benchmarks use */

static double slowdown = -1; /* set once, before any benchmark thread runs */
/* The fraction of a filler this thread still owes (F - 1 per call). */
static _Thread_local double owed;

/* How many fillers (or filler calls) go with this call: F - 1 on average. */
static int fillers_now(void)
{
    owed += slowdown - 1;
    int k = (int)owed;
    owed -= k;
    return k;
}

/* A value no benchmark sends: producers send (id << 48) | seq (id << 40 in
 * queue.tput.tasks) with small sequence numbers, never a static object's
 * address. */
static char filler_object;
#define FILLER ((void *)&filler_object)

int bq_qflow_fillers_now(void)
{
    return bench_slowdown() > 1 ? fillers_now() : 0;
}

void *bq_qflow_filler(void)
{
    return FILLER;
}

double bench_slowdown(void)
{
    if (slowdown < 0) {
        const char *s = getenv("QFLOW_BENCH_SLOWDOWN");
        char *end = NULL;
        double f = s && *s ? strtod(s, &end) : 1;
        if (s && *s && (*end || !(f >= 1 && f <= MAX_SLOWDOWN)))
            bench_fail("QFLOW_BENCH_SLOWDOWN='%s': want a factor from 1 to %d", s, MAX_SLOWDOWN);
        slowdown = f;
    }
    return slowdown;
}

static int pool_workers = -1; /* --workers; set before any benchmark thread runs */

void bench_set_workers(int n)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", n);
    if (setenv("GOMAXPROCS", buf, 1) != 0)
        bench_fail("setting GOMAXPROCS for the Go peer failed");
    pool_workers = n;
}

int bench_workers(void)
{
    return pool_workers;
}

static bq *qf_create(size_t capacity, unsigned flags)
{
    bench_slowdown(); /* read the knob before the threads start */
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

void bq_qflow_destroy(bq *q)
{
    qf_queue_unref((qf_queue *)q);
}

int bq_qflow_check(qf_code c, qf_code end, const char *what)
{
    if (c == QF_OK)
        return 0;
    if (c == end)
        return -1;
    bench_fail("%s: %s: %s", what, qf_code_name(c), qf_last_message());
}

static int qf_enqueue(bq *q, void *p)
{
    for (int i = slowdown > 1 ? fillers_now() : 0; i > 0; i--)
        if (bq_qflow_check(qf_queue_enqueue_ptr((qf_queue *)q, FILLER), QF_CANCELLED,
                           "qf_queue_enqueue_ptr") != 0)
            return -1;
    return bq_qflow_check(qf_queue_enqueue_ptr((qf_queue *)q, p), QF_CANCELLED,
                          "qf_queue_enqueue_ptr");
}

static int qf_dequeue(bq *q, void **ret_p)
{
    void *p;
    do {
        if (bq_qflow_check(qf_queue_dequeue_ptr((qf_queue *)q, &p), QF_OUT_OF_RANGE,
                           "qf_queue_dequeue_ptr") != 0)
            return -1;
    } while (p == FILLER);
    *ret_p = p;
    return 0;
}

static int qf_enqueue_many(bq *q, void *const *ps, size_t n)
{
    if (slowdown > 1) {
        /* F - 1 calls of n fillers (on average) before the batch: F times the
         * calls, not only the slots (one larger call costs less than twice
         * a call on a batching path, and would not slow it F times). */
        void *fill[MAX_BATCH];
        if (n > MAX_BATCH)
            bench_fail("qflow: a batch of %zu is more than %d", n, MAX_BATCH);
        for (size_t i = 0; i < n; i++)
            fill[i] = FILLER;
        for (int f = fillers_now(); f > 0; f--)
            if (bq_qflow_check(qf_queue_enqueue_many_ptrs((qf_queue *)q, fill, n, NULL),
                               QF_CANCELLED, "qf_queue_enqueue_many_ptrs") != 0)
                return -1;
    }
    return bq_qflow_check(qf_queue_enqueue_many_ptrs((qf_queue *)q, ps, n, NULL), QF_CANCELLED,
                          "qf_queue_enqueue_many_ptrs");
}

/* Drop the fillers from ps[0..n); returns how many elements remain. */
static size_t drop_fillers(void **ps, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i] != FILLER)
            ps[k++] = ps[i];
    return k;
}

/* dequeue_many fails once the queue is closed with fewer than n left (and
 * puts back what it took); then dequeue_up_to takes what is left. With the
 * knob, fillers are dropped and the call asks again for what is missing
 * (never more: an element it takes is always one it returns). */
static size_t qf_dequeue_many(bq *q, void **ret_ps, size_t n)
{
    qf_queue *qq = (qf_queue *)q;
    size_t got = 0;
    while (got < n) {
        size_t want = n - got, k = want;
        if (bq_qflow_check(qf_queue_dequeue_many_ptrs(qq, want, ret_ps + got), QF_OUT_OF_RANGE,
                           "qf_queue_dequeue_many_ptrs") != 0) {
            k = 0;
            if (bq_qflow_check(qf_queue_dequeue_up_to_ptrs(qq, want, ret_ps + got, &k),
                               QF_OUT_OF_RANGE, "qf_queue_dequeue_up_to_ptrs") != 0)
                return got; /* closed and drained */
        }
        got += slowdown > 1 ? drop_fillers(ret_ps + got, k) : k;
        if (slowdown <= 1 && got < n)
            return got; /* what was left after the close */
    }
    return got;
}

void bq_qflow_close(bq *q)
{
    qf_code c = qf_queue_close((qf_queue *)q, false);
    if (c != QF_OK)
        bench_fail("qf_queue_close: %s: %s", qf_code_name(c), qf_last_message());
}

const bq_impl bq_qflow = {
    .name = "qflow",
    .note = NULL,
    .create = qf_create,
    .destroy = bq_qflow_destroy,
    .enqueue = qf_enqueue,
    .dequeue = qf_dequeue,
    .enqueue_many = qf_enqueue_many,
    .dequeue_many = qf_dequeue_many,
    .close = bq_qflow_close,
};
