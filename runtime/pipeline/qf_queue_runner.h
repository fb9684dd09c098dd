/* qf_queue_runner.h - QueueRunners as tasks, collections, start_queue_runners,
 * runner definitions, and the looper.
 *
 * A QueueRunner keeps a queue fed: it holds the queue, a list of enqueue
 * ops, a close op and a cancel op. Starting it on a runtime creates one
 * task per enqueue op (TensorFlow creates one thread per op); each task
 * loops "check should_stop, run the op" (spec 128). When an op reports one
 * of the runner's closed codes (default QF_OUT_OF_RANGE: its input ended)
 * its task retires, and the last task to retire runs the close op, so the
 * end of input travels down a pipeline as end-of-data (spec 130-131);
 * not when a task of the same start left because its runtime shut down
 * (that input has not ended; a start on a new runtime goes on). Any
 * other error goes to the Coordinator (spec 133), or without one into the
 * runner's list of raised errors (spec 132). With a Coordinator, the cancel
 * op is registered as a stop action: a stop closes the queue with
 * cancel_pending_enqueues, so parked enqueues end (spec 134-137).
 *
 * Turns: a task runs on its worker until its op or the queue makes it
 * wait; while other tasks wait for that worker it keeps enqueueing for a
 * turn of at most 32 elements or about 10-20 µs of op and enqueue time,
 * then yields to them. Its first turn is one element, so a start of many
 * runners has each runner's first element in the queue before any runner
 * takes a second turn.
 *
 * Differences from TensorFlow: there is no extra "close_on_stop" thread
 * (the Coordinator runs the cancel op as a stop action instead), so join
 * does not wait for a stop that never comes (spec 137); the "daemon" flag is
 * accepted and recorded, but every task of a pool ends at runtime shutdown.
 *
 * Synchronization table
 *   qf_queue_runner_start / exceptions / running   any thread; short lock
 *   qf_queue_runner_free                           no task of it running
 *   qf_scope_*                                     any thread; short lock
 *
 * Bad input: NULL arguments (where NULL has no documented meaning), unknown
 * flag bits and codes outside the canonical set are QF_INVALID_ARGUMENT
 * naming them, with nothing changed; the runner accessors return NULL / 0
 * for a NULL runner and record that error.
 */
#ifndef QF_QUEUE_RUNNER_H
#define QF_QUEUE_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

#include "qf_coordinator.h"
#include "qf_export.h"
#include "qf_queue.h"
#include "qf_runtime.h"

QF_BEGIN_DECLS

/* ------------------------------------------------------------ enqueue ops */

/* Produce one element (or, for an op with `many`, a batch whose rows are
 * enqueued in order). Runs on a worker and must not block. Returns QF_OK
 * with *ret_elem set (ownership to the runner), or a code: a closed code
 * retires the op cleanly, any other is an error. */
typedef qf_code (*qf_produce_fn)(void *arg, qf_element **ret_elem);

/* Produce one pointer for a queue of one scalar QF_PTR component (inline:
 * qf_queue_is_inline()). Like qf_produce_fn, minus the element: the runner
 * enqueues *ret_p with qf_queue_poll_enqueue_ptr(), so a runner moves
 * values with no allocation at all. A pointer still held when the task
 * ends (cancelled, stopped) is released with the queue's ptr_dtor. */
typedef qf_code (*qf_produce_ptr_fn)(void *arg, void **ret_p);

/* Transform an element dequeued from the op's input queue. Takes `in`;
 * returns QF_OK with *ret_out (NULL drops the element) or an error. */
typedef qf_code (*qf_transform_fn)(void *arg, qf_element *in, qf_element **ret_out);

/* The general form: one step of the op. Returns QF_OK when one run of the
 * op completed, QF_PENDING after registering qf_task_waker(task) with what
 * it waits for, QF_YIELD to be run again after other tasks, or a code as
 * above. (Any op function: a value that is none of these and no qf_code
 * fails the op with QF_INVALID_ARGUMENT, reported as an error.) */
typedef qf_code (*qf_poll_op_fn)(qf_task *task, void *arg);

