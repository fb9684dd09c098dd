/* qf_batch_source.c - sources of examples for batching.
 *
 * A source is a description (components plus how to get an element); a
 * batch call makes one *instance* per task that runs it. Instances share
 * everything except what cannot be shared: a reader serves one call at a
 * time, so a reader-options source gives every instance a reader of its
 * own, and an instance keeps its reusable qf_record so reading allocates
 * only the element it yields.
 */
#include <stdlib.h>
#include <string.h>

#include "qf_batch-impl.h"
#include "qf_reader-impl.h"
#include "qf_status-impl.h"

static qf_code oom(void)
{
    return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory making a batch source");
}

static qf_code check_comps(const qf_components *c)
{
    if (!c || c->n == 0 || !c->dtypes)
        return qf_set_error(QF_INVALID_ARGUMENT, "a batch source needs at least one component");
    if (c->n > 4096)
        return qf_set_error(QF_INVALID_ARGUMENT, "too many components (%zu)", c->n);
    for (size_t i = 0; i < c->n; i++) {
        if (!qf_dtype_is_valid(c->dtypes[i]))
            return qf_set_error(QF_INVALID_ARGUMENT, "component %zu has an invalid dtype", i);
        if (c->shapes && c->shapes[i].rank != QF_UNKNOWN_RANK && !qf_shape_is_valid(&c->shapes[i]))
            return qf_set_error(QF_INVALID_ARGUMENT, "component %zu has an invalid shape", i);
        if (c->names) {
            if (!c->names[i] || !c->names[i][0])
                return qf_set_error(QF_INVALID_ARGUMENT, "component %zu has an empty name", i);
            for (size_t j = 0; j < i; j++)
                if (strcmp(c->names[i], c->names[j]) == 0)
                    return qf_set_error(QF_INVALID_ARGUMENT, "duplicate component name '%s'",
                                        c->names[i]);
        }
    }
    return QF_OK;
}

/* A source with a copy of `c` (already checked). */
static qf_batch_source *src_new(qf__src_kind kind, const qf_components *c)
{
    qf_batch_source *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->kind = kind;
    s->many = -1;
    s->comps.n = c->n;
    s->dtypes = malloc(c->n * sizeof(*s->dtypes));
    if (!s->dtypes)
        goto fail;
    memcpy(s->dtypes, c->dtypes, c->n * sizeof(*s->dtypes));
    s->comps.dtypes = s->dtypes;
    if (c->shapes) {
        s->shapes = malloc(c->n * sizeof(*s->shapes));
        if (!s->shapes)
            goto fail;
        memcpy(s->shapes, c->shapes, c->n * sizeof(*s->shapes));
        s->comps.shapes = s->shapes;
    }
    if (c->names) {
        s->names = calloc(c->n, sizeof(*s->names));
        if (!s->names)
            goto fail;
        for (size_t i = 0; i < c->n; i++)
            if (!(s->names[i] = strdup(c->names[i])))
                goto fail;
        s->comps.names = (const char *const *)s->names;
    }
    return s;
fail:
    qf_batch_source_free(s);
    return NULL;
}

void qf_batch_source_free(qf_batch_source *s)
{
    if (!s)
        return;
    free(s->dtypes);
    free(s->shapes);
    for (size_t i = 0; s->names && i < s->comps.n; i++)
        free(s->names[i]);
    free(s->names);
    qf_queue_unref(s->input);
    qf_reader_free(s->reader);
    free(s->ro_name);
    qf_batch_source_free(s->inner);
    void (*fn)(void *) = s->free_fn;
    void *arg = s->free_arg;
    free(s);
    if (fn)
        fn(arg);
}

void qf_batch_source_on_free(qf_batch_source *s, void (*free_fn)(void *), void *arg)
{
    if (!s)
        return;
    s->free_fn = free_fn;
    s->free_arg = arg;
}

const qf_components *qf_batch_source_components(const qf_batch_source *s)
{
    if (!s) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_batch_source_components: source is NULL");
        return NULL;
    }
    return &s->comps;
}

