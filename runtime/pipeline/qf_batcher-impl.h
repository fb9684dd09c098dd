/* qf_batcher-impl.h - internal: the batcher handle, made by qf_batch.c,
 * taken from by qf_batcher.c. */
#ifndef QF_BATCHER_IMPL_H
#define QF_BATCHER_IMPL_H

#include <stdbool.h>

#include "qf_batch.h"

/* The batch in progress its pollers share (qf_batcher.c). */
typedef struct gather gather;
/* One reference, room for batch_size examples made by the first poller;
 * NULL when out of memory. */
gather *qf__gather_new(int64_t batch_size);
/* NULL is a no-op. */
void qf__gather_unref(gather *g);

struct qf_batcher {
    qf_queue *q;
    qf_queue_runner *runner;
    int64_t batch_size;
    bool smaller, padded;
    size_t nq;
    qf_dtype *dtypes;
    qf_shape *shapes; /* per example, in the queue */
    char **names;     /* sorted, or NULL */
    bool *sparse;     /* sparse components, or NULL when none */
    qf_shape *dense;  /* their declared dense shapes (NULL when none) */
    qf_fill_gauge gauge;
    gather *gather; /* the pollers' batch in progress (see the poller) */
};

#endif