typedef enum qf_enqueue_op_kind {
    QF_OP_PRODUCE = 0,     /* produce(), the runner enqueues (holding while full) */
    QF_OP_TRANSFORM = 1,   /* dequeue from `input`, transform() (NULL: as is), enqueue */
    QF_OP_POLL = 2,        /* poll() does everything itself */
    QF_OP_PRODUCE_PTR = 3, /* produce_ptr(), pointer queues: no allocation */
} qf_enqueue_op_kind;

typedef struct qf_enqueue_op {
    const char *name; /* e.g. "CountUpTo:0"; copied; used in task names */
    qf_enqueue_op_kind kind;
    qf_produce_fn produce;
    bool many; /* produce() returns a batch: enqueue its rows */
    qf_transform_fn transform;
    qf_queue *input; /* QF_OP_TRANSFORM: referenced by the runner */
    qf_poll_op_fn poll;
    void *arg;
    qf_produce_ptr_fn produce_ptr; /* QF_OP_PRODUCE_PTR */
} qf_enqueue_op;

/* Close and cancel ops: any function; errors are ignored (spec 130). */
typedef qf_code (*qf_runner_action_fn)(void *arg);

typedef struct qf_queue_runner_options {
    /* NULL: qf_queue_close(queue, false), named "<queue>_Close". */
    qf_runner_action_fn close_op;
    void *close_arg;
    const char *close_op_name;
    /* NULL: qf_queue_close(queue, true), named "<queue>_Close_1". */
    qf_runner_action_fn cancel_op;
    void *cancel_arg;
    const char *cancel_op_name;
    /* Codes that mean "the queue was closed"; none: {QF_OUT_OF_RANGE}. */
    const qf_code *closed_codes;
    size_t n_closed_codes;
    /* Called once as cleanup(cleanup_arg) by qf_queue_runner_free() after
     * the runner let go of everything else: hands state the ops use (their
     * args) over to the runner, and so to a scope that owns it. Not called
     * when qf_queue_runner_new() fails. NULL: nothing. */
    void (*cleanup)(void *arg);
    void *cleanup_arg;
} qf_queue_runner_options;

typedef struct qf_queue_runner qf_queue_runner;

/**
 * qf_queue_runner_new() - make a runner for `queue` (spec 127).
 *
 * Ownership:   the runner takes a reference to the queue (and to each
 *              op's input queue); ops and names are copied; op args stay
 *              the caller's unless handed over with options.cleanup.
 *              Free with qf_queue_runner_free(), or hand the runner to a
 *              scope (qf_scope_add_queue_runner()).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT "Must provide queue and
 *              enqueue_ops." for a NULL queue or no ops, an op missing its
 *              function or input, or closed codes that are not canonical
 *              codes.
 */
QF_API qf_code qf_queue_runner_new(qf_queue *queue, const qf_enqueue_op *ops, size_t n_ops,
                                   const qf_queue_runner_options *o, qf_queue_runner **ret);

/** qf_queue_runner_free() - free a runner none of whose tasks is running
 *  (QF_FAILED_PRECONDITION otherwise, and nothing is freed). NULL-safe. */
QF_API qf_code qf_queue_runner_free(qf_queue_runner *r);

/* Accessors: a NULL runner gives NULL / 0 and records QF_INVALID_ARGUMENT;
 * closed_codes() with a NULL `out` only counts. */

/** The runner's name: its queue's name (spec 144). */
QF_API const char *qf_queue_runner_name(const qf_queue_runner *r);
QF_API qf_queue *qf_queue_runner_queue(const qf_queue_runner *r);
QF_API size_t qf_queue_runner_num_ops(const qf_queue_runner *r);
/** Closed codes (spec 146): fills up to cap entries, returns the count. */
QF_API size_t qf_queue_runner_closed_codes(const qf_queue_runner *r, qf_code *out, size_t cap);

enum {
    QF_RUNNER_START = 1u << 0,  /* start the tasks (else: created suspended) */
    QF_RUNNER_DAEMON = 1u << 1, /* recorded for compatibility (see above) */
};