qf_code qf_batch_source_produce(const qf_components *comps, qf_produce_fn fn, void *arg,
                                qf_batch_source **ret)
{
    if (!fn || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", fn ? "ret" : "produce function");
    qf_code rc = check_comps(comps);
    if (rc != QF_OK)
        return rc;
    qf_batch_source *s = src_new(QF__SRC_PRODUCE, comps);
    if (!s)
        return oom();
    s->produce = fn;
    s->arg = arg;
    *ret = s;
    return QF_OK;
}

qf_code qf_batch_source_poll(const qf_components *comps, qf_source_poll_fn fn, void *arg,
                             qf_batch_source **ret)
{
    if (!fn || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", fn ? "ret" : "poll function");
    qf_code rc = check_comps(comps);
    if (rc != QF_OK)
        return rc;
    qf_batch_source *s = src_new(QF__SRC_POLL, comps);
    if (!s)
        return oom();
    s->poll = fn;
    s->arg = arg;
    *ret = s;
    return QF_OK;
}

/* The components of a queue, as a source declares them. A sparse
 * component's queue shape is that of its handles: the dense shape of the
 * sparse tensors is not known. */
static void queue_comps(qf_queue *q, qf_components *c, qf_dtype *dt, qf_shape *sh,
                        const char **names)
{
    size_t n = qf_queue_num_components(q);
    bool has_shapes = qf_queue_shape(q, 0) != NULL;
    bool has_names = qf_queue_component_name(q, 0) != NULL;
    for (size_t i = 0; i < n; i++) {
        dt[i] = qf_queue_dtype(q, i);
        if (has_shapes)
            sh[i] = dt[i] == QF_SPARSE ? qf_shape_unknown() : *qf_queue_shape(q, i);
        if (has_names)
            names[i] = qf_queue_component_name(q, i);
    }
    c->n = n;
    c->dtypes = dt;
    c->shapes = has_shapes ? sh : NULL;
    c->names = has_names ? names : NULL;
}

qf_code qf_batch_source_queue(qf_queue *input, qf_batch_source **ret)
{
    if (!input || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", input ? "ret" : "input queue");
    size_t n = qf_queue_num_components(input);
    qf_dtype *dt = calloc(n, sizeof(*dt));
    qf_shape *sh = calloc(n, sizeof(*sh));
    const char **names = calloc(n, sizeof(*names));
    qf_batch_source *s = NULL;
    if (dt && sh && names) {
        qf_components c;
        queue_comps(input, &c, dt, sh, names);
        s = src_new(QF__SRC_QUEUE, &c);
    }
    free(dt);
    free(sh);
    free(names);
    if (!s)
        return oom();
    s->input = qf_queue_ref(input);
    *ret = s;
    return QF_OK;
}

static const qf_dtype KV_DTYPES[2] = {QF_STRING, QF_STRING};

/* (key, value): two string scalars, positional (what a read returns). */
static qf_batch_source *kv_source(qf__src_kind kind)
{
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_components c = {.n = 2, .dtypes = KV_DTYPES, .shapes = sh, .names = NULL};
    return src_new(kind, &c);
}

qf_code qf_batch_source_reader(qf_reader *reader, qf_queue *filenames, qf_batch_source **ret)
{
    if (!reader || !filenames || !ret) {
        qf_reader_free(reader);
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !reader      ? "reader"
                            : !filenames ? "file-name queue"
                                         : "ret");
    }
    qf_batch_source *s = kv_source(QF__SRC_READER);
    if (!s) {
        qf_reader_free(reader);
        return oom();
    }
    s->reader = reader;
    s->input = qf_queue_ref(filenames);
    *ret = s;
    return QF_OK;
}

qf_code qf_batch_source_reader_options(const qf_reader_options *ro, qf_queue *filenames,
                                       qf_batch_source **ret)
{
    if (!ro || !filenames || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !ro          ? "reader options"
                            : !filenames ? "file-name queue"
                                         : "ret");
    /* Let the reader constructor judge the options now, not at start. */
    qf_reader *probe = NULL;
    qf_code rc = qf_reader_new(ro, &probe);
    if (rc != QF_OK)
        return rc;
    qf_reader_free(probe);
    qf_batch_source *s = kv_source(QF__SRC_READER_OPTS);
    if (!s)
        return oom();
    s->ro = *ro;
    if (ro->name && !(s->ro_name = strdup(ro->name))) {
        qf_batch_source_free(s);
        return oom();
    }
    s->ro.name = s->ro_name;
    s->input = qf_queue_ref(filenames);
    *ret = s;
    return QF_OK;
}

qf_code qf_batch_source_map(qf_batch_source *src, const qf_components *comps, qf_transform_fn fn,
                            void *arg, qf_batch_source **ret)
{
    if (!src || !fn || !ret) {
        qf_batch_source_free(src);
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !src  ? "source"
                            : !fn ? "transform function"
                                  : "ret");
    }
    const qf_components *c = comps ? comps : &src->comps;
    qf_code rc = check_comps(c);
    if (rc != QF_OK) {
        qf_batch_source_free(src);
        return rc;
    }
    qf_batch_source *s = src_new(QF__SRC_MAP, c);
    if (!s) {
        qf_batch_source_free(src);
        return oom();
    }
    s->map = fn;
    s->arg = arg;
    s->inner = src;
    s->many = src->many;
    *ret = s;
    return QF_OK;
}

qf_code qf_batch_source_from_op(const qf_components *comps, const qf_enqueue_op *op,
                                qf_batch_source **ret)
{
    if (!op || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", op ? "ret" : "op");
    qf_batch_source *s = NULL;
    qf_code rc;
    switch (op->kind) {
    case QF_OP_PRODUCE:
        rc = qf_batch_source_produce(comps, op->produce, op->arg, &s);
        break;
    case QF_OP_TRANSFORM:
        if (!op->input)
            return qf_set_error(QF_INVALID_ARGUMENT, "a TRANSFORM op needs an input queue");
        if (!op->transform && comps) {
            rc = check_comps(comps);
            if (rc != QF_OK)
                return rc;
        } else if (op->transform && !comps) {
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "a TRANSFORM op with a transform needs its output components");
        }
        rc = qf_batch_source_queue(op->input, &s);
        if (rc == QF_OK && op->transform)
            rc = qf_batch_source_map(s, comps, op->transform, op->arg, &s);
        break;
    default:
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "a QF_OP_POLL op enqueues by itself and cannot be a batch source "
                            "(use qf_batch_source_poll())");
    }
    if (rc != QF_OK)
        return rc;
    s->many = op->many ? 1 : 0;
    *ret = s;
    return QF_OK;
}

