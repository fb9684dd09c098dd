/* qf_runtime.h - a fixed pool of worker threads running stackless tasks.
 *
 * A task is a poll function. The runtime calls it; it runs until it
 * finishes (returns QF_OK or an error code), or until it would block: then
 * it leaves a waker with whatever it waits for (a queue's poll form, the
 * Coordinator, a timer) and returns QF_PENDING. A parked task holds no
 * worker. A wake makes it runnable again; a wake that arrives while the
 * task runs is remembered and the task is polled again, so no wake is lost.
 * This is how qflow runs 10,000 QueueRunners on 2 workers.
 *
 * Scheduling: every worker has a local run queue (a Concurrency Kit SPMC
 * ring: the worker pushes and pops, idle workers steal) and a "next" slot
 * for the task it woke last (it runs next, while its data is still in the
 * cache). Tasks spawned or woken from outside the pool go to a shared
 * injection stack (ck_stack: push is one CAS, workers take the whole batch
 * with one exchange). Idle workers sleep on an event count (futex) with the
 * earliest timer as the deadline, so timers need no polling thread.
 *
 * A pool of 0 workers runs nothing by itself: the host program drives it
 * from its own loop (libuv-style embedding): it waits in poll/epoll on
 * qf_runtime_fd() (and qf_coord_stop_fd() for a stop, from a signal handler
 * too) with qf_runtime_next_deadline() as timeout, runs the runnable tasks
 * with qf_runtime_try_run_once(), and at the end joins the Coordinator with
 * qf_runtime_join_coord_until(), which keeps running the tasks it waits for
 * (a plain qf_coord_join() on that thread would wait for tasks that only
 * that thread can run). The README has a complete program.
 *
 * Synchronization table
 *   qf_task_spawn, qf_task_wake      any thread; lock-free (one CAS/push)
 *   qf_task_* accessors              any thread; wait-free
 *   qf_task_join                     any thread but a task; blocking
 *   qf_runtime_try_run_once, _until,
 *   qf_runtime_join_coord, _until    one host thread at a time (0 workers)
 *   qf_runtime_shutdown / free       one thread; blocking; not from a task
 *
 * Progress: waking and spawning are lock-free. Stealing is lock-free. The
 * timer heap is guarded by a short futex mutex (armed and fired timers
 * only). A worker runs one task poll at a time; a task that never returns
 * holds its worker (tasks must not block: qflow's own blocking calls detect
 * a task context and return QF_FAILED_PRECONDITION instead of sleeping).
 */
#ifndef QF_RUNTIME_H
#define QF_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_coordinator.h"
#include "qf_export.h"
#include "qf_status.h"
#include "qf_time.h"
#include "qf_waker.h"

QF_BEGIN_DECLS

/* A task poll result besides QF_OK / errors / QF_PENDING (qf_queue.h):
 * "I could go on, but let others run first": requeued at the back. */
#define QF_YIELD ((qf_code)-2)
#ifndef QF_PENDING
#define QF_PENDING ((qf_code)-1)
#endif

typedef struct qf_runtime qf_runtime;
typedef struct qf_task qf_task;

/* The poll function. Returns QF_OK (finished), QF_PENDING (parked: a waker
 * is registered), QF_YIELD (poll again later), or an error code (finished
 * with that error; the thread's qf_last_message() is kept as its status). */
typedef qf_code (*qf_task_fn)(qf_task *t, void *arg);

typedef struct qf_runtime_options {
    /* Worker threads: negative selects the number of online CPUs; 0 means
     * the host drives the loop (qf_runtime_try_run_once).
     * Sizing: a thread of the program's own that works steadily beside the
     * pool (a consumer thread taking batches) competes with the workers
     * for the CPUs; tasks that mostly trade elements with it then run
     * faster on a pool of one CPU fewer. On a 2-CPU VM, 10,000 runners
     * feeding a consumer thread moved 21 M items/s on 1 worker against
     * 5 M on 2; pipelines whose readers do real work per byte (4 TFRecord
     * readers) were faster on 2 (README, Measured, "One worker or two"). */
    int workers;
    /* Prefix of worker thread names (default "qflow"). Copied. */
    const char *name;
} qf_runtime_options;

/**
 * qf_runtime_new() - start a pool.
 *
 * Ownership:   the caller owns *ret_rt; free with qf_runtime_free().
 * Blocking:    never (starts threads).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT (more than 1024 workers);
 *              QF_RESOURCE_EXHAUSTED (memory or threads).
 */
