/* qf_batch_op.c - the enqueue ops of a batch runner.
 *
 * The runner's ops are poll ops, one per task (num_threads copies of one
 * source, or one per source of a join). Each owns an instance of its source
 * and a small pipeline:
 *
 *     pull (source poll form) -> keep? -> order components -> enqueue
 *
 * "Order components": the queue's components are the source's without the
 * keep component, sorted by name when there are names (spec 169). The
 * queue itself is positional; names go back onto each *batch* when it is
 * taken (one copy of the names per batch instead of one per example). When
 * the source's order already is the queue's and there is no keep component,
 * the pulled element goes into the queue as it is: no allocation beyond
 * what the source made.
 *
 * With enqueue_many the pulled batch is split into rows (the keep decision
 * taken per row), and the rows are enqueued one per run, each with the
 * queue's poll form, so a full queue parks the task between rows. Scratch
 * arrays (rows, parts, keep flags) grow to the largest batch seen and are
 * reused.
 *
 * All op state is touched only by the op's task (see qf_input.c for the
 * argument); it belongs to the runner through its cleanup hook.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qf_batch_op-impl.h"
#include "qf_queue_trusted-impl.h"
#include "qf_status-impl.h"
#include "qf_strblock-impl.h"

qf_code qf__batch_oom(void)
{
    return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory building a batch");
}

void qf__batch_state_free(void *arg)
{
    bstate *bs = arg;
    if (!bs)
        return;
    for (size_t i = 0; bs->ops && i < bs->n_ops; i++) {
        bop *o = &bs->ops[i];
        qf__source_instance_free(o->inst);
        qf_element_free(o->holding);
        for (size_t r = o->row_i; r < o->nrows; r++)
            qf_element_free(o->rows[r]);
        free(o->rows);
        if (o->run)
            qf__slots_free(o->run + o->run_i, o->run_n - o->run_i);
        free(o->run);
        free(o->parts);
        free(o->keep);
    }
    free(bs->ops);
    for (size_t i = 0; bs->srcs && i < bs->n_srcs; i++)
        qf_batch_source_free(bs->srcs[i]);
    free(bs->srcs);
    free(bs->maps);
    qf__sparse_comps_free(&bs->sc);
    qf_queue_unref(bs->q);
    free(bs);
}

/* Index in `e` of source component i: by name when both have names. */
static qf_code locate(const bop *o, const qf_element *e, size_t i, size_t *ret)
{
    const qf_batch_source *src = o->bs->srcs[o->src];
    if (src->names && qf_element_has_names(e)) {
        size_t n = qf_element_size(e);
        for (size_t k = 0; k < n; k++)
            if (strcmp(qf_element_name(e, k), src->names[i]) == 0) {
                *ret = k;
                return QF_OK;
            }
        return qf_set_error(QF_INVALID_ARGUMENT, "an example of queue '%s' has no component '%s'",
                            qf_queue_name(o->bs->q), src->names[i]);
    }
    *ret = i;
    return QF_OK;
}

static qf_code check_arity(const bop *o, const qf_element *e)
{
    size_t want = o->bs->srcs[o->src]->comps.n;
    if (qf_element_size(e) == want)
        return QF_OK;
    return qf_set_error(QF_INVALID_ARGUMENT,
                        "a source of queue '%s' yielded %zu components, it declared %zu",
                        qf_queue_name(o->bs->q), qf_element_size(e), want);
}

/* The keep component of `e` as a bool tensor: a scalar for one example;
 * with enqueue_many (`many`) a vector of a flag per row, or a scalar for
 * the whole batch (checked). */
static qf_code keep_tensor(const bop *o, const qf_element *e, bool many, const qf_tensor **ret)
{
    size_t k;
    qf_code rc = locate(o, e, o->bs->keep.component, &k);
    if (rc != QF_OK)
        return rc;
    const qf_tensor *t = qf_element_get(e, k);
    int rank = t ? qf_tensor_shape(t)->rank : -1;
    if (!t || qf_tensor_dtype(t) != QF_BOOL || !(rank == 0 || (many && rank == 1)))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            many ? "`keep_input` of queue '%s' must be a bool scalar or vector "
                                   "for every batch of examples"
                                 : "`keep_input` of queue '%s' must be a bool scalar for every "
                                   "example",
                            qf_queue_name(o->bs->q));
    *ret = t;
    return QF_OK;
}

