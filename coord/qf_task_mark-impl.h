/* qf_task_mark-impl.h - internal: the mark a scheduler sets on a thread
 * while it runs a task.
 * Never installed; not exported from libqflow.so (the layers above link
 * the static archive). */
#ifndef QF_TASK_MARK_IMPL_H
#define QF_TASK_MARK_IMPL_H

#include <stdbool.h>

/* Internal: set by a scheduler while a task runs on this thread, so that
 * thread-blocking calls can refuse to block a worker (they return
 * QF_FAILED_PRECONDITION and point at the poll form instead). The public
 * face of the same mark: qf_thread_set_task_runner() (qf_waker.h). */
void qf__set_in_task(bool in_task);
bool qf__in_task(void);
/* Internal: whether a task's poll that found its queue empty may look
 * again for a moment before it parks (queues/engine/qf_fifo.c,
 * take_wait()). A look pays when a producer runs on another core and
 * nothing else waits for this one; only the scheduler running the task
 * knows that, so it installs a check (qf__set_task_spin_check(), any
 * thread; a runtime does at its creation, the same function each time)
 * that qf__task_may_spin() asks: false outside a task, or when
 * no check is installed. The check runs on the task's thread, inside its
 * poll, and must not block. */
typedef bool (*qf__task_spin_check_fn)(void);
void qf__set_task_spin_check(qf__task_spin_check_fn check);
bool qf__task_may_spin(void);
/* Internal: whether the task running on this thread has been cancelled
 * (its runtime is shutting down). A queue's poll that would park answers
 * QF_CANCELLED instead, in TensorFlow's words for the ops a session close
 * cancels (queues/qf_queue_ops-impl.h, poll_cancelled()). Installed by a
 * scheduler as the spin check is (qf__set_task_cancel_check()); false
 * outside a task or with no check installed. The check runs on the task's
 * thread and must not block. */
typedef bool (*qf__task_cancel_check_fn)(void);
void qf__set_task_cancel_check(qf__task_cancel_check_fn check);
bool qf__task_cancelled(void);
/* Internal: the error a blocking call returns inside a task, for a call
 * that has a poll form. */
int qf__blocking_in_task_error(const char *what);
/* The same for a call with no poll form: `instead` says what a task does
 * (a sentence fragment, e.g. "check qf_task_done() ..."). */
int qf__blocking_in_task_error_instead(const char *what, const char *instead);

#endif