/* -------------------------------------------------------------- instances */

int qf__source_many(const qf_batch_source *s)
{
    return s->many;
}

void qf__source_instance_free(qf__src_inst *in)
{
    if (!in)
        return;
    qf__source_instance_free(in->inner);
    if (in->src && in->src->kind == QF__SRC_READER_OPTS)
        qf_reader_free(in->reader);
    qf_record_clear(&in->rec);
    free(in);
}

qf_code qf__source_instance(qf_batch_source *s, qf__src_inst **ret)
{
    if (s->kind == QF__SRC_READER && s->instances > 0)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "a source made from one reader ('%s') can feed one task only; use "
                            "qf_batch_source_reader_options() or a join for more",
                            qf_reader_name(s->reader));
    qf__src_inst *in = calloc(1, sizeof(*in));
    if (!in)
        return oom();
    in->src = s;
    qf_record_init(&in->rec);
    qf_code rc = QF_OK;
    if (s->kind == QF__SRC_READER)
        in->reader = s->reader;
    else if (s->kind == QF__SRC_READER_OPTS)
        rc = qf_reader_new(&s->ro, &in->reader);
    else if (s->kind == QF__SRC_MAP)
        rc = qf__source_instance(s->inner, &in->inner);
    if (rc != QF_OK) {
        in->src = NULL;
        qf__source_instance_free(in);
        return rc;
    }
    s->instances++;
    *ret = in;
    return QF_OK;
}

qf_code qf__source_pull(qf__src_inst *in, qf_task *task, qf_element **ret_elem)
{
    qf_batch_source *s = in->src;
    qf_code rc;
    qf_element *e = NULL;
    switch (s->kind) {
    case QF__SRC_PRODUCE:
        return s->produce(s->arg, ret_elem);
    case QF__SRC_POLL:
        return s->poll(task, s->arg, ret_elem);
    case QF__SRC_QUEUE:
        return qf_queue_poll_dequeue(s->input, qf_task_waker(task), ret_elem);
    case QF__SRC_READER:
    case QF__SRC_READER_OPTS:
        rc = qf_reader_poll_read(in->reader, s->input, qf_task_waker(task), &in->rec);
        if (rc != QF_OK)
            return rc;
        return qf_record_to_element(&in->rec, ret_elem);
    case QF__SRC_MAP:
        rc = qf__source_pull(in->inner, task, &e);
        if (rc != QF_OK)
            return rc;
        if (!e) {
            *ret_elem = NULL;
            return QF_OK;
        }
        return s->map(s->arg, e, ret_elem);
    }
    return qf_set_error(QF_INTERNAL, "unknown source kind");
}

bool qf__source_pulls_runs(const qf_batch_source *s)
{
    return s->kind == QF__SRC_READER || s->kind == QF__SRC_READER_OPTS;
}

qf_code qf__source_pull_run(qf__src_inst *in, qf_task *task, void **slots, size_t max, bool bare,
                            size_t *ret_n)
{
    if (!qf__source_pulls_runs(in->src))
        return qf_set_error(QF_INTERNAL, "this batch source yields one example per pull");
    *ret_n = 0;
    in->reader->rows_bare = bare;
    return qf__reader_poll_read_slots(in->reader, in->src->input, qf_task_waker(task), max,
                                      &in->rec, slots, ret_n);
}
