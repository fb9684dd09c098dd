/* qf_task_mark-impl.h - internal: the mark a scheduler sets on a thread
 * while it runs a task.
 * Never installed; not exported from libqflow.so (the layers above link
 * the static archive). */
#ifndef QF_TASK_MARK_IMPL_H
#define QF_TASK_MARK_IMPL_H

#include <stdbool.h>

/* Internal: set by a scheduler while a task runs on this thread, so that
 * thread-blocking calls can refuse to block a worker (they return
 * QF_FAILED_PRECONDITION and point at the poll form instead). */
void qf__set_in_task(bool in_task);
bool qf__in_task(void);
/* Internal: the error a blocking call returns inside a task. */
int qf__blocking_in_task_error(const char *what);

#endif
