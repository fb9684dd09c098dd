/* qf_batch-impl.h - internal: batch sources and their per-task instances. */
#ifndef QF_BATCH_IMPL_H
#define QF_BATCH_IMPL_H

#include "qf_batch.h"

typedef enum qf__src_kind {
    QF__SRC_PRODUCE,
    QF__SRC_POLL,
    QF__SRC_QUEUE,
    QF__SRC_READER,      /* one reader, owned, one task */
    QF__SRC_READER_OPTS, /* a reader per instance */
    QF__SRC_MAP,
} qf__src_kind;

struct qf_batch_source {
    qf__src_kind kind;
    qf_components comps; /* points at the owned copies below */
    qf_dtype *dtypes;
    qf_shape *shapes; /* NULL: unknown */
    char **names;     /* NULL: positional */
    qf_produce_fn produce;
    qf_source_poll_fn poll;
    qf_transform_fn map;
    void *arg;
    qf_queue *input;   /* QUEUE: the input; READER*: the file names (refs) */
    qf_reader *reader; /* READER */
    qf_reader_options ro;
    char *ro_name;
    qf_batch_source *inner; /* MAP */
    int many;               /* from an op template: -1 unset, else op->many */
    void (*free_fn)(void *);
    void *free_arg;
    size_t instances; /* made so far (READER allows one) */
};

/* What one task of a batch runner pulls examples through. */
typedef struct qf__src_inst {
    qf_batch_source *src; /* borrowed from the batch state */
    qf_reader *reader;    /* READER_OPTS: owned; READER: borrowed */
    qf_record rec;
    struct qf__src_inst *inner; /* MAP */
} qf__src_inst;

/* The effective "many" flag an op template asked for, or -1. */
int qf__source_many(const qf_batch_source *src);
/* Make an instance for one task (READER refuses a second). */
qf_code qf__source_instance(qf_batch_source *src, qf__src_inst **ret);
void qf__source_instance_free(qf__src_inst *in);
/* One pull: QF_OK with *ret_elem (may be NULL: nothing this run),
 * QF_PENDING with the task's waker registered, or a code that ends the op. */
qf_code qf__source_pull(qf__src_inst *in, qf_task *task, qf_element **ret_elem);

/* Reader sources can yield a run of examples per pull. */
bool qf__source_pulls_runs(const qf_batch_source *src);
/* One pull of up to max examples (a reader source): QF_OK with queue slots
 * slots[0..*ret_n) (*ret_n may be 0; elements or rows of a run, see
 * queues/tensor/qf_strblock-impl.h; free with qf__slots_free()), QF_PENDING, or a code
 * that ends the op. bare: rows may leave their values' source ends in
 * place of NULs (qf__queue_rows_by_length()). */
qf_code qf__source_pull_run(qf__src_inst *in, qf_task *task, void **slots, size_t max, bool bare,
                            size_t *ret_n);

/* qf__queue_use_symmetric_fences() and qf__queue_poll_enqueue_trusted():
 * queues/qf_queue_trusted-impl.h. */

#endif
