/* qf_batcher.c - taking batches: the batcher's thread forms, its pollers
 * (which share one batch in progress) and its accessors. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qf_batch_op-impl.h"
#include "qf_batch_sparse-impl.h"
#include "qf_batcher-impl.h"
#include "qf_lock-impl.h"
#include "qf_status-impl.h"

#ifdef QF_RACE_WIDENING
#include <sched.h>
#endif

void qf_batcher_free(qf_batcher *b)
{
    if (!b)
        return;
    qf__gather_unref(b->gather);
    for (size_t i = 0; b->names && i < b->nq; i++)
        free(b->names[i]);
    free(b->names);
    free(b->dtypes);
    free(b->shapes);
    free(b->sparse);
    free(b->dense);
    qf_queue_unref(b->q);
    free(b);
}

/* ---------------------------------------------------------- taking batches */

/* The batch in progress that the pollers of one batcher share.
 *
 * Why shared. TensorFlow's dequeue_many is one attempt that gathers n
 * elements while later attempts wait behind it, so when the data ends at
 * most batch_size-1 elements are left over, all of them in the queue. A
 * poller cannot wait inside a call: it gathers elements one by one with
 * the queue's poll form and keeps what it has between polls. If every
 * poller kept a partial batch of its own, the end of the data would be
 * spread over the pollers (40 examples in batches of 4 could end as 3 held
 * by one poller and 1 by another) and none of them could finish: whole
 * batches lost. So the pollers of a batcher fill one batch in progress, in
 * queue order, under a short lock (nothing inside it waits: the queue's
 * poll form never blocks): whichever poller runs takes up where the last
 * one left off. At the end of the data the batch in progress is the only
 * partial batch there is, fewer than batch_size examples for the whole
 * batcher. With allow_smaller_final_batch the poller that meets the end
 * returns it as the final batch; without, it stays (spec 163: never
 * returned) and is freed with the batcher and its pollers. The thread forms
 * take whole batches from the queue and, when they meet the end, finish
 * the batch in progress with what the queue has left (finish_gathered()),
 * so pollers and threads may share a batcher and still leave fewer than
 * batch_size examples in all.
 *
 * Lifetime: the batcher and every poller hold a reference (a poller may
 * outlive its batcher). */
struct gather {
    _Atomic uint32_t refs;
    _Atomic uint32_t lock; /* qf__lock(): guards n and rows */
    size_t cap;            /* batch_size */
    size_t n;              /* examples gathered; < cap between calls */
    qf_element **rows;     /* cap entries, allocated with the first poller */
};

gather *qf__gather_new(int64_t batch_size)
{
    gather *g = calloc(1, sizeof(*g));
    if (g) {
        atomic_init(&g->refs, 1);
        g->cap = (size_t)batch_size;
    }
    return g;
}

static gather *gather_ref(gather *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    return g;
}

void qf__gather_unref(gather *g)
{
    /* acq_rel: the last owner sees every row the others left. */
    if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < g->n; i++)
        qf_element_free(g->rows[i]);
    free(g->rows);
    free(g);
}

/* Stack n examples into one batch element, its sparse components' handles
 * stacked (spec 171; `sparse` NULL when there are none), with the names
 * when given. Consumes the examples (also on failure); parts (nq * n
 * entries) and stacked (nq) are scratch. */
static qf_code stack_examples(qf_element **rows, size_t n, size_t nq, const qf_dtype *dtypes,
                              const qf_shape *shapes, const bool *sparse, char **names, bool padded,
                              qf_tensor **parts, qf_tensor **stacked, qf_element **ret)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t c = 0; c < nq; c++)
            parts[c * n + i] = qf_element_take(rows[i], c);
        qf_element_free(rows[i]);
        rows[i] = NULL;
    }
    qf_code rc = QF_OK;
    size_t done = 0;
    for (size_t c = 0; c < nq; c++) {
        qf_code r =
            padded ? qf_tensor_stack_padded(parts + c * n, n, dtypes[c], &shapes[c], &stacked[c])
                   : qf_tensor_stack(parts + c * n, n, dtypes[c], &shapes[c], &stacked[c]);
        if (r != QF_OK && rc == QF_OK)
            rc = r; /* stacking consumes the parts either way; go on */
        if (r == QF_OK)
            done = c + 1;
        else
            stacked[c] = NULL;
    }
    if (rc != QF_OK) {
        for (size_t c = 0; c < done; c++)
            qf_tensor_unref(stacked[c]);
        return rc;
    }
    qf_element *e = qf_element_of(nq, stacked);
    if (!e)
        return qf_last_code();
    if ((rc = qf__sparse_restore(sparse, nq, e)) != QF_OK) {
        qf_element_free(e);
        return rc;
    }
    if (names) {
        rc = qf_element_set_names(e, (const char *const *)names);
        if (rc != QF_OK) {
            qf_element_free(e);
            return rc;
        }
    }
    *ret = e;
    return QF_OK;
}

