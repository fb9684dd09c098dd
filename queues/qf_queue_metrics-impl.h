/* qf_queue_metrics-impl.h - internal: the live-queue set's hooks, called by
 * the constructors and the last qf_queue_unref() (qf_queue_metrics.c). */
#ifndef QF_QUEUE_METRICS_IMPL_H
#define QF_QUEUE_METRICS_IMPL_H

#include "qf_queue.h"

/* Record a queue that a constructor is about to return. Never fails: a
 * queue that cannot be recorded (out of memory) is only left out of
 * enumerations. Call at most once per queue. */
void qf__queue_track(qf_queue *q);
/* Forget a queue whose last reference is gone, before anything of it is
 * freed; waits for a running enumeration. A queue never tracked is fine. */
void qf__queue_untrack(qf_queue *q);

#endif
