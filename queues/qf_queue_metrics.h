/* qf_queue_metrics.h - enumerate the queues alive in the process, for
 * metrics exporters (qf_serve_metrics_write() writes every live queue's
 * size, capacity and closed state in the Prometheus text format).
 *
 * Every queue a qflow constructor returns is recorded in a process-wide
 * set of live queues from the moment the constructor returns it until its
 * last reference is dropped. The set is guarded by a mutex taken only when
 * a queue is created or freed and while an enumeration runs: never on an
 * enqueue or dequeue path.
 *
 * Synchronization table
 *   qf_queue_foreach_live, qf_queue_live_count   any thread; blocking (the
 *                                                set's mutex)
 */
#ifndef QF_QUEUE_METRICS_H
#define QF_QUEUE_METRICS_H

#include <stddef.h>

#include "qf_export.h"
#include "qf_queue.h"

QF_BEGIN_DECLS

/* Called once per live queue; `q` is valid for the duration of the call. */
typedef void (*qf_queue_visit_fn)(qf_queue *q, void *arg);

/**
 * qf_queue_foreach_live() - call fn(q, arg) for every live queue.
 *
 * Ownership:   `q` is borrowed for the call; take qf_queue_ref() to keep it
 *              afterwards. `arg` is the caller's.
 * Blocking:    holds the live-set mutex while visiting: a queue whose last
 *              reference is dropped meanwhile waits until the visit ends.
 *              fn must therefore be quick, and must not create a queue or
 *              drop a queue's last reference (that would wait for itself).
 *              Reading attributes, qf_queue_size() and qf_queue_is_closed()
 *              is what it is for.
 * Concurrency: any thread; concurrent enumerations run one after another.
 * Order:       unspecified (hash order).
 * Returns:     the number of queues visited; 0 with a NULL fn (and
 *              QF_INVALID_ARGUMENT recorded).
 */
QF_API size_t qf_queue_foreach_live(qf_queue_visit_fn fn, void *arg);

/** qf_queue_live_count() - how many queues are alive now (a snapshot).
 *  Takes the live-set mutex; any thread. */
QF_API size_t qf_queue_live_count(void);

QF_END_DECLS

#endif
