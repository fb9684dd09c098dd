/* qf_batch.c - batch, shuffle_batch, batch_join, shuffle_batch_join and the
 * maybe_* variants: the queue, the runner's ops and the batcher handle.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_batch-impl.h"
#include "qf_batch_sparse-impl.h"
#include "qf_lock-impl.h"
#include "qf_queue_trusted-impl.h"
#include "qf_status-impl.h"
#include "qf_strblock-impl.h"

#ifdef QF_RACE_WIDENING
#include <sched.h>
#endif

static qf_code oom(void)
{
    return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory building a batch");
}

/* --------------------------------------------------------------- op state */

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

static void bstate_free(void *arg)
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

/* The keep component of `e` as a bool tensor of rank `rank` (checked). */
static qf_code keep_tensor(const bop *o, const qf_element *e, int rank, const qf_tensor **ret)
{
    size_t k;
    qf_code rc = locate(o, e, o->bs->keep.component, &k);
    if (rc != QF_OK)
        return rc;
    const qf_tensor *t = qf_element_get(e, k);
    if (!t || qf_tensor_dtype(t) != QF_BOOL || qf_tensor_shape(t)->rank != rank)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "`keep_input` of queue '%s' must be a bool %s for every example",
                            qf_queue_name(o->bs->q), rank ? "vector" : "scalar");
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

/* True when every element `src` yields is, by construction, one `q` accepts
 * as it is: a reader source (qf_record_to_element(): key and value, scalar
 * strings, no names) and a positional queue of exactly those. Then the
 * enqueue's per-element validation is pure overhead (see
 * qf__queue_poll_enqueue_trusted()). Sources that run user code (produce,
 * poll, map) or pass on another queue's elements are always validated. */
