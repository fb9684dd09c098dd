/* qflow.h - umbrella header: everything public in qflow.
 *
 * qflow re-creates TensorFlow 1.x's queue-based input pipeline runtime in
 * C11. Layers, bottom up: coord/ (status codes, deadlines, futexes, wakers,
 * the Coordinator), queues/ (tensors, elements, the queue kinds), runtime/
 * (worker pool, tasks, QueueRunners, input pipelines, the serving batcher).
 */
#ifndef QFLOW_H
#define QFLOW_H

#include "qf_export.h"
#include "qf_status.h"
#include "qf_time.h"
#include "qf_futex.h"
#include "qf_waker.h"
#include "qf_thread.h"
#include "qf_coordinator.h"
#include "qf_tensor.h"
#include "qf_sparse.h"
#include "qf_queue.h"
#include "qf_queue_metrics.h"
#include "qf_runtime.h"
#include "qf_reader.h"
#include "qf_tfrecord.h"
#include "qf_queue_runner.h"
#include "qf_input.h"
#include "qf_deferred.h"
#include "qf_batch.h"
#include "qf_serve.h"

QF_BEGIN_DECLS

#define QF_VERSION_STRING "0.2.0"

/** qf_version() - the library version ("0.2.0"). Static string; any thread. */
QF_API const char *qf_version(void);

QF_END_DECLS

#endif
