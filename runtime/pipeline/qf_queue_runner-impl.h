/* qf_queue_runner-impl.h - internal: runner and runner-task structures.
 *
 * Memory matters here: a program may hold ten thousand runners, each with
 * one parked task (the pool's point is to be much smaller than a thread per
 * runner). So a runner is one allocation (the struct, its ops, its closed
 * codes when not the default, and every name), a runner's first run is
 * embedded, and a runner task's state lives in the task's own allocation
 * (qf__task_spawn_ext). */
#ifndef QF_QUEUE_RUNNER_IMPL_H
#define QF_QUEUE_RUNNER_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "qf_queue_put-impl.h"
#include "qf_queue_runner.h"

/* `name` aliases op.name (the first member of qf_enqueue_op), which points
 * at the copy inside the runner's allocation: readers such as
 * qf_queue_runner_to_def() use rec.name without a second pointer per op. */
typedef struct qf__op_rec {
    union {
        qf_enqueue_op op;
        const char *name;
    };
    /* "QueueRunnerThread-<queue>-<op>", the name of the op's task (spec
     * 128), made once here so that a start (thousands of runners at a
     * time) formats nothing. */
    const char *task_name;
} qf__op_rec;

/* Live tasks of one start on one runtime (TensorFlow: per session). */
typedef struct qf__runner_run {
    const qf_runtime *rt;
    size_t running;
    /* A task of this start left through a cancel (a runtime shutdown): its
     * input has not ended, so the last task to leave does not close the
     * queue even through a closed code; a later start goes on. */
    bool cancelled;
    qf_coord *coord;
    qf_coord_action *action; /* the cancel op as a stop action */
} qf__runner_run;

struct qf_queue_runner {
    qf_queue *queue;
    size_t n_ops;
    qf_runner_action_fn close_op, cancel_op;
    void *close_arg, *cancel_arg;
    const char *close_name, *cancel_name; /* inside this allocation */
    const qf_code *closed;                /* a static default, or inside */
    uint32_t n_closed;
    _Atomic uint32_t lock; /* guards runs, more_runs and exc */
    /* Nearly every runner runs on one runtime: its run is embedded (run0
     * used when n_runs >= 1), and further ones go to more_runs. */
    uint32_t n_runs, cap_more;
    qf__runner_run run0;
    qf__runner_run *more_runs; /* runs 1.. (index i - 1) */
    qf_status **exc;
    uint32_t n_exc, cap_exc;
    void (*cleanup)(void *arg); /* options.cleanup, run last by free */
    void *cleanup_arg;
    qf__op_rec ops[]; /* n_ops; then custom closed codes; then names */
};

/* The state of one runner task, stored inside its task's allocation.
 *
 * Layout: with thousands of runners in line, a woken runner's state is
 * cold, and each cache line a poll reads is a miss of its own (a profile
 * of runners.tput.10000 had most of the runner's own time on the loads of
 * s->coord, s->r->queue and s->op->op.kind, three lines). So what every
 * poll of a pointer op reads sits in the first 64 bytes, the queue and the
 * op's function copied there at start; the rest follows. The state starts
 * 8-aligned inside its task (at 32 mod 64 in a Coordinator's member), so
 * those bytes may lie across two lines: starting them on a line of their
 * own (24 bytes more a task) measured no better (README, Measured). */
typedef struct qf__rtask {
    /* first line: read by every poll */
    qf_queue *queue; /* r->queue */
    qf_coord *coord;
    void *held_ptr;                /* QF_OP_PRODUCE_PTR: valid when has_ptr */
    qf_produce_ptr_fn produce_ptr; /* op->op.produce_ptr */
    void *op_arg;                  /* op->op.arg */
    qf_enqueue_op_kind kind;       /* op->op.kind */
    bool stop_checked, stop_registered, has_ptr;
    bool had_turn;         /* polled before: its turns may hold several puts */
    qf_element *holding;   /* produced, waiting for room in the queue */
    uint32_t nrows, row_i; /* rows: split_batch refuses larger batches */
    /* second line on: the pending element's place in line while the queue
     * is full (a consumer that frees a slot puts it in: fair among
     * thousands of runners, qf_queue_put-impl.h); `active`, which every
     * put reads, first */
    qf__put_ticket ticket;
    qf_element **rows; /* a produced batch, enqueued row by row */
    qf_queue_runner *r;
    qf__op_rec *op;
    qf_waker stop_waker; /* wakes the task on a Coordinator stop */
} qf__rtask;

#endif