static bool grow(void **arr, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return true;
    size_t nc = *cap ? *cap : 8;
    while (nc < want)
        nc *= 2;
    void *na = realloc(*arr, nc * elem);
    if (!na)
        return false;
    *arr = na;
    *cap = nc;
    return true;
}

/* One example (not enqueue_many): decide, order, hold. Consumes e. */
static qf_code take_example(bop *o, qf_element *e)
{
    bstate *bs = o->bs;
    qf_code rc = check_arity(o, e);
    if (rc != QF_OK)
        goto out;
    if (bs->has_keep) {
        bool keep;
        if (bs->keep.kind == QF_KEEP_FN) {
            keep = bs->keep.fn(bs->keep.arg, e, 0, o->src);
        } else {
            const qf_tensor *t = NULL;
            if ((rc = keep_tensor(o, e, false, &t)) != QF_OK)
                goto out;
            keep = *(const bool *)qf_tensor_cdata(t);
        }
        if (!keep)
            goto out; /* dropped (spec 172) */
    }
    for (size_t j = 0; bs->sc.is_sparse && j < bs->nq; j++) {
        size_t k;
        if (qf__sparse_is(&bs->sc, j) && ((rc = locate(o, e, o->map[j], &k)) != QF_OK ||
                                          (rc = qf__sparse_check(&bs->sc, j, qf_element_get(e, k),
                                                                 qf_queue_name(bs->q))) != QF_OK))
            goto out;
    }
    if (o->as_is && !qf_element_has_names(e)) {
        o->holding = e; /* the fast path: the source's element as it is */
        return QF_OK;
    }
    if (!grow((void **)&o->parts, &o->parts_cap, bs->nq, sizeof(*o->parts))) {
        rc = qf__batch_oom();
        goto out;
    }
    for (size_t j = 0; j < bs->nq; j++) {
        size_t k;
        if ((rc = locate(o, e, o->map[j], &k)) != QF_OK) {
            for (size_t i = 0; i < j; i++)
                qf_tensor_unref(o->parts[i]);
            goto out;
        }
        o->parts[j] = qf_tensor_ref(qf_element_get(e, k));
    }
    o->holding = qf_element_of(bs->nq, o->parts);
    if (!o->holding)
        rc = qf_last_code();
out:
    qf_element_free(e);
    return rc;
}

/* Rows of the pulled batch: its first queue component's first dimension
 * (a sparse component's first dense dimension). */
static qf_code count_rows(const bop *o, const qf_element *e, size_t *ret_n)
{
    size_t k0;
    qf_code rc = locate(o, e, o->map[0], &k0);
    if (rc != QF_OK)
        return rc;
    const qf_tensor *t0 = qf_element_get(e, k0);
    int64_t n0 = qf__rows_of(t0);
    if (n0 < 0)
        return t0 && qf_tensor_dtype(t0) == QF_SPARSE
                   ? qf_last_code()
                   : qf_set_error(QF_INVALID_ARGUMENT,
                                  "with enqueue_many every component of queue '%s' needs rank >= 1",
                                  qf_queue_name(o->bs->q));
    *ret_n = (size_t)n0;
    return QF_OK;
}

/* Scratch for a batch of n rows: keep flags, parts, rows. */
static bool grow_scratch(bop *o, size_t n)
{
    size_t m = n ? n : 1;
    return grow((void **)&o->keep, &o->keep_cap, m, sizeof(*o->keep)) &&
           grow((void **)&o->parts, &o->parts_cap, m * o->bs->nq, sizeof(*o->parts)) &&
           grow((void **)&o->rows, &o->rows_cap, m, sizeof(*o->rows));
}