QF_API qf_code qf_runtime_new(const qf_runtime_options *opts, qf_runtime **ret_rt);

/** qf_runtime_default() - the process-wide runtime (one worker per online
 *  CPU), created on first use, like TensorFlow's default session. Never
 *  freed by the library; do not pass it to qf_runtime_free(). */
QF_API qf_runtime *qf_runtime_default(void);

/**
 * qf_runtime_shutdown() - stop accepting tasks (qf_task_spawn then fails
 * with QF_CANCELLED), cancel every live task (qf_task_is_cancelled()
 * becomes true, parked tasks are woken so they can finish), and wait until
 * all have finished or the deadline passes. A queue's poll (qf_queue.h) in
 * a cancelled task that would park returns QF_CANCELLED "Dequeue operation
 * was cancelled" / "Enqueue operation was cancelled" instead (TensorFlow's
 * words at a session close), so a task that passes on what its polls say
 * ends with them, and one that reports errors to a Coordinator reports
 * that one too.
 *
 * Blocking:    until every task finished or the deadline; with 0 workers
 *              the calling thread runs the cancelled tasks itself.
 * Returns:     QF_OK; QF_DEADLINE_EXCEEDED (tasks still running: the
 *              runtime must then not be freed); QF_FAILED_PRECONDITION when
 *              called from inside a task.
 */
QF_API qf_code qf_runtime_shutdown(qf_runtime *rt, qf_deadline deadline);

/**
 * qf_runtime_set_worker_slice() - the scheduling slice (and 1 us timer
 * slack) every worker of rt asks the kernel for, as
 * qf_thread_prefer_latency() does for one thread: on a busy machine a task
 * woken at its deadline (a batcher's executor at its batch's close time)
 * then runs on time rather than after a CPU-bound neighbour's slice. 0:
 * the workers put back what they had and keep it. The setting lasts until
 * the next call. Sleeping workers are woken to take it; a busy one takes it
 * before its next task. A kernel before Linux 6.12 gives only the timer
 * slack; a worker whose new setting the kernel refuses is left with what it
 * had before any. A runtime of 0 workers has none to change (the host's
 * thread is the caller's: qf_thread_prefer_latency()).
 *
 * qf_serve_spawn() sets its batcher's executor slice (100 us unless
 * qf_serve_set_exec_slice() said otherwise; nothing when that is 0) on a
 * runtime where neither this call nor an earlier qf_serve_spawn() set one,
 * and leaves it there after the executor ends: on qf_runtime_default() it
 * holds for every task of the process. Call this with 0 first to keep the
 * workers as they are. Threads that tasks start afterwards (a model's BLAS
 * or OpenMP pool, the process's fd-watch thread when a worker starts it)
 * inherit the slice and the slack: see qf_thread_prefer_latency().
 *
 * Blocking:    never (may wake sleeping workers).  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL runtime or a slice
 *              that is neither 0 nor in QF_THREAD_SLICE_MIN_NS..
 *              QF_THREAD_SLICE_MAX_NS (nothing changes).
 */
QF_API qf_code qf_runtime_set_worker_slice(qf_runtime *rt, int64_t slice_ns);

/** qf_runtime_free() - shut down (waiting as long as it takes), join the
 *  workers and free everything. NULL-safe. Not from inside a task. */
QF_API void qf_runtime_free(qf_runtime *rt);

/** The number of workers the runtime was made with. Wait-free. A NULL
 *  runtime records QF_INVALID_ARGUMENT and gives 0. */
QF_API int qf_runtime_num_workers(const qf_runtime *rt);
/** Tasks spawned and not yet finished. Wait-free snapshot. A NULL runtime
 *  records QF_INVALID_ARGUMENT and gives 0. */
QF_API int64_t qf_runtime_num_tasks(const qf_runtime *rt);