/* Put the component names on a batch taken from the (positional) queue,
 * after stacking its sparse components' handles (spec 171). Consumes e
 * (also on failure). */
static qf_code name_examples(const bool *sparse, size_t nq, char **names, qf_element *e,
                             qf_element **ret)
{
    qf_code rc = qf__sparse_restore(sparse, nq, e);
    if (rc != QF_OK) {
        qf_element_free(e);
        return rc;
    }
    if (names) {
        rc = qf_element_set_names(e, (const char *const *)names);
        if (rc != QF_OK) {
            qf_element_free(e);
            return rc;
        }
    }
    *ret = e;
    return QF_OK;
}

static qf_code name_batch(const qf_batcher *b, qf_element *e, qf_element **ret)
{
    return name_examples(b->sparse, b->nq, b->names, e, ret);
}

/* The end of a closed queue that holds less than a batch (spec 163). */
static qf_code err_insufficient(qf_queue *q, int64_t requested, int64_t have)
{
    return qf_set_error(QF_OUT_OF_RANGE,
                        "%s '%s' is closed and has insufficient elements (requested %" PRId64
                        ", current size %" PRId64 ")",
                        qf_queue_kind_name(q), qf_queue_name(q), requested, have);
}

/* A thread form met the end of the data (QF_OUT_OF_RANGE from the queue).
 * If pollers left a batch in progress, finish it with what the queue still
 * holds: a whole batch, or with allow_smaller_final_batch what there is.
 * Otherwise QF_OUT_OF_RANGE with the queue's message. */
static qf_code finish_gathered(qf_batcher *b, qf_element **ret_batch)
{
    gather *g = b->gather;
    qf__lock(&g->lock);
    if (g->n == 0) {
        qf__unlock(&g->lock);
        return QF_OUT_OF_RANGE;
    }
    while (g->n < g->cap) {
        qf_element *e = NULL;
        if (qf_queue_try_dequeue(b->q, &e) != QF_OK)
            break;
        g->rows[g->n++] = e;
    }
    size_t have = g->n;
    size_t n = have == g->cap ? have : b->smaller ? have : 0;
    qf_element **rows = n ? malloc(n * sizeof(*rows)) : NULL;
    qf_tensor **parts = n ? malloc(n * b->nq * sizeof(*parts)) : NULL;
    qf_tensor **stacked = n ? malloc(b->nq * sizeof(*stacked)) : NULL;
    if (n && rows && parts && stacked) {
        memcpy(rows, g->rows, n * sizeof(*rows));
        g->n = 0;
    }
    qf__unlock(&g->lock);
    qf_code rc;
    if (n == 0)
        rc = err_insufficient(b->q, b->batch_size, (int64_t)have);
    else if (!rows || !parts || !stacked)
        rc = qf__batch_oom(); /* the batch in progress stays */
    else
        rc = stack_examples(rows, n, b->nq, b->dtypes, b->shapes, b->sparse, b->names, b->padded,
                            parts, stacked, ret_batch);
    free(rows);
    free(parts);
    free(stacked);
    return rc;
}