/* Decide every row first, while the element is whole. */
static qf_code decide_rows(bop *o, const qf_element *e, size_t n)
{
    bstate *bs = o->bs;
    for (size_t r = 0; r < n; r++)
        o->keep[r] = true;
    if (!bs->has_keep)
        return QF_OK;
    if (bs->keep.kind == QF_KEEP_FN) {
        for (size_t r = 0; r < n; r++)
            o->keep[r] = bs->keep.fn(bs->keep.arg, e, (int64_t)r, o->src);
        return QF_OK;
    }
    const qf_tensor *t = NULL;
    qf_code rc = keep_tensor(o, e, true, &t);
    if (rc != QF_OK)
        return rc;
    if (qf_tensor_shape(t)->rank == 0) {
        /* One flag for the whole batch: TensorFlow enqueues the batch, or
         * not, under a cond on it (spec 172). */
        bool keep = *(const bool *)qf_tensor_cdata(t);
        for (size_t r = 0; r < n; r++)
            o->keep[r] = keep;
        return QF_OK;
    }
    if ((size_t)qf_tensor_shape(t)->dims[0] != n)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "`keep_input` of queue '%s' has %" PRId64 " rows, the examples %zu",
                            qf_queue_name(bs->q), qf_tensor_shape(t)->dims[0], n);
    memcpy(o->keep, qf_tensor_cdata(t), n * sizeof(bool));
    return QF_OK;
}

/* Take each queue component out of the element and unstack it: component
 * j of row r goes to parts[j * n + r]. On failure no part is held. */
static qf_code unstack_components(bop *o, qf_element *e, size_t n)
{
    bstate *bs = o->bs;
    qf_code rc = QF_OK;
    size_t done = 0;
    for (size_t j = 0; j < bs->nq && rc == QF_OK; j++) {
        size_t k;
        if ((rc = locate(o, e, o->map[j], &k)) != QF_OK)
            break;
        qf_tensor *t = qf_element_take(e, k);
        if (qf__sparse_is(&bs->sc, j)) {
            if ((rc = qf__sparse_rows(t, (int64_t)n, o->parts + j * n)) == QF_OK)
                done = j + 1;
            continue;
        }
        if (!t || qf_tensor_shape(t)->rank < 1 || (size_t)qf_tensor_shape(t)->dims[0] != n) {
            qf_tensor_unref(t);
            rc = qf_set_error(QF_INVALID_ARGUMENT,
                              "All input tensors must have the same size in the 0th dimension. "
                              "Component %zu of queue '%s' differs (expected %zu)",
                              j, qf_queue_name(bs->q), n);
            break;
        }
        if ((rc = qf_tensor_unstack(t, o->parts + j * n)) == QF_OK)
            done = j + 1;
    }
    if (rc != QF_OK)
        for (size_t i = 0; i < done * n; i++)
            qf_tensor_unref(o->parts[i]);
    return rc;
}

/* The kept rows as elements in o->rows, the others' parts dropped. */
static qf_code gather_rows(bop *o, size_t n)
{
    bstate *bs = o->bs;
    qf_code rc = QF_OK;
    qf_tensor *rowbuf[16];
    qf_tensor **row = bs->nq <= 16 ? rowbuf : malloc(bs->nq * sizeof(*row));
    size_t kept = 0;
    for (size_t r = 0; r < n; r++) {
        for (size_t j = 0; row && j < bs->nq; j++)
            row[j] = o->parts[j * n + r];
        for (size_t j = 0; row && o->keep[r] && rc == QF_OK && bs->sc.is_sparse && j < bs->nq; j++)
            if (qf__sparse_is(&bs->sc, j))
                rc = qf__sparse_check(&bs->sc, j, row[j], qf_queue_name(bs->q));
        if (!row || !o->keep[r] || rc != QF_OK) {
            for (size_t j = 0; j < bs->nq; j++)
                qf_tensor_unref(o->parts[j * n + r]);
            continue;
        }
        qf_element *re = qf_element_of(bs->nq, row);
        if (!re)
            rc = qf_last_code();
        else
            o->rows[kept++] = re;
    }
    if (!row)
        rc = qf__batch_oom();
    if (row != rowbuf)
        free(row);
    o->nrows = kept;
    o->row_i = 0;
    return rc;
}