/**
 * qf_runtime_run_once_until() / qf_runtime_try_run_once() - one turn of the
 * loop of a runtime with 0 workers: run every task that is runnable now
 * (and those they wake), and fire due timers. When nothing is runnable,
 * the _until form first waits until something is, or `deadline` passes
 * (absolute CLOCK_MONOTONIC ns; QF_FOREVER); the try form never waits.
 *
 * A turn that runs nothing is not a failure (a host loop calls this
 * whenever its poll says so): it returns QF_OK with *ret_polls 0.
 * @ret_polls:  optional; the number of task polls run (>= 0).
 * Blocking:    try: never; _until: until a task is runnable, a timer is
 *              due, or the deadline.
 * Concurrency: one host thread at a time per runtime.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL runtime or a deadline
 *              below QF_FOREVER; QF_FAILED_PRECONDITION when the runtime
 *              has workers or another thread is running a turn (or a
 *              join_coord) of it. *ret_polls untouched on failure.
 */
QF_API qf_code qf_runtime_run_once_until(qf_runtime *rt, qf_deadline deadline, int64_t *ret_polls);
QF_API qf_code qf_runtime_try_run_once(qf_runtime *rt, int64_t *ret_polls);

/**
 * qf_runtime_run_once() - the first spelling of a loop turn: the number of
 * polls run, or -1 with qf_last_code() QF_FAILED_PRECONDITION. Kept working
 * for existing users.
 */
QF_API int64_t qf_runtime_run_once(qf_runtime *rt, qf_deadline deadline) QF_DEPRECATED(
    "use qf_runtime_run_once_until() or qf_runtime_try_run_once(), which return a qf_code");

/**
 * qf_runtime_join_coord_until() / qf_runtime_join_coord() - join a
 * Coordinator whose members run on `rt`: qf_coord_join_until() and
 * qf_coord_join() (same arguments, rules, report and returns), for the
 * host thread of a runtime with 0 workers.
 *
 * There, the tasks join waits for run only when that thread drives the
 * loop, so wherever join would sleep this call runs the runnable tasks and
 * fires due timers, and sleeps only when nothing is runnable, in poll(2) on
 * qf_runtime_fd() and on an fd of the coordinator that a member's end and a
 * stop (a stop from a signal handler included) make readable, until the
 * earliest timer or the deadline. Members that are threads announce their
 * end the same way; extra threads cannot be passed (register them). On a
 * runtime with workers it is qf_coord_join_until() / qf_coord_join().
 *
 * Blocking:    as qf_coord_join_until() / qf_coord_join(); runs tasks on
 *              the calling thread meanwhile.
 * Concurrency: the host thread; one join_coord per coordinator at a time;
 *              not from inside a task.
 * Returns:     as qf_coord_join_until() / qf_coord_join(); also
 *              QF_INVALID_ARGUMENT for a NULL runtime or coordinator;
 *              QF_FAILED_PRECONDITION when another thread drives `rt` or
 *              joins `c` this way (nothing is joined: the members stay
 *              registered).
 */
QF_API qf_code qf_runtime_join_coord_until(qf_runtime *rt, qf_coord *c, qf_deadline deadline,
                                           bool ignore_live_threads,
                                           qf_coord_join_report *ret_report);
QF_API qf_code qf_runtime_join_coord(qf_runtime *rt, qf_coord *c, double stop_grace_period_secs,
                                     bool ignore_live_threads, qf_coord_join_report *ret_report);

/** qf_runtime_fd() - a file descriptor that polls readable when a task of a
 *  0-worker runtime became runnable outside a loop turn (woken by another
 *  thread, or by the host between turns) or a new earliest timer was
 *  armed; the next turn resets it. An eventfd owned by the runtime: do not
 *  read or close it. -1 for runtimes with workers, and for a NULL runtime
 *  (which records QF_INVALID_ARGUMENT). */
QF_API int qf_runtime_fd(const qf_runtime *rt);

/** qf_runtime_next_deadline() - the earliest armed timer, or QF_FOREVER
 *  (also for a NULL runtime, which records QF_INVALID_ARGUMENT). */
QF_API qf_deadline qf_runtime_next_deadline(qf_runtime *rt);

/* ------------------------------------------------------------------ tasks
 *
 * The task calls below that take a task record QF_INVALID_ARGUMENT naming
 * it when it is NULL and do nothing (accessors give NULL, false or 0).
 * A task function returns QF_OK, an error code, QF_PENDING or QF_YIELD;
 * any other value ends the task with QF_INVALID_ARGUMENT and a message
 * that names the value. */

