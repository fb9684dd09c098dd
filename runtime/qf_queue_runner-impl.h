/* qf_queue_runner-impl.h - internal: runner and runner-task structures. */
#ifndef QF_QUEUE_RUNNER_IMPL_H
#define QF_QUEUE_RUNNER_IMPL_H

#include <stdatomic.h>

#include "qf_queue_runner.h"

typedef struct qf__op_rec {
    qf_enqueue_op op; /* op.name points at name */
    char *name;
} qf__op_rec;

/* Live tasks of one start on one runtime (TensorFlow: per session). */
typedef struct qf__runner_run {
    const qf_runtime *rt;
    size_t running;
    qf_coord *coord;
    qf_coord_action *action; /* the cancel op as a stop action */
} qf__runner_run;

struct qf_queue_runner {
    qf_queue *queue;
    qf__op_rec *ops;
    size_t n_ops;
    qf_runner_action_fn close_op, cancel_op;
    void *close_arg, *cancel_arg;
    char *close_name, *cancel_name;
    qf_code *closed;
    size_t n_closed;
    _Atomic uint32_t lock; /* guards runs and exc */
    qf__runner_run *runs;
    size_t n_runs, cap_runs;
    qf_status **exc;
    size_t n_exc, cap_exc;
    void (*cleanup)(void *arg); /* options.cleanup, run last by free */
    void *cleanup_arg;
};

/* The state of one runner task (freed by its last poll). */
typedef struct qf__rtask {
    qf_queue_runner *r;
    qf__op_rec *op;
    const qf_runtime *rt;
    qf_coord *coord;
    qf_element *holding; /* produced, waiting for room in the queue */
    qf_element **rows;   /* a produced batch, enqueued row by row */
    size_t nrows, row_i;
    qf_waker stop_waker; /* wakes the task on a Coordinator stop */
    bool stop_checked, stop_registered;
} qf__rtask;

#endif
