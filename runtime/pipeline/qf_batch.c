/* qf_batch.c - batch, shuffle_batch, batch_join, shuffle_batch_join and the
 * maybe_* variants: making a batcher.
 *
 * A build runs in three phases: check the arguments and options, plan the
 * queue's components (source 0's minus keep_input, sorted by name when
 * named; spec 168-169, 176), then build the queue, the runner with its
 * enqueue ops (qf_batch_op.c) and the batcher handle (taken from in
 * qf_batcher.c). Everything the build made is freed when a phase fails;
 * the sources are the build's from the start (consumed, also on failure).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_batch_op-impl.h"
#include "qf_batcher-impl.h"
#include "qf_queue_trusted-impl.h"
#include "qf_status-impl.h"

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
        b->gather = qf__gather_new(a->batch_size);
    if (!order || !qdt || !qsh || !bs || !b || !b->gather) {
        rc = qf__batch_oom();
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
            rc = qf__batch_oom();
            goto fail;
        }
        for (size_t j = 0; j < nq; j++)
            pos[j] = j;
        /* sort positions by the names of the components they stand for */
        char **nm = calloc(nq, sizeof(*nm));
        if (!nm) {
            free(tmp);
            free(pos);
            rc = qf__batch_oom();
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
            rc = qf__batch_oom();
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
            rc = qf__batch_oom();
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
        rc = qf__batch_oom();
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
        rc = qf__batch_oom();
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
            rc = qf__batch_oom();
        ops[i] = (qf_enqueue_op){
            .name = names_copy[i], .kind = QF_OP_POLL, .poll = qf__batch_op_poll, .arg = op};
    }
    qf_queue_runner_options ro;
    memset(&ro, 0, sizeof(ro));
    ro.cleanup = qf__batch_state_free;
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
            rc = qf__batch_oom();
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
    qf__batch_state_free(bs);
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
        return qf__batch_oom();
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