static bool trusted_source(const qf_batch_source *src, qf_queue *q)
{
    if (src->kind != QF__SRC_READER && src->kind != QF__SRC_READER_OPTS)
        return false;
    if (qf_queue_num_components(q) != 2 || qf_queue_is_inline(q))
        return false;
    for (size_t i = 0; i < 2; i++) {
        const qf_shape *sh = qf_queue_shape(q, i);
        if (qf_queue_dtype(q, i) != QF_STRING || !sh || sh->rank != 0 ||
            qf_queue_component_name(q, i))
            return false;
    }
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
            if ((rc = keep_tensor(o, e, 0, &t)) != QF_OK)
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
        rc = oom();
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

/* A batch of examples (enqueue_many): split into rows. Consumes e. */
static qf_code take_rows(bop *o, qf_element *e)
{
    bstate *bs = o->bs;
    qf_code rc = check_arity(o, e);
    if (rc != QF_OK)
        goto out;
    size_t k0;
    if ((rc = locate(o, e, o->map[0], &k0)) != QF_OK)
        goto out;
    /* A sparse component's rows are its first dense dimension. */
    const qf_tensor *t0 = qf_element_get(e, k0);
    int64_t n0 = qf__rows_of(t0);
    if (n0 < 0) {
        rc = t0 && qf_tensor_dtype(t0) == QF_SPARSE
                 ? qf_last_code()
                 : qf_set_error(QF_INVALID_ARGUMENT,
                                "with enqueue_many every component of queue '%s' needs rank >= 1",
                                qf_queue_name(bs->q));
        goto out;
    }
    size_t n = (size_t)n0;
    if (!grow((void **)&o->keep, &o->keep_cap, n ? n : 1, sizeof(*o->keep)) ||
        !grow((void **)&o->parts, &o->parts_cap, (n ? n : 1) * bs->nq, sizeof(*o->parts)) ||
        !grow((void **)&o->rows, &o->rows_cap, n ? n : 1, sizeof(*o->rows))) {
        rc = oom();
        goto out;
    }
    /* Decide every row first, while the element is whole. */
    for (size_t r = 0; r < n; r++)
        o->keep[r] = true;
    if (bs->has_keep && bs->keep.kind == QF_KEEP_FN) {
        for (size_t r = 0; r < n; r++)
            o->keep[r] = bs->keep.fn(bs->keep.arg, e, (int64_t)r, o->src);
    } else if (bs->has_keep) {
        const qf_tensor *t = NULL;
        if ((rc = keep_tensor(o, e, 1, &t)) != QF_OK)
            goto out;
        if ((size_t)qf_tensor_shape(t)->dims[0] != n) {
            rc = qf_set_error(QF_INVALID_ARGUMENT,
                              "`keep_input` of queue '%s' has %" PRId64 " rows, the examples %zu",
                              qf_queue_name(bs->q), qf_tensor_shape(t)->dims[0], n);
            goto out;
        }
        memcpy(o->keep, qf_tensor_cdata(t), n * sizeof(bool));
    }
    /* Take each queue component out of the element and unstack it. */
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
    if (rc != QF_OK) {
        for (size_t i = 0; i < done * n; i++)
            qf_tensor_unref(o->parts[i]);
        goto out;
    }
    /* Rows: gather component j of row r from parts[j * n + r]. */
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
        rc = oom();
    if (row != rowbuf)
        free(row);
    o->nrows = kept;
    o->row_i = 0;
out:
    qf_element_free(e);
    return rc;
}

/* Runs of up to this many examples per pull (see bop.runs). */
#define RUN_ROWS 64

/* The run path: a reader's records, as the rows of one run
 * (queues/tensor/qf_strblock-impl.h), all offered to the queue at once; the run's rest
 * waits in o->run when the queue is full. */
static qf_code batch_op_poll_runs(qf_task *task, bop *o)
{
    bstate *bs = o->bs;
    if (o->run_i == o->run_n) {
        if (!o->run && !(o->run = malloc(RUN_ROWS * sizeof(*o->run))))
            return oom();
        /* No more than there is room for: the queue's capacity, not the
         * run size, bounds what the readers hold (at least one: a full
         * queue parks the op holding that one, as before). */
        int64_t room = qf_queue_capacity(bs->q) - qf_queue_size(bs->q);
        size_t max = room < 1 ? 1 : room < RUN_ROWS ? (size_t)room : RUN_ROWS;
        size_t n = 0;
        qf_code rc = qf__source_pull_run(o->inst, task, o->run, max, &n);
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

static qf_code batch_op_poll(qf_task *task, void *arg)
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

/* ---------------------------------------------------------------- batcher */

typedef struct gather gather;
static gather *gather_new(int64_t batch_size);
static void gather_unref(gather *g);

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

void qf_batcher_free(qf_batcher *b)
{
    if (!b)
        return;
    gather_unref(b->gather);
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

enum variant { V_BATCH, V_SHUFFLE };

typedef struct build_args {
    qf_scope *s;
    qf_batch_source **srcs; /* owned here */
    size_t n_srcs;
    bool join;
    enum variant v;
    const qf_keep_input *keep;
    int64_t batch_size;
    const qf_batch_options *o;
} build_args;

static const char *default_name(const build_args *a)
{
    if (a->v == V_SHUFFLE)
        return a->join ? "shuffle_batch_join" : "shuffle_batch";
    return a->join ? "batch_join" : "batch";
}

static int cmp_names_idx(const void *x, const void *y, void *names)
{
    char **n = names;
    return strcmp(n[*(const size_t *)x], n[*(const size_t *)y]);
}

/* Insertion sort of idx[0..n) by names[idx[i]] (n is small). */
static void sort_by_name(size_t *idx, size_t n, char **names)
{
    for (size_t i = 1; i < n; i++) {
        size_t v = idx[i], j = i;
        while (j > 0 && cmp_names_idx(&idx[j - 1], &v, names) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

static qf_code check_keep(const build_args *a, const qf_batch_source *src)
{
    const qf_keep_input *k = a->keep;
    if (k->kind == QF_KEEP_FN)
        return k->fn ? QF_OK : qf_set_error(QF_INVALID_ARGUMENT, "keep_input needs a function");
    if (k->kind != QF_KEEP_COMPONENT)
        return qf_set_error(QF_INVALID_ARGUMENT, "unknown keep_input kind %d", (int)k->kind);
    if (k->component >= src->comps.n)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "`keep_input` component %zu is out of range (%zu components)",
                            k->component, src->comps.n);
    if (src->dtypes[k->component] != QF_BOOL)
        return qf_set_error(QF_INVALID_ARGUMENT, "`keep_input` must be a bool component, not %s",
                            qf_dtype_name(src->dtypes[k->component]));
    if (!src->shapes || src->shapes[k->component].rank == QF_UNKNOWN_RANK)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "`keep_input` dimensions must be known at graph construction.");
    int whole = src->shapes[k->component].rank + (a->o->enqueue_many ? 1 : 0);
    if (whole > 1)
        return qf_set_error(QF_INVALID_ARGUMENT, "`keep_input` must be 0 or 1 dimensions.");
    if (whole == 1 && !a->o->enqueue_many)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "`keep_input` cannot be a vector when `enqueue_many=False`.");
    return QF_OK;
}

/* Do the sources of a join agree (spec 176)? */
static qf_code check_join(const build_args *a)
{
    const qf_batch_source *s0 = a->srcs[0];
    for (size_t i = 1; i < a->n_srcs; i++) {
        const qf_batch_source *si = a->srcs[i];
        if (!s0->names != !si->names)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Sources of a join must all be named or all positional: they "
                                "must have the same keys");
        if (si->comps.n != s0->comps.n)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                s0->names ? "Sources of a join must have the same keys"
                                          : "Expected types to be consistent: source 0 has %zu "
                                            "components, source %zu has %zu",
                                s0->comps.n, i, si->comps.n);
        for (size_t c = 0; c < s0->comps.n; c++) {
            size_t m = c;
            if (s0->names) {
                for (m = 0; m < si->comps.n; m++)
                    if (strcmp(si->names[m], s0->names[c]) == 0)
                        break;
                if (m == si->comps.n)
                    return qf_set_error(QF_INVALID_ARGUMENT,
                                        "Sources of a join must have the same keys: source %zu "
                                        "has no '%s'",
                                        i, s0->names[c]);
            }
            if (si->dtypes[m] != s0->dtypes[c])
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "Expected types to be consistent: component %zu is %s in "
                                    "source 0 and %s in source %zu",
                                    c, qf_dtype_name(s0->dtypes[c]), qf_dtype_name(si->dtypes[m]),
                                    i);
        }
    }
    return QF_OK;
}

static qf_code build(build_args *a, qf_batcher **ret)
{
    qf_batch_options dflt;
    memset(&dflt, 0, sizeof(dflt));
    const qf_batch_options *o = a->o ? a->o : &dflt;
    a->o = o;
    qf_code rc = QF_OK;
    bstate *bs = NULL;
    qf_batcher *b = NULL;
    size_t *order = NULL;
    qf_dtype *qdt = NULL;
    qf_shape *qsh = NULL;
    qf_queue_runner *runner = NULL;
    qf_enqueue_op *ops = NULL;

    /* ---- arguments */
    if (!ret)
        rc = qf_set_error(QF_INVALID_ARGUMENT, "NULL ret");
    else if (a->n_srcs == 0 || !a->srcs)
        rc = qf_set_error(QF_INVALID_ARGUMENT, "a batch needs at least one source");
    for (size_t i = 0; rc == QF_OK && i < a->n_srcs; i++)
        if (!a->srcs[i])
            rc = qf_set_error(QF_INVALID_ARGUMENT, "source %zu is NULL", i);
    if (rc != QF_OK)
        goto fail;
    if (a->batch_size < 1 || a->batch_size > INT32_MAX) {
        rc = qf_set_error(QF_INVALID_ARGUMENT, "batch_size must be in [1, %d], not %" PRId64,
                          INT32_MAX, a->batch_size);
        goto fail;
    }
    if (o->num_threads < 0) {
        rc = qf_set_error(QF_INVALID_ARGUMENT, "num_threads must be >= 0 not %d", o->num_threads);
        goto fail;
    }
    if (o->capacity < -1) { /* -1 alone asks for no limit (TensorFlow's kUnbounded) */
        rc = qf_set_error(QF_INVALID_ARGUMENT,
                          "capacity must be > 0, 0 (the default, %d) or -1 (unbounded), not "
                          "%" PRId64,
                          QF_INPUT_DEFAULT_CAPACITY, o->capacity);
        goto fail;
    }
    int64_t capacity = o->capacity ? o->capacity : QF_INPUT_DEFAULT_CAPACITY;
    if (a->v == V_SHUFFLE) {
        if (o->dynamic_pad) {
            rc = qf_set_error(QF_INVALID_ARGUMENT, "shuffle batching has no dynamic_pad");
            goto fail;
        }
        if (o->min_after_dequeue < 0 || capacity <= o->min_after_dequeue) { /* spec 177 */
            rc = qf_set_error(QF_INVALID_ARGUMENT,
                              "capacity %" PRId64 " must be bigger than min_after_dequeue %" PRId64
                              ".",
                              capacity, o->min_after_dequeue);
            goto fail;
        }
    }
    for (size_t i = 0; i < a->n_srcs; i++) {
        int many = qf__source_many(a->srcs[i]);
        if (many >= 0 && (many != 0) != o->enqueue_many) {
            rc = qf_set_error(QF_INVALID_ARGUMENT,
                              "source %zu comes from an op with many=%s, but enqueue_many is %s", i,
                              many ? "true" : "false", o->enqueue_many ? "true" : "false");
            goto fail;
        }
    }
    if ((rc = check_join(a)) != QF_OK)
        goto fail;
    const qf_batch_source *s0 = a->srcs[0];
    bool has_keep = a->keep != NULL;
    size_t kc = (size_t)-1;
    if (has_keep) {
        for (size_t i = 0; i < a->n_srcs; i++)
            if ((rc = check_keep(a, a->srcs[i])) != QF_OK)
                goto fail;
        if (a->keep->kind == QF_KEEP_COMPONENT)
            kc = a->keep->component;
    }

    /* ---- queue components: source 0's order minus keep, sorted by name */
    size_t nq = s0->comps.n - (kc != (size_t)-1 ? 1 : 0);
    if (nq == 0) {
        rc = qf_set_error(QF_INVALID_ARGUMENT, "nothing to batch besides keep_input");
        goto fail;
    }
    order = calloc(nq, sizeof(*order)); /* queue position -> source 0 component */
    qdt = calloc(nq, sizeof(*qdt));
    qsh = calloc(nq, sizeof(*qsh));
    bs = calloc(1, sizeof(*bs));
    b = calloc(1, sizeof(*b));
    if (b)
        b->gather = gather_new(a->batch_size);
    if (!order || !qdt || !qsh || !bs || !b || !b->gather) {
        rc = oom();
        goto fail;
    }
    for (size_t c = 0, j = 0; c < s0->comps.n; c++)
        if (c != kc)
            order[j++] = c;
    /* Per-example shapes in source order (without keep): opts or source. A
     * sparse component's is its dense shape, which may be unknown: the
     * queue holds a handle per example (spec 171). */
    for (size_t j = 0; j < nq; j++) {
        const qf_shape *sh = o->shapes ? &o->shapes[j] : s0->shapes ? &s0->shapes[order[j]] : NULL;
        if (s0->dtypes[order[j]] == QF_SPARSE) {
            qsh[j] = sh ? *sh : qf_shape_unknown();
            continue;
        }
        if (!sh || sh->rank == QF_UNKNOWN_RANK) { /* spec 168 */
            rc = qf_set_error(QF_INVALID_ARGUMENT, "Cannot infer Tensor's rank: component %zu%s%s",
                              j, s0->names ? " " : "", s0->names ? s0->names[order[j]] : "");
            goto fail;
        }
        qsh[j] = *sh;
    }
    if (s0->names) { /* spec 169: sorted keys */
        qf_shape *tmp = calloc(nq, sizeof(*tmp));
        size_t *pos = calloc(nq, sizeof(*pos));
        if (!tmp || !pos) {
            free(tmp);
            free(pos);
            rc = oom();
            goto fail;
        }
        for (size_t j = 0; j < nq; j++)
            pos[j] = j;
        /* sort positions by the names of the components they stand for */
        char **nm = calloc(nq, sizeof(*nm));
        if (!nm) {
            free(tmp);
            free(pos);
            rc = oom();
            goto fail;
        }
        for (size_t j = 0; j < nq; j++)
            nm[j] = s0->names[order[j]];
        sort_by_name(pos, nq, nm);
        size_t *ord2 = calloc(nq, sizeof(*ord2));
        if (!ord2) {
            free(tmp);
            free(pos);
            free(nm);
            rc = oom();
            goto fail;
        }
        for (size_t j = 0; j < nq; j++) {
            ord2[j] = order[pos[j]];
            tmp[j] = qsh[pos[j]];
        }
        memcpy(order, ord2, nq * sizeof(*order));
        memcpy(qsh, tmp, nq * sizeof(*qsh));
        free(ord2);
        free(tmp);
        free(pos);
        free(nm);
    }
    for (size_t j = 0; j < nq; j++)
        qdt[j] = s0->dtypes[order[j]];
    for (size_t i = 1; i < a->n_srcs; i++) /* a join's sources must fit these shapes */
        for (size_t j = 0; j < nq && a->srcs[i]->shapes && !o->shapes; j++) {
            const qf_batch_source *si = a->srcs[i];
            size_t m = order[j];
            if (s0->names)
                for (m = 0; m < si->comps.n; m++)
                    if (strcmp(si->names[m], s0->names[order[j]]) == 0)
                        break;
            if (!qf_shape_compatible(&si->shapes[m], &qsh[j])) {
                rc = qf_set_error(QF_INVALID_ARGUMENT,
                                  "source %zu's component %zu has a shape incompatible with "
                                  "source 0's",
                                  i, m);
                goto fail;
            }
        }
    /* Sparse components: their dense shapes move aside, [] goes to the queue. */
    if ((rc = qf__sparse_comps_init(&bs->sc, nq, qdt, qsh)) != QF_OK)
        goto fail;
    if (bs->sc.is_sparse) { /* the handle's copy, for taking batches */
        b->sparse = malloc(nq * sizeof(*b->sparse));
        b->dense = malloc(nq * sizeof(*b->dense));
        if (!b->sparse || !b->dense) {
            rc = oom();
            goto fail;
        }
        memcpy(b->sparse, bs->sc.is_sparse, nq * sizeof(*b->sparse));
        memcpy(b->dense, bs->sc.dense, nq * sizeof(*b->dense));
    }

    /* ---- the queue */
    const char *name = o->name ? o->name : default_name(a);
    const char *qkind = a->v == V_SHUFFLE ? "random_shuffle_queue"
                        : o->dynamic_pad  ? "padding_fifo_queue"
                                          : "fifo_queue";
    char qname[256];
    snprintf(qname, sizeof(qname), "%s/%s", name, qkind);
    qf_scope *s = a->s ? a->s : qf_scope_default();
    qf_queue_options qo;
    memset(&qo, 0, sizeof(qo));
    qo.capacity = capacity;
    qo.num_components = nq;
    qo.dtypes = qdt;
    qo.shapes = qsh;
    qo.name = qname;
    qo.shared_name = o->shared_name;
    qo.registry = qf_scope_registry(s);
    qo.min_after_dequeue = a->v == V_SHUFFLE ? o->min_after_dequeue : 0;
    qo.seed = a->v == V_SHUFFLE ? o->seed : 0;
    qf_queue *q = NULL;
    if (a->v == V_SHUFFLE)
        rc = qf_random_shuffle_queue_new(&qo, &q);
    else if (o->dynamic_pad)
        rc = qf_padding_fifo_queue_new(&qo, &q);
    else
        rc = qf_fifo_queue_new(&qo, &q); /* spec 168: shapes must be fully defined */
    if (rc != QF_OK)
        goto fail;
    bs->q = q;
    /* Its producers move runs and its consumers take batches: a full
     * fence per call is cheaper than a membarrier per park. Only on a
     * queue nobody else can be using yet. */
    if (!o->shared_name || !o->shared_name[0])
        qf__queue_use_symmetric_fences(q);

    /* ---- the op state: sources move in, one map per source */
    bs->nq = nq;
    bs->many = o->enqueue_many;
    bs->has_keep = has_keep;
    if (has_keep)
        bs->keep = *a->keep;
    bs->srcs = a->srcs;
    bs->n_srcs = a->n_srcs;
    a->srcs = NULL; /* bs owns them now */
    bs->maps = calloc(bs->n_srcs * nq, sizeof(*bs->maps));
    bs->n_ops = a->join ? bs->n_srcs : (size_t)(o->num_threads ? o->num_threads : 1);
    bs->ops = calloc(bs->n_ops, sizeof(*bs->ops));
    ops = calloc(bs->n_ops, sizeof(*ops));
    if (!bs->maps || !bs->ops || !ops) {
        rc = oom();
        goto fail;
    }
    for (size_t i = 0; i < bs->n_srcs; i++) {
        const qf_batch_source *si = bs->srcs[i];
        size_t *map = bs->maps + i * nq;
        for (size_t j = 0; j < nq; j++) {
            map[j] = order[j];
            if (si->names)
                for (map[j] = 0; map[j] < si->comps.n; map[j]++)
                    if (strcmp(si->names[map[j]], s0->names[order[j]]) == 0)
                        break;
        }
    }
    /* batch: one op run num_threads times (one name, as TensorFlow's
     * [enqueue_op] * num_threads); join: "..._enqueue", "..._enqueue_1", ... */
    char base[300];
    snprintf(base, sizeof(base), "%s_enqueue", qname);
    char **names_copy = calloc(bs->n_ops, sizeof(*names_copy));
    if (!names_copy) {
        rc = oom();
        goto fail;
    }
    for (size_t i = 0; i < bs->n_ops; i++) {
        bop *op = &bs->ops[i];
        op->bs = bs;
        op->src = a->join ? i : 0;
        op->map = bs->maps + op->src * nq;
        op->as_is =
            !(has_keep && bs->keep.kind == QF_KEEP_COMPONENT) && nq == bs->srcs[op->src]->comps.n;
        for (size_t j = 0; op->as_is && j < nq; j++)
            op->as_is = op->map[j] == j;
        op->trusted = op->as_is && trusted_source(bs->srcs[op->src], q);
        op->runs =
            op->trusted && !has_keep && !bs->many && qf__source_pulls_runs(bs->srcs[op->src]);
        if (rc == QF_OK)
            rc = qf__source_instance(bs->srcs[op->src], &op->inst);
        char tmp[sizeof(base) + 24]; /* base, "_", a size_t */
        if (a->join && i > 0)
            snprintf(tmp, sizeof(tmp), "%s_%zu", base, i);
        else
            snprintf(tmp, sizeof(tmp), "%s", base);
        names_copy[i] = strdup(tmp);
        if (!names_copy[i] && rc == QF_OK)
            rc = oom();
        ops[i] = (qf_enqueue_op){
            .name = names_copy[i], .kind = QF_OP_POLL, .poll = batch_op_poll, .arg = op};
    }
    qf_queue_runner_options ro;
    memset(&ro, 0, sizeof(ro));
    ro.cleanup = bstate_free;
    ro.cleanup_arg = bs;
    if (rc == QF_OK)
        rc = qf_queue_runner_new(q, ops, bs->n_ops, &ro, &runner);
    for (size_t i = 0; i < bs->n_ops; i++)
        free(names_copy[i]);
    free(names_copy);
    if (rc != QF_OK)
        goto fail;
    bs = NULL; /* the runner owns it */

    /* ---- the handle */
    b->q = qf_queue_ref(q);
    b->runner = runner;
    b->batch_size = a->batch_size;
    b->smaller = o->allow_smaller_final_batch;
    b->padded = o->dynamic_pad && a->v != V_SHUFFLE;
    b->nq = nq;
    b->dtypes = qdt;
    b->shapes = qsh;
    qdt = NULL;
    qsh = NULL;
    if (s0->names) { /* s0 lives on in the runner's state */
        b->names = calloc(nq, sizeof(*b->names));
        for (size_t j = 0; b->names && j < nq; j++)
            b->names[j] = strdup(s0->names[order[j]]);
        bool ok = b->names != NULL;
        for (size_t j = 0; ok && j < nq; j++)
            ok = b->names[j] != NULL;
        if (!ok) {
            qf_queue_runner_free(runner);
            runner = NULL;
            rc = oom();
            goto fail;
        }
    }
    b->gauge.queue = q;
    b->gauge.capacity = qf_queue_capacity(q);
    if (a->v == V_SHUFFLE) { /* spec 178 */
        b->gauge.min_after_dequeue = o->min_after_dequeue;
        snprintf(b->gauge.name, sizeof(b->gauge.name),
                 "%s/fraction_over_%" PRId64 "_of_%" PRId64 "_full", name, o->min_after_dequeue,
                 b->gauge.capacity - o->min_after_dequeue);
    } else { /* spec 161 */
        snprintf(b->gauge.name, sizeof(b->gauge.name), "%s/fraction_of_%" PRId64 "_full", name,
                 b->gauge.capacity);
    }
    if ((rc = qf_scope_add_queue_runner(s, runner, o->collection)) != QF_OK) {
        qf_queue_runner_free(runner);
        runner = NULL;
        goto fail;
    }
    free(order);
    free(ops);
    *ret = b;
    return QF_OK;

fail:
    /* Sources not yet moved into bs are still ours. */
    for (size_t i = 0; a->srcs && i < a->n_srcs; i++)
        qf_batch_source_free(a->srcs[i]);
    free(a->srcs);
    a->srcs = NULL;
    bstate_free(bs);
    qf_batcher_free(b);
    free(order);
    free(qdt);
    free(qsh);
    free(ops);
    return rc;
}

/* ------------------------------------------------------------ batch calls */

/* Copy the caller's array of sources (the build frees what it owns). */
static qf_code run_build(qf_scope *s, qf_batch_source *const *srcs, size_t n, bool join,
                         enum variant v, const qf_keep_input *keep, bool keep_required,
                         int64_t batch_size, const qf_batch_options *o, qf_batcher **ret)
{
    qf_batch_source **own = n && srcs ? calloc(n, sizeof(*own)) : NULL;
    if (own)
        memcpy(own, srcs, n * sizeof(*own));
    else
        for (size_t i = 0; srcs && i < n; i++)
            qf_batch_source_free(srcs[i]);
    if (n && srcs && !own)
        return oom();
    if (keep_required && !keep) {
        for (size_t i = 0; i < n; i++)
            qf_batch_source_free(own[i]);
        free(own);
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL keep_input");
    }
    build_args a = {.s = s,
                    .srcs = own,
                    .n_srcs = own ? n : 0,
                    .join = join,
                    .v = v,
                    .keep = keep,
                    .batch_size = batch_size,
                    .o = o};
    return build(&a, ret); /* takes `own`: into the runner's state, or freed */
}

qf_code qf_batch(qf_scope *s, qf_batch_source *src, int64_t batch_size,
                 const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, &src, src ? 1 : 0, false, V_BATCH, NULL, false, batch_size, opts, ret);
}