/**
 * qf_queue_runner_start() - create one task per enqueue op on `rt` (TF's
 * create_threads, spec 128-143).
 *
 * With `coord`: the tasks are Coordinator members named
 * "QueueRunnerThread-<queue>-<op>" (spec 143), errors go to
 * qf_coord_request_stop(), the cancel op becomes a stop action, and a stop
 * also wakes tasks parked on an input queue. Without: errors are kept in
 * the runner (qf_queue_runner_exception()). Without QF_RUNNER_START the
 * tasks are created suspended: start each with qf_task_wake().
 *
 * If tasks of an earlier start on the same runtime are still counted as
 * running, nothing is created: QF_OK with *ret_n = 0 (spec 139). A new
 * start clears the raised errors (spec 141). A NULL runner or runtime, or
 * flags with unknown bits, is QF_INVALID_ARGUMENT (outputs untouched).
 *
 * Ownership:   *ret_tasks (may be NULL if not wanted) is a malloc'd array
 *              of task references: release with qf_tasks_free().
 * Blocking:    never.
 */
QF_API qf_code qf_queue_runner_start(qf_queue_runner *r, qf_runtime *rt, qf_coord *coord,
                                     unsigned flags, qf_task ***ret_tasks, size_t *ret_n);

/**
 * qf_queue_runners_start() - qf_queue_runner_start() for n runners at once,
 * as qf_start_queue_runners() does for a collection.
 *
 * Each runner is started as qf_queue_runner_start() would start it (one
 * already running on `rt`, or listed twice, is skipped: spec 139), but the
 * tasks of all of them are made together: their memory first, then one
 * critical section for the Coordinator's members, one for its stop actions
 * and one push onto the runtime with one wake. Starting 10,000 runners so
 * is several times faster than 10,000 calls (perf: runners.fair.*.first).
 *
 * All or none of the tasks are created: out of memory (or a runtime that is
 * shutting down, QF_CANCELLED) starts none, and no runner then counts its
 * tasks as running. *ret_tasks gets every task created, runner by runner
 * and op by op, or NULL when none was; *ret_n their number.
 *
 * Errors:      a NULL runtime, a NULL runner in the array, runners NULL
 *              with n > 0, or flags with unknown bits: QF_INVALID_ARGUMENT,
 *              outputs untouched.
 * Ownership:   as qf_queue_runner_start() (release with qf_tasks_free()).
 * Thread safety: any thread; starts of the same runner from two threads at
 *              once are serialised per runner (one of them starts it).
 * Blocking:    never (short locks only).
 */
QF_API qf_code qf_queue_runners_start(qf_queue_runner *const *runners, size_t n, qf_runtime *rt,
                                      qf_coord *coord, unsigned flags, qf_task ***ret_tasks,
                                      size_t *ret_n);

/** qf_tasks_free() - unref n tasks and free the array. NULL-safe. */
QF_API void qf_tasks_free(qf_task **tasks, size_t n);

/** Tasks of the runner on `rt` still counted as running. */
QF_API size_t qf_queue_runner_running(const qf_queue_runner *r, const qf_runtime *rt);

/** Errors raised by the last start without a Coordinator (spec 132):
 *  their number, and copies of each (caller frees). */
QF_API size_t qf_queue_runner_num_exceptions(const qf_queue_runner *r);
QF_API qf_status *qf_queue_runner_exception(const qf_queue_runner *r, size_t i);

/* ------------------------------------------------------ scopes, collections
 *
 * A scope plays TensorFlow's graph: it holds named collections of runners
 * (default "queue_runners"), a registry of shared queues, and a registry of
 * queues, ops and actions by name, which runner definitions resolve
 * through. qf_scope_default() exists, like the default graph.
 */
#define QF_QUEUE_RUNNERS "queue_runners"

typedef struct qf_scope qf_scope;

QF_API qf_code qf_scope_new(qf_scope **ret_scope);
/** Frees the scope, its runners (which must not be running) and its
 *  registries. NULL-safe. */
