// baseline_moodycamel.cc - moodycamel's BlockingConcurrentQueue behind
// baseline.h (Debian libconcurrentqueue-dev), the C++ queue a user would
// most likely pick instead of qflow's.
//
// It has no capacity bound and no close: enqueue never blocks (it
// allocates blocks as the queue grows; the initial blocks hold the
// capacity), and close() enqueues one NULL per possible consumer. A
// consumer that takes a NULL drains what is left with try_dequeue (after
// close no enqueue runs concurrently, so an empty try means empty), puts a
// NULL back for the next consumer and reports the end.
#include <atomic>
#include <concurrentqueue/blockingconcurrentqueue.h>
#include <new>

extern "C" {
#include "baseline.h"
}

/* End markers: at least one per consumer thread the harness may start
 * (QB_MAX_THREADS in bench_queue.h). */
static const int end_markers = 16;

struct bq {
    moodycamel::BlockingConcurrentQueue<void *> q;
    explicit bq(size_t cap) : q(cap) {}
};

static bq *mc_create(size_t capacity, unsigned flags)
{
    (void)flags;
    return new (std::nothrow) bq(capacity);
}

static void mc_destroy(bq *q)
{
    delete q;
}

static int mc_enqueue(bq *q, void *p)
{
    return q->q.enqueue(p) ? 0 : -1;
}

static int mc_dequeue(bq *q, void **ret_p)
{
    void *p;
    q->q.wait_dequeue(p);
    if (p) {
        *ret_p = p;
        return 0;
    }
    while (q->q.try_dequeue(p)) {
        if (p) {
            *ret_p = p;
            q->q.enqueue(nullptr); /* keep the end marker for the next call */
            return 0;
        }
    }
    q->q.enqueue(nullptr);
    return -1;
}

static void mc_close(bq *q)
{
    for (int i = 0; i < end_markers; i++)
        q->q.enqueue(nullptr);
}

extern "C" const bq_impl bq_moodycamel = {
    "moodycamel",
    "BlockingConcurrentQueue: unbounded (enqueue never blocks), no close: end markers",
    mc_create,
    mc_destroy,
    mc_enqueue,
    mc_dequeue,
    nullptr,
    nullptr,
    mc_close,
};