typedef struct qf_task_options {
    /* Copied; shown in join reports and as the Coordinator member name. */
    const char *name;
    /* Non-NULL: the task is a member of this Coordinator until it finishes,
     * so qf_coord_join() waits for it and names it if it lags. */
    qf_coord *coord;
    /* Create the task parked: it first runs when qf_task_wake() is called. */
    bool suspended;
    /* Recorded (qf_task_is_daemon); every task ends at runtime shutdown. */
    bool daemon;
} qf_task_options;

/**
 * qf_task_spawn() - create a task and make it runnable.
 *
 * Ownership:   `arg` is the caller's concern (it must outlive the task).
 *              With ret_task non-NULL the caller gets a reference to the
 *              task (release with qf_task_unref()); otherwise the task is
 *              detached and freed when it finishes.
 * Blocking:    never. Concurrency: any thread. Progress: lock-free.
 * Returns:     QF_OK; QF_CANCELLED when the runtime is shutting down;
 *              QF_INVALID_ARGUMENT; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_task_spawn(qf_runtime *rt, qf_task_fn fn, void *arg, const qf_task_options *o,
                             qf_task **ret_task);

QF_API qf_task *qf_task_ref(qf_task *t);
QF_API void qf_task_unref(qf_task *t);

/**
 * qf_task_wake() - make a parked task runnable (no effect on a runnable or
 * finished one; a running one is polled again after it returns).
 * Any thread; lock-free; never blocks. Release: what the caller wrote
 * before waking is visible to the task's next poll.
 */
QF_API void qf_task_wake(qf_task *t);

/** qf_task_waker() - the task's own waker, to hand to a queue's poll form
 *  or qf_coord_register_waker(). Registered on at most one list at a time.
 */
QF_API qf_waker *qf_task_waker(qf_task *t);

/** qf_task_waker_init() - prepare a caller-owned waker that wakes `t`, for
 *  a task that waits on several things at once. The task must withdraw it
 *  (qf_waker_withdraw) before it finishes. */
QF_API void qf_task_waker_init(qf_task *t, qf_waker *w);

/**
 * qf_task_sleep_until() - arm the task's timer: it is woken at `deadline`
 * (QF_FOREVER disarms). The task then returns QF_PENDING as usual; an
 * earlier wake from elsewhere leaves the timer armed until it fires or is
 * re-armed. Only from the task itself. Never blocks: a short lock on the
 * runtime's timer heap; when the timer becomes the runtime's earliest and a
 * worker sleeps with a later deadline, one futex call wakes the sleepers
 * (so a due timer is fired by a sleeping worker even while the arming
 * worker is held by a long poll); a worker sleeping until an earlier
 * deadline takes the new one when it wakes, with no call.
 */
QF_API void qf_task_sleep_until(qf_task *t, qf_deadline deadline);

/** True once the runtime cancelled the task (shutdown). The task should
 *  withdraw its wakers and return QF_CANCELLED (a queue's poll already
 *  answers QF_CANCELLED in such a task where it would park: qf_queue.h).
 *  Wait-free; acquire. */
QF_API bool qf_task_is_cancelled(const qf_task *t);

/**
 * qf_task_should_yield() - whether other tasks are waiting to run where `t`
 * runs (the calling worker's run queues, or the runtime's global queue). A
 * task that could go on working should then return QF_YIELD and let them
 * have their turn: with thousands of tasks sharing a few workers, a task
 * that keeps its worker while others wait is what makes them starve.
 * Only from the task itself. Wait-free (a few relaxed loads); a hint.
 */
QF_API bool qf_task_should_yield(const qf_task *t);

/** The task running on the calling thread, or NULL. */
QF_API qf_task *qf_task_current(void);

QF_API const char *qf_task_name(const qf_task *t);
QF_API bool qf_task_is_daemon(const qf_task *t);
QF_API void *qf_task_arg(const qf_task *t);
/** True once the task finished. Wait-free; acquire. */
QF_API bool qf_task_is_done(const qf_task *t);

/**
 * qf_task_join() - wait until the task finished.
 *
 * Blocking:    until done or the deadline. Not from inside a task
 *              (QF_FAILED_PRECONDITION).
 * Returns:     the task's result code (QF_OK or its error) once done, with
 *              *ret_status (when non-NULL) a copy of its error status (NULL
 *              for QF_OK); QF_DEADLINE_EXCEEDED if still running.
 */
QF_API qf_code qf_task_join(qf_task *t, qf_deadline deadline, qf_status **ret_status);

QF_END_DECLS

#endif