qf_code qf_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n, int64_t batch_size,
                      const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, srcs, n, true, V_BATCH, NULL, false, batch_size, opts, ret);
}

qf_code qf_shuffle_batch(qf_scope *s, qf_batch_source *src, int64_t batch_size,
                         const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, &src, src ? 1 : 0, false, V_SHUFFLE, NULL, false, batch_size, opts, ret);
}

qf_code qf_shuffle_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n,
                              int64_t batch_size, const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, srcs, n, true, V_SHUFFLE, NULL, false, batch_size, opts, ret);
}

qf_code qf_maybe_batch(qf_scope *s, qf_batch_source *src, const qf_keep_input *keep,
                       int64_t batch_size, const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, &src, src ? 1 : 0, false, V_BATCH, keep, true, batch_size, opts, ret);
}

qf_code qf_maybe_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n,
                            const qf_keep_input *keep, int64_t batch_size,
                            const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, srcs, n, true, V_BATCH, keep, true, batch_size, opts, ret);
}

qf_code qf_maybe_shuffle_batch(qf_scope *s, qf_batch_source *src, const qf_keep_input *keep,
                               int64_t batch_size, const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, &src, src ? 1 : 0, false, V_SHUFFLE, keep, true, batch_size, opts, ret);
}

qf_code qf_maybe_shuffle_batch_join(qf_scope *s, qf_batch_source *const *srcs, size_t n,
                                    const qf_keep_input *keep, int64_t batch_size,
                                    const qf_batch_options *opts, qf_batcher **ret)
{
    return run_build(s, srcs, n, true, V_SHUFFLE, keep, true, batch_size, opts, ret);
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

static gather *gather_new(int64_t batch_size)
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

static void gather_unref(gather *g)
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
 * after stacking its sparse components' handles (spec 171). */
static qf_code name_batch(const qf_batcher *b, qf_element *e, qf_element **ret)
{
    qf_code rc = qf__sparse_restore(b->sparse, b->nq, e);
    if (rc != QF_OK) {
        qf_element_free(e);
        return rc;
    }
    if (b->names) {
        rc = qf_element_set_names(e, (const char *const *)b->names);
        if (rc != QF_OK) {
            qf_element_free(e);
            return rc;
        }
    }
    *ret = e;
    return QF_OK;
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
        rc = qf_set_error(QF_OUT_OF_RANGE,
                          "%s '%s' is closed and has insufficient elements (requested %" PRId64
                          ", current size %zu)",
                          qf_queue_kind_name(b->q), qf_queue_name(b->q), b->batch_size, have);
    else if (!rows || !parts || !stacked)
        rc = oom(); /* the batch in progress stays */
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
    gather_unref(p->g);
    qf_queue_unref(p->q);
    free(p);
}

qf_code qf_batcher_poller_new(qf_batcher *b, qf_batcher_poller **ret)
{
    if (!b || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", b ? "ret" : "batcher");
    qf_batcher_poller *p = calloc(1, sizeof(*p));
    if (!p)
        return oom();
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
        return oom();
    }
    *ret = p;
    return QF_OK;
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
