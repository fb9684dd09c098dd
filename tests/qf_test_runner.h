/* qf_test_runner.h - helpers the QueueRunner suites share: make a runner,
 * drive a runtime of 0 workers, a pointer op that counts. */
#ifndef QF_TEST_RUNNER_H
#define QF_TEST_RUNNER_H

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>

#include "qflow.h"

static inline qf_queue_runner *mkrunner(qf_queue *q, const qf_enqueue_op *ops, size_t n,
                                        const qf_queue_runner_options *o)
{
    qf_queue_runner *r = NULL;
    cr_assert_eq(qf_queue_runner_new(q, ops, n, o, &r), QF_OK, "%s", qf_last_message());
    return r;
}

/* For a runtime of 0 workers: run tasks on this thread until all are done. */
static inline void drive(qf_runtime *rt, qf_task **ts, size_t n)
{
    for (int i = 0; i < 100000; i++) {
        bool all = true;
        for (size_t k = 0; k < n; k++)
            all = all && qf_task_is_done(ts[k]);
        if (all)
            return;
        cr_assert_geq(qf_runtime_run_once(rt, qf_deadline_in_ns(10 * 1000 * 1000)), 0);
    }
    cr_assert_fail("tasks did not finish");
}

/* A QF_OP_PRODUCE_PTR op producing next + 1, next + 2, ... (as pointers);
 * `limit` values in all, then OUT_OF_RANGE (negative: no limit). */
typedef struct {
    atomic_long next, limit;
} ptr_counter;

static inline qf_code produce_ptr(void *arg, void **ret_p)
{
    ptr_counter *c = arg;
    long v = atomic_fetch_add(&c->next, 1);
    if (c->limit >= 0 && v >= c->limit)
        return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %ld", (long)c->limit);
    *ret_p = (void *)(uintptr_t)(v + 1);
    return QF_OK;
}

#endif
