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
/* Internal: the error a blocking call returns inside a task, for a call
 * that has a poll form. */
int qf__blocking_in_task_error(const char *what);
/* The same for a call with no poll form: `instead` says what a task does
 * (a sentence fragment, e.g. "check qf_task_done() ..."). */
int qf__blocking_in_task_error_instead(const char *what, const char *instead);

#endif
