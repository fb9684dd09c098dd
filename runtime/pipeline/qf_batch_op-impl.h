/* qf_batch_op-impl.h - internal: the enqueue ops of a batch runner
 * (qf_batch_op.c), the state qf_batch.c builds for them. */
#ifndef QF_BATCH_OP_IMPL_H
#define QF_BATCH_OP_IMPL_H

#include <stdbool.h>

#include "qf_batch-impl.h"
#include "qf_batch_sparse-impl.h"

typedef struct bstate bstate;

typedef struct bop {
    bstate *bs;
    qf__src_inst *inst;
    size_t src;        /* index of its source */
    const size_t *map; /* queue position j <- source component map[j] */
    bool as_is;        /* source order == queue order, no keep component */
    bool trusted;      /* as_is, and the source's elements match the queue by
                        * construction: enqueue without re-validating */
    bool runs;         /* trusted, no keep and not enqueue_many: pull a run
                        * of examples and enqueue them with one call */
    void **run;        /* the run's slots not enqueued yet: run[run_i..run_n) */
    size_t run_n, run_i;
    qf_element *holding;
    qf_element **rows;
    size_t nrows, row_i, rows_cap;
    qf_tensor **parts;
    size_t parts_cap;
    bool *keep;
    size_t keep_cap;
} bop;

struct bstate {
    qf_queue *q; /* a reference */
    size_t nq;   /* queue components */
    bool many;
    bool has_keep;
    qf_keep_input keep;
    qf_batch_source **srcs;
    size_t n_srcs;
    size_t *maps; /* n_srcs * nq */
    bop *ops;
    size_t n_ops;
    qf__sparse_comps sc; /* sparse components (spec 171-172) */
};

/* The runner's cleanup hook: frees the op state, its sources and their
 * instances, and what the ops still hold. NULL is a no-op. */
void qf__batch_state_free(void *arg);

/* A qf_enqueue_op's poll (arg: its bop). */
qf_code qf__batch_op_poll(qf_task *task, void *arg);

/* The batch code's out-of-memory error (one message for all of it). */
qf_code qf__batch_oom(void);

#endif
