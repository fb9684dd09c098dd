/* qf_wake_defer-impl.h - internal: the last step of a wake, run after the
 * waker is released.
 * Never installed; not exported from libqflow.so (the layers above link
 * the static archive).
 *
 * Why. A thread that wakes a task's waker calls the waker's function (the
 * runtime makes the task runnable and futex-wakes a sleeping worker), then
 * stores DONE, which releases the waker to its task. The kernel tends to
 * put the woken worker on the waking thread's own core and to run it at
 * once, in the middle of that futex call: the worker then polled the task,
 * found its waker still CLAIMED, and waited (64 pauses, then yields) for a
 * DONE that the preempted waking thread could store only once the worker
 * gave its core back, and then not until that thread next slept (measured:
 * task.wake p50 15 us against 1.8 us for a thread woken by the same queue).
 * So the code that calls a waker's function opens a deferral around the
 * call and its DONE store; a wake function whose last step can wait (the
 * futex wake of a worker: the task is already runnable and visible to any
 * worker that looks) leaves it here, and it runs after DONE.
 *
 * Every wake of a wait list, and a producer's put request finished by a
 * consumer (finish_request() in queues/engine/qf_fifo_wait.c), does this.
 * Near wakes (a queue's consumers woken because elements came:
 * qf__waitlist_wake_near(); the locked engine's end-of-data wake after a
 * close goes the same way), where the task's latency is the point, also
 * get up the worker that slept on the waking thread's CPU
 * (qf__wake_defer_near()). Other wakes get up any worker: one started on
 * the waking thread's core takes that core from it, and when that thread
 * goes on working (a consumer thread whose takes wake the producer tasks
 * of a full queue: pipeline.text, runners.fair) the two then share one
 * core, which measured 20% slower. Room wakes deferred the same way spare
 * their tasks the wait: qflow-lines' reader task, polling its put while
 * the consumer thread woke it for room, waited for that thread's futex
 * call to end (1,172 sched_yield calls in a run of the 200 MiB file; none
 * now), and the run took 89.4 against 76.8 ms (hyperfine, 25 runs each).
 *
 * Rules. Deferrals nest (a counter per thread); the deferred call runs when
 * the outermost one ends, on the same thread. One call waits at a time: a
 * second deferral runs the first one at once, so every deferred call runs
 * exactly once. Outside a deferral nothing is deferred (qf__wake_defer()
 * returns false and the caller does the step itself), so a caller that
 * invokes a wake function directly loses nothing. Whoever defers a call
 * that uses an object must keep that object alive until the call has run:
 * after DONE the task may end and its owner may free what it likes (the
 * runtime counts its deferred signals, and qf_runtime_free() waits for
 * them). */
#ifndef QF_WAKE_DEFER_IMPL_H
#define QF_WAKE_DEFER_IMPL_H

#include <stdbool.h>

#include "qf_waker.h"

typedef void (*qf__deferred_fn)(void *arg);

/* qf_waitlist_wake() for a near wake: each waker's function runs inside a
 * deferral that closes after its DONE store (wl not NULL). */
int qf__waitlist_wake_near(qf_waitlist *wl, int n);

/* Open a deferral on this thread (before calling a wake function);
 * `near`: a near wake opens it. */
void qf__wake_defer_begin(bool near);

/* True when the innermost deferral open on this thread is a near wake's. */
bool qf__wake_defer_near(void);

/* Close it (after the DONE store); the outermost close runs the call
 * deferred, if any. */
void qf__wake_defer_end(void);

/* True inside a deferral on this thread. */
bool qf__wake_deferring(void);

/* True when fn(arg) is the call this thread's deferral will run. */
bool qf__wake_deferred(qf__deferred_fn fn, void *arg);

/* Inside a deferral: run fn(arg) at its end (and run an earlier deferred
 * call now), true. Outside one: false, nothing recorded. */
bool qf__wake_defer(qf__deferred_fn fn, void *arg);

/* Wake batches. A thread that wakes many tasks in a row (a consumer thread
 * finishing the put requests of a line of producer tasks,
 * queues/engine/qf_fifo_wait.c) opens a batch around the wakes: tasks it
 * makes runnable from outside their runtime's pool are then kept in a
 * list of its own and pushed onto the runtime's global queue together when
 * the outermost batch ends, one push and one wake-up of a worker for all
 * of them, instead of one each, whose turns with the workers' pops on the
 * global queue's line cost a cache-line crossing per task
 * (runtime/sched/qf_scheduler.c, push_from_outside()). Nothing blocks
 * between begin and end: a batch is a few wake calls long, and its tasks
 * are runnable but out of every worker's sight until it ends. */
void qf__wake_batch_begin(void);
void qf__wake_batch_end(void);
/* True inside a batch on this thread. */
bool qf__wake_batching(void);
/* The runtime's end of a batch (coord/ cannot call up into runtime/):
 * set (to the same function) by every runtime made, before any of its
 * tasks can be woken. */
void qf__wake_batch_set_end(void (*fn)(void));

#endif