/* A batch of examples (enqueue_many): split into rows. Consumes e. */
static qf_code take_rows(bop *o, qf_element *e)
{
    size_t n = 0;
    qf_code rc = check_arity(o, e);
    if (rc == QF_OK)
        rc = count_rows(o, e, &n);
    if (rc == QF_OK && !grow_scratch(o, n))
        rc = qf__batch_oom();
    if (rc == QF_OK)
        rc = decide_rows(o, e, n);
    if (rc == QF_OK)
        rc = unstack_components(o, e, n);
    if (rc == QF_OK)
        rc = gather_rows(o, n);
    qf_element_free(e);
    return rc;
}

/* Runs of up to this many examples per pull (see bop.runs). */
#define RUN_ROWS 256

/* The run path: a reader's records, as the rows of one run
 * (queues/tensor/qf_strblock-impl.h), all offered to the queue at once; the run's rest
 * waits in o->run when the queue is full. */
static qf_code batch_op_poll_runs(qf_task *task, bop *o)
{
    bstate *bs = o->bs;
    if (o->run_i == o->run_n) {
        if (!o->run && !(o->run = malloc(RUN_ROWS * sizeof(*o->run))))
            return qf__batch_oom();
        /* No more than there is room for: the queue's capacity, not the
         * run size, bounds what the readers hold (at least one: a full
         * queue parks the op holding that one, as before). */
        int64_t room = qf__queue_room_guess(bs->q);
        size_t max = room < 1 ? 1 : room < RUN_ROWS ? (size_t)room : RUN_ROWS;
        size_t n = 0;
        qf_code rc =
            qf__source_pull_run(o->inst, task, o->run, max, qf__queue_takes_bare_rows(bs->q), &n);
        if (rc != QF_OK)
            return rc; /* QF_PENDING, the end (OUT_OF_RANGE), or an error */
        o->run_n = n;
        o->run_i = 0;
        if (n == 0)
            return QF_OK;
    }
    size_t done = 0;
    qf_code rc = qf__queue_poll_enqueue_trusted(bs->q, o->run + o->run_i, o->run_n - o->run_i,
                                                qf_task_waker(task), &done);
    o->run_i += done;
    if (o->run_i == o->run_n)
        o->run_n = o->run_i = 0;
    return rc; /* QF_PENDING: parked, the rest held */
}

qf_code qf__batch_op_poll(qf_task *task, void *arg)
{
    bop *o = arg;
    bstate *bs = o->bs;
    if (o->runs)
        return batch_op_poll_runs(task, o);
    for (;;) {
        qf_element *next = o->holding;
        if (!next && o->row_i < o->nrows)
            next = o->rows[o->row_i];
        if (next) {
            size_t done = 0;
            qf_code rc = o->trusted && next == o->holding
                             ? qf__queue_poll_enqueue_trusted(bs->q, (void *const *)&next, 1,
                                                              qf_task_waker(task), &done)
                             : qf_queue_poll_enqueue(bs->q, next, qf_task_waker(task));
            if (rc != QF_OK)
                return rc; /* QF_PENDING: parked, the example held */
            if (o->holding) {
                o->holding = NULL;
            } else if (++o->row_i == o->nrows) {
                o->nrows = o->row_i = 0;
            }
            return QF_OK; /* one run: one example in */
        }
        qf_element *e = NULL;
        qf_code rc = qf__source_pull(o->inst, task, &e);
        if (rc != QF_OK)
            return rc; /* QF_PENDING, the end (OUT_OF_RANGE), or an error */
        if (!e)
            return QF_OK;
        rc = bs->many ? take_rows(o, e) : take_example(o, e);
        if (rc != QF_OK)
            return rc;
        if (!o->holding && o->nrows == 0)
            return QF_OK; /* everything was filtered out */
    }
}