qf_code qf_batcher_next_until(qf_batcher *b, qf_deadline deadline, qf_element **ret_batch)
{
    if (!b || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", b ? "ret_batch" : "batcher");
    qf_element *e = NULL;
    qf_code rc;
    if (b->smaller) /* spec 164: the last batch may be short */
        rc = deadline == QF_FOREVER
                 ? qf_queue_dequeue_up_to(b->q, b->batch_size, &e)
                 : qf_queue_dequeue_up_to_until(b->q, b->batch_size, deadline, &e);
    else /* spec 163: a short remainder is never returned */
        rc = deadline == QF_FOREVER
                 ? qf_queue_dequeue_many(b->q, b->batch_size, &e)
                 : qf_queue_dequeue_many_until(b->q, b->batch_size, deadline, &e);
    if (rc == QF_OUT_OF_RANGE)
        return finish_gathered(b, ret_batch);
    if (rc != QF_OK)
        return rc;
    return name_batch(b, e, ret_batch);
}

qf_code qf_batcher_next(qf_batcher *b, qf_element **ret_batch)
{
    return qf_batcher_next_until(b, QF_FOREVER, ret_batch);
}

qf_code qf_batcher_try_next(qf_batcher *b, qf_element **ret_batch)
{
    if (!b || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", b ? "ret_batch" : "batcher");
    qf_element *e = NULL;
    qf_code rc = qf_queue_try_dequeue_many(b->q, b->batch_size, &e);
    if (rc == QF_OUT_OF_RANGE && b->smaller)
        rc = qf_queue_try_dequeue_up_to(b->q, b->batch_size, &e);
    if (rc == QF_OUT_OF_RANGE)
        return finish_gathered(b, ret_batch);
    if (rc != QF_OK)
        return rc;
    return name_batch(b, e, ret_batch);
}

/* ------------------------------------------------------------------ poller */

struct qf_batcher_poller {
    qf_queue *q;
    gather *g; /* shared with the batcher and its other pollers */
    int64_t batch_size;
    bool smaller, padded;
    size_t nq;
    qf_dtype *dtypes;
    qf_shape *shapes;
    char **names;
    bool *sparse;        /* sparse components, or NULL */
    qf_element **held;   /* a finished batch on its way to stacking */
    qf_tensor **parts;   /* nq * batch_size */
    qf_tensor **stacked; /* nq */
    qf_waker *pending;   /* registered by the last poll */
};

void qf_batcher_poller_free(qf_batcher_poller *p)
{
    if (!p)
        return;
    if (p->pending)
        qf_queue_cancel_poll(p->q, p->pending);
    for (size_t i = 0; p->names && i < p->nq; i++)
        free(p->names[i]);
    free(p->names);
    free(p->dtypes);
    free(p->shapes);
    free(p->sparse);
    free(p->held);
    free(p->parts);
    free(p->stacked);
    qf__gather_unref(p->g);
    qf_queue_unref(p->q);
    free(p);
}

qf_code qf_batcher_poller_new(qf_batcher *b, qf_batcher_poller **ret)
{
    if (!b || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", b ? "ret" : "batcher");
    qf_batcher_poller *p = calloc(1, sizeof(*p));
    if (!p)
        return qf__batch_oom();
    p->q = qf_queue_ref(b->q);
    p->g = gather_ref(b->gather);
    p->batch_size = b->batch_size;
    p->smaller = b->smaller;
    p->padded = b->padded;
    p->nq = b->nq;
    size_t bsz = (size_t)b->batch_size;
    p->dtypes = malloc(b->nq * sizeof(*p->dtypes));
    p->shapes = malloc(b->nq * sizeof(*p->shapes));
    p->held = calloc(bsz, sizeof(*p->held));
    p->parts = calloc(bsz * b->nq, sizeof(*p->parts));
    p->stacked = calloc(b->nq, sizeof(*p->stacked));
    bool sparse_oom;
    p->sparse = qf__sparse_flags_copy(b->sparse, b->nq, &sparse_oom);
    bool ok = p->dtypes && p->shapes && p->held && p->parts && p->stacked && !sparse_oom;
    if (ok) {
        memcpy(p->dtypes, b->dtypes, b->nq * sizeof(*p->dtypes));
        memcpy(p->shapes, b->shapes, b->nq * sizeof(*p->shapes));
    }
    if (ok && b->names) {
        p->names = calloc(b->nq, sizeof(*p->names));
        ok = p->names != NULL;
        for (size_t i = 0; ok && i < b->nq; i++)
            ok = (p->names[i] = strdup(b->names[i])) != NULL;
    }
    if (ok) { /* the first poller makes room for the batch in progress */
        qf__lock(&p->g->lock);
        if (!p->g->rows)
            p->g->rows = calloc(bsz, sizeof(*p->g->rows));
        ok = p->g->rows != NULL;
        qf__unlock(&p->g->lock);
    }
    if (!ok) {
        qf_batcher_poller_free(p);
        return qf__batch_oom();
    }
    *ret = p;
    return QF_OK;
}

/* A whole batch taken from the queue at once, for a poller whose batch in
 * progress is empty (g->lock held): true with *rc the result when the
 * queue had batch_size examples (QF_OK, *ret_batch named as the thread
 * forms name theirs), or when it had ended (QF_OK with the short final
 * batch under allow_smaller_final_batch, else QF_OUT_OF_RANGE: such a
 * remainder is never returned, spec 163, and nothing can complete it).
 * False when fewer are there now: the caller gathers them one by one.
 * Why: gathered one by one, each example became an element of its own
 * (a row of a reader: a malloc'd element, its key formatted, two string
 * tensors) and then was copied into the stacked batch; taken whole, the
 * batch is stacked from the queue's slots as the thread forms' is (rows
 * lent, not copied). qflow-lines --seed over 200 MB, whose consumer is a
 * task: 629 ms before. */
static bool poll_whole_batch(qf_batcher_poller *p, qf_code *rc, qf_element **ret_batch)
{
    qf_element *e = NULL;
    if (qf_queue_try_dequeue_bulk(p->q, p->batch_size, p->batch_size, &e) != QF_OK)
        return false;
    const qf_shape *sh = qf_tensor_shape(qf_element_get(e, 0));
    int64_t rows = sh && sh->rank > 0 ? sh->dims[0] : 0;
    if (rows < p->batch_size && !p->smaller) {
        qf_element_free(e);
        *rc = err_insufficient(p->q, p->batch_size, rows);
        return true;
    }
    *rc = name_examples(p->sparse, p->nq, p->names, e, ret_batch);
    return true;
}

qf_code qf_batcher_poll_next(qf_batcher_poller *p, qf_waker *waker, qf_element **ret_batch)
{
    if (!p || !waker || !ret_batch)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !p       ? "poller"
                            : !waker ? "waker"
                                     : "ret_batch");
    gather *g = p->g;
    qf_code rc = QF_OK;
    p->pending = NULL;
    /* Continue the batcher's batch in progress (see struct gather). */
    qf__lock(&g->lock);
    if (g->n == 0 && poll_whole_batch(p, &rc, ret_batch)) {
        qf__unlock(&g->lock);
        return rc;
    }
    while (g->n < g->cap) {
        qf_element *e = NULL;
        rc = qf_queue_poll_dequeue(p->q, waker, &e);
        if (rc != QF_OK)
            break;
        g->rows[g->n++] = e;
#ifdef QF_RACE_WIDENING
        /* Give other pollers the chance to run while a batch is half made
         * (with a batch per poller, that is what lost the end of the data). */
        sched_yield();
#endif
    }
    if (rc == QF_OUT_OF_RANGE && p->smaller && g->n > 0)
        rc = QF_OK; /* the final, smaller batch (spec 164) */
    if (rc != QF_OK) {
        /* QF_PENDING: the waker is registered and the batch in progress
         * waits for whichever poller runs next; QF_OUT_OF_RANGE: what it
         * holds is never returned (spec 163). */
        qf__unlock(&g->lock);
        if (rc == QF_PENDING)
            p->pending = waker;
        return rc;
    }
    size_t n = g->n;
    memcpy(p->held, g->rows, n * sizeof(*p->held));
    g->n = 0;
    qf__unlock(&g->lock);
    return stack_examples(p->held, n, p->nq, p->dtypes, p->shapes, p->sparse, p->names, p->padded,
                          p->parts, p->stacked, ret_batch);
}

/* -------------------------------------------------------------- accessors */

/* The accessors' answer to a NULL batcher: a neutral value, the error
 * recorded (static message). */
static bool null_batcher(const qf_batcher *b, const char *msg)
{
    if (b)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

qf_queue *qf_batcher_queue(const qf_batcher *b)
{
    return null_batcher(b, "qf_batcher_queue: batcher (b) is NULL") ? NULL : b->q;
}

qf_queue_runner *qf_batcher_runner(const qf_batcher *b)
{
    return null_batcher(b, "qf_batcher_runner: batcher (b) is NULL") ? NULL : b->runner;
}

int64_t qf_batcher_size(const qf_batcher *b)
{
    return null_batcher(b, "qf_batcher_size: batcher (b) is NULL") ? 0 : b->batch_size;
}

size_t qf_batcher_num_components(const qf_batcher *b)
{
    return null_batcher(b, "qf_batcher_num_components: batcher (b) is NULL") ? 0 : b->nq;
}

const char *qf_batcher_component_name(const qf_batcher *b, size_t i)
{
    if (null_batcher(b, "qf_batcher_component_name: batcher (b) is NULL"))
        return NULL;
    return b->names && i < b->nq ? b->names[i] : NULL;
}

qf_dtype qf_batcher_dtype(const qf_batcher *b, size_t i)
{
    if (null_batcher(b, "qf_batcher_dtype: batcher (b) is NULL"))
        return QF_DT_INVALID;
    return i < b->nq ? b->dtypes[i] : QF_DT_INVALID;
}

qf_shape qf_batcher_output_shape(const qf_batcher *b, size_t i)
{
    if (null_batcher(b, "qf_batcher_output_shape: batcher (b) is NULL") || i >= b->nq)
        return qf_shape_make(-1, NULL); /* invalid */
    /* A sparse component: the dense shape of the stacked sparse tensor. */
    if (b->sparse && b->sparse[i]) {
        if (b->dense[i].rank == QF_UNKNOWN_RANK)
            return qf_shape_unknown();
        return qf_shape_prepend(b->smaller ? QF_UNKNOWN_DIM : b->batch_size, &b->dense[i]);
    }
    return qf_shape_prepend(b->smaller ? QF_UNKNOWN_DIM : b->batch_size, &b->shapes[i]);
}

const qf_fill_gauge *qf_batcher_gauge(const qf_batcher *b)
{
    return null_batcher(b, "qf_batcher_gauge: batcher (b) is NULL") ? NULL : &b->gauge;
}

double qf_batcher_fraction_full(const qf_batcher *b)
{
    if (null_batcher(b, "qf_batcher_fraction_full: batcher (b) is NULL"))
        return 0.0;
    return qf_fill_gauge_value(&b->gauge);
}