QF_API void qf_scope_free(qf_scope *s);
QF_API qf_scope *qf_scope_default(void);
/** The scope's registry of shared queues (pass in qf_queue_options). */
QF_API qf_queue_registry *qf_scope_registry(qf_scope *s);

/** Add a runner to a collection (NULL: QF_QUEUE_RUNNERS); the scope takes
 *  ownership of the runner (spec 144). */
QF_API qf_code qf_scope_add_queue_runner(qf_scope *s, qf_queue_runner *r, const char *collection);
/** Runners of a collection whose names start with `name_scope` (NULL or ""
 *  for all), in insertion order: fills up to cap, returns the count. The
 *  runners stay owned by the scope. */
QF_API size_t qf_scope_get_collection(qf_scope *s, const char *collection, const char *name_scope,
                                      qf_queue_runner **out, size_t cap);

/**
 * qf_start_queue_runners() - start every runner of a collection (spec 145).
 * rt NULL: the default runtime; s NULL: the default scope; collection NULL:
 * QF_QUEUE_RUNNERS. Returns all started tasks as one array (as
 * qf_queue_runner_start()). No runners collected: QF_OK with *ret_n = 0.
 */
QF_API qf_code qf_start_queue_runners(qf_runtime *rt, qf_coord *coord, qf_scope *s,
                                      const char *collection, unsigned flags, qf_task ***ret_tasks,
                                      size_t *ret_n);

/* Name registry used by runner definitions. Queues register under their
 * name (qf_queue_name), ops under op->name. The scope takes a reference to
 * a registered queue and copies ops. */
QF_API qf_code qf_scope_register_queue(qf_scope *s, qf_queue *q);
QF_API qf_code qf_scope_register_op(qf_scope *s, const qf_enqueue_op *op);
QF_API qf_code qf_scope_register_action(qf_scope *s, const char *name, qf_runner_action_fn fn,
                                        void *arg);

/**
 * qf_queue_runner_to_def() - write the runner's definition as text
 * (spec 146): queue name, enqueue op names, close and cancel op names,
 * closed codes as canonical numbers. With `export_scope` ("scope/"), names
 * are written without it, and a runner whose queue name does not start
 * with it gives QF_OK and *ret_text NULL.
 * Ownership: *ret_text is malloc'd, the caller frees it.
 */
QF_API qf_code qf_queue_runner_to_def(const qf_queue_runner *r, const char *export_scope,
                                      char **ret_text);

/**
 * qf_queue_runner_from_def() - rebuild a runner from a definition, resolving
 * names through the scope's registry (with `import_scope` prepended).
 * An empty list of closed codes restores {QF_OUT_OF_RANGE} (spec 146).
 * Returns QF_NOT_FOUND naming what cannot be resolved; QF_INVALID_ARGUMENT
 * for malformed text.
 */
QF_API qf_code qf_queue_runner_from_def(qf_scope *s, const char *text, const char *import_scope,
                                        qf_queue_runner **ret);

/* -------------------------------------------------------------------- looper */

/* Called at each tick; non-OK reports the error to the Coordinator and ends
 * the looper (spec 125). */
typedef qf_code (*qf_looper_fn)(void *arg);

/**
 * qf_looper_start() - a task that calls fn(arg) at once, then every
 * interval_secs on fixed boundaries (0: back to back, yielding in between:
 * TensorFlow's timer_interval_secs=None), until the Coordinator stops
 * (spec 124-126). The task is a Coordinator member named "LooperThread"
 * (or `name`). A function returning something that is not a qf_code ends
 * the looper with QF_INVALID_ARGUMENT, reported to the Coordinator.
 * Returns QF_INVALID_ARGUMENT for a NULL coordinator or function, or an
 * interval that is negative, NaN, infinite or above 9e9 s (nothing is
 * started).
 */
QF_API qf_code qf_looper_start(qf_runtime *rt, qf_coord *coord, double interval_secs,
                               qf_looper_fn fn, void *arg, const char *name, qf_task **ret_task);

QF_END_DECLS

#endif
