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

/* ------------------------------------------------------ check the options */

static qf_code check_args(const build_args *a, qf_batcher **ret)
{
    if (!ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret");
    if (a->n_srcs == 0 || !a->srcs)
        return qf_set_error(QF_INVALID_ARGUMENT, "a batch needs at least one source");
    for (size_t i = 0; i < a->n_srcs; i++)
        if (!a->srcs[i])
            return qf_set_error(QF_INVALID_ARGUMENT, "source %zu is NULL", i);
    if (a->batch_size < 1 || a->batch_size > INT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "batch_size must be in [1, %d], not %" PRId64,
                            INT32_MAX, a->batch_size);
    return QF_OK;
}

static int64_t capacity_of(const qf_batch_options *o)
{
    return o->capacity ? o->capacity : QF_INPUT_DEFAULT_CAPACITY;
}

static qf_code check_options(const build_args *a)
{
    const qf_batch_options *o = a->o;
    if (o->num_threads < 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "num_threads must be >= 0 not %d", o->num_threads);
    if (o->capacity < -1) /* -1 alone asks for no limit (TensorFlow's kUnbounded) */
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "capacity must be > 0, 0 (the default, %d) or -1 (unbounded), not "
                            "%" PRId64,
                            QF_INPUT_DEFAULT_CAPACITY, o->capacity);
    if (a->v != V_SHUFFLE)
        return QF_OK;
    if (o->dynamic_pad)
        return qf_set_error(QF_INVALID_ARGUMENT, "shuffle batching has no dynamic_pad");
    int64_t capacity = capacity_of(o);
    if (o->min_after_dequeue < 0 || capacity <= o->min_after_dequeue) /* spec 177 */
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "capacity %" PRId64 " must be bigger than min_after_dequeue %" PRId64
                            ".",
                            capacity, o->min_after_dequeue);
    return QF_OK;
}

/* Do the sources fit the options and each other (spec 176), and
 * keep_input the sources? */
static qf_code check_sources(const build_args *a)
{
    bool many_wanted = a->o->enqueue_many;
    for (size_t i = 0; i < a->n_srcs; i++) {
        int many = qf__source_many(a->srcs[i]);
        if (many >= 0 && (many != 0) != many_wanted)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "source %zu comes from an op with many=%s, but enqueue_many is %s",
                                i, many ? "true" : "false", many_wanted ? "true" : "false");
    }
    qf_code rc = check_join(a);
    for (size_t i = 0; rc == QF_OK && a->keep && i < a->n_srcs; i++)
        rc = check_keep(a, a->srcs[i]);
    return rc;
}

/* ------------------------------------------------ plan the queue's layout */

/* The queue's components: source 0's minus keep_input, sorted by name. */
typedef struct plan {
    size_t nq;
    size_t *order;       /* queue position -> source 0 component */
    qf_dtype *qdt;       /* per queue component */
    qf_shape *qsh;       /* per example; [] for a sparse component */
    qf__sparse_comps sc; /* the sparse components' dense shapes */
} plan;

static void plan_free(plan *p)
{
    free(p->order);
    free(p->qdt);
    free(p->qsh);
    qf__sparse_comps_free(&p->sc);
}

/* Component of source `si` standing for source 0's component c: the one of
 * the same name, or of the same position (check_join() made sure the
 * sources are all named or all positional). */
static size_t source_component(const qf_batch_source *si, const qf_batch_source *s0, size_t c)
{
    if (!si->names)
        return c;
    size_t m = 0;
    while (m < si->comps.n && strcmp(si->names[m], s0->names[c]) != 0)
        m++;
    return m;
}

/* Per-example shapes in source order (without keep): opts or source. A
 * sparse component's is its dense shape, which may be unknown: the queue
 * holds a handle per example (spec 171). */
static qf_code plan_shapes(const build_args *a, plan *p)
{
    const qf_batch_source *s0 = a->srcs[0];
    for (size_t j = 0; j < p->nq; j++) {
        size_t c = p->order[j];
        const qf_shape *sh = a->o->shapes ? &a->o->shapes[j] : s0->shapes ? &s0->shapes[c] : NULL;
        if (s0->dtypes[c] == QF_SPARSE) {
            p->qsh[j] = sh ? *sh : qf_shape_unknown();
            continue;
        }
        if (!sh || sh->rank == QF_UNKNOWN_RANK) /* spec 168 */
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "Cannot infer Tensor's rank: component %zu%s%s", j,
                                s0->names ? " " : "", s0->names ? s0->names[c] : "");
        p->qsh[j] = *sh;
    }
    return QF_OK;
}

/* Spec 169: the queue's components in the order of their names (a stable
 * sort: the order and the shapes move together). */
static qf_code plan_sort_by_name(plan *p, char **src_names)
{
    size_t n = p->nq;
    size_t *pos = calloc(n, sizeof(*pos));
    char **nm = calloc(n, sizeof(*nm));
    size_t *order = calloc(n, sizeof(*order));
    qf_shape *qsh = calloc(n, sizeof(*qsh));
    qf_code rc = pos && nm && order && qsh ? QF_OK : qf__batch_oom();
    if (rc == QF_OK) {
        for (size_t j = 0; j < n; j++) {
            pos[j] = j;
            nm[j] = src_names[p->order[j]];
        }
        sort_by_name(pos, n, nm);
        for (size_t j = 0; j < n; j++) {
            order[j] = p->order[pos[j]];
            qsh[j] = p->qsh[pos[j]];
        }
        memcpy(p->order, order, n * sizeof(*order));
        memcpy(p->qsh, qsh, n * sizeof(*qsh));
    }
    free(pos);
    free(nm);
    free(order);
    free(qsh);
    return rc;
}

/* A join's sources must fit source 0's shapes (unless the options give
 * them). */
static qf_code check_join_shapes(const build_args *a, const plan *p)
{
    const qf_batch_source *s0 = a->srcs[0];
    for (size_t i = 1; i < a->n_srcs && !a->o->shapes; i++) {
        const qf_batch_source *si = a->srcs[i];
        for (size_t j = 0; j < p->nq && si->shapes; j++) {
            size_t m = source_component(si, s0, p->order[j]);
            if (!qf_shape_compatible(&si->shapes[m], &p->qsh[j]))
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "source %zu's component %zu has a shape incompatible with "
                                    "source 0's",
                                    i, m);
        }
    }
    return QF_OK;
}

static qf_code plan_components(const build_args *a, plan *p)
{
    const qf_batch_source *s0 = a->srcs[0];
    size_t kc = a->keep && a->keep->kind == QF_KEEP_COMPONENT ? a->keep->component : (size_t)-1;
    p->nq = s0->comps.n - (kc != (size_t)-1 ? 1 : 0);
    if (p->nq == 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "nothing to batch besides keep_input");
    p->order = calloc(p->nq, sizeof(*p->order));
    p->qdt = calloc(p->nq, sizeof(*p->qdt));
    p->qsh = calloc(p->nq, sizeof(*p->qsh));
    if (!p->order || !p->qdt || !p->qsh)
        return qf__batch_oom();
    for (size_t c = 0, j = 0; c < s0->comps.n; c++)
        if (c != kc)
            p->order[j++] = c;
    qf_code rc = plan_shapes(a, p);
    if (rc == QF_OK && s0->names)
        rc = plan_sort_by_name(p, s0->names);
    if (rc != QF_OK)
        return rc;
    for (size_t j = 0; j < p->nq; j++)
        p->qdt[j] = s0->dtypes[p->order[j]];
    if ((rc = check_join_shapes(a, p)) != QF_OK)
        return rc;
    /* Sparse components: their dense shapes move aside, [] goes to the queue. */
    return qf__sparse_comps_init(&p->sc, p->nq, p->qdt, p->qsh);
}

/* ------------------------------------------------------------- build them */

static qf_scope *scope_of(const build_args *a)
{
    return a->s ? a->s : qf_scope_default();
}

static qf_code make_queue(const build_args *a, const plan *p, const char *qname, qf_queue **ret)
{
    const qf_batch_options *o = a->o;
    qf_queue_options qo;
    memset(&qo, 0, sizeof(qo));
    qo.capacity = capacity_of(o);
    qo.num_components = p->nq;
    qo.dtypes = p->qdt;
    qo.shapes = p->qsh;
    qo.name = qname;
    qo.shared_name = o->shared_name;
    qo.registry = qf_scope_registry(scope_of(a));
    qo.min_after_dequeue = a->v == V_SHUFFLE ? o->min_after_dequeue : 0;
    qo.seed = a->v == V_SHUFFLE ? o->seed : 0;
    qf_code rc;
    if (a->v == V_SHUFFLE)
        rc = qf_random_shuffle_queue_new(&qo, ret);
    else if (o->dynamic_pad)
        rc = qf_padding_fifo_queue_new(&qo, ret);
    else
        rc = qf_fifo_queue_new(&qo, ret); /* spec 168: shapes must be fully defined */
    /* Its producers move runs and its consumers take batches: a full
     * fence per call is cheaper than a membarrier per park, and a run or
     * a batch is a stretch of whole lines with the cells in order. Only
     * on a queue nobody else can be using yet. */
    if (rc == QF_OK && (!o->shared_name || !o->shared_name[0])) {
        qf__queue_use_symmetric_fences(*ret);
        qf__queue_lay_in_order(*ret);
    }
    return rc;
}

/* The op state: the sources move in (bs owns them from here on, also on
 * failure), one map per source. */
static qf_code make_state(build_args *a, const plan *p, bstate *bs)
{
    size_t nq = p->nq;
    bs->nq = nq;
    bs->many = a->o->enqueue_many;
    bs->has_keep = a->keep != NULL;
    if (bs->has_keep)
        bs->keep = *a->keep;
    bs->srcs = a->srcs;
    bs->n_srcs = a->n_srcs;
    a->srcs = NULL;
    bs->maps = calloc(bs->n_srcs * nq, sizeof(*bs->maps));
    bs->n_ops = a->join ? bs->n_srcs : (size_t)(a->o->num_threads ? a->o->num_threads : 1);
    bs->ops = calloc(bs->n_ops, sizeof(*bs->ops));
    if (!bs->maps || !bs->ops)
        return qf__batch_oom();
    for (size_t i = 0; i < bs->n_srcs; i++)
        for (size_t j = 0; j < nq; j++)
            bs->maps[i * nq + j] = source_component(bs->srcs[i], bs->srcs[0], p->order[j]);
    return QF_OK;
}

/* Op i of the state: its source and map, its fast paths (see bop), and its
 * source instance. */
static qf_code init_op(const build_args *a, bstate *bs, size_t i)
{
    bop *op = &bs->ops[i];
    const qf_batch_source *src;
    op->bs = bs;
    op->src = a->join ? i : 0;
    op->map = bs->maps + op->src * bs->nq;
    src = bs->srcs[op->src];
    op->as_is = !(bs->has_keep && bs->keep.kind == QF_KEEP_COMPONENT) && bs->nq == src->comps.n;
    for (size_t j = 0; op->as_is && j < bs->nq; j++)
        op->as_is = op->map[j] == j;
    op->trusted = op->as_is && trusted_source(src, bs->q);
    op->runs = op->trusted && !bs->has_keep && !bs->many && qf__source_pulls_runs(src);
    return qf__source_instance(bs->srcs[op->src], &op->inst);
}

/* batch: one op run num_threads times (one name, as TensorFlow's
 * [enqueue_op] * num_threads); join: "..._enqueue", "..._enqueue_1", ... */
static char *op_name(const build_args *a, const char *qname, size_t i)
{
    char tmp[256 + 32]; /* qname, "_enqueue_", a size_t */
    if (a->join && i > 0)
        snprintf(tmp, sizeof(tmp), "%s_enqueue_%zu", qname, i);
    else
        snprintf(tmp, sizeof(tmp), "%s_enqueue", qname);
    return strdup(tmp);
}

/* The runner over bs's ops; it owns bs once made (its cleanup hook). */
static qf_code make_runner(const build_args *a, bstate *bs, const char *qname,
                           qf_queue_runner **ret)
{
    qf_enqueue_op *ops = calloc(bs->n_ops, sizeof(*ops));
    char **names = calloc(bs->n_ops, sizeof(*names));
    qf_code rc = ops && names ? QF_OK : qf__batch_oom();
    for (size_t i = 0; rc == QF_OK && i < bs->n_ops; i++) {
        rc = init_op(a, bs, i);
        if (rc == QF_OK && !(names[i] = op_name(a, qname, i)))
            rc = qf__batch_oom();
        ops[i] = (qf_enqueue_op){
            .name = names[i], .kind = QF_OP_POLL, .poll = qf__batch_op_poll, .arg = &bs->ops[i]};
    }
    qf_queue_runner_options ro;
    memset(&ro, 0, sizeof(ro));
    ro.cleanup = qf__batch_state_free;
    ro.cleanup_arg = bs;
    if (rc == QF_OK)
        rc = qf_queue_runner_new(bs->q, ops, bs->n_ops, &ro, ret);
    for (size_t i = 0; names && i < bs->n_ops; i++)
        free(names[i]);
    free(names);
    free(ops);
    return rc;
}

/* The handle's copy of the sparse components, for taking batches. */
static qf_code copy_sparse(qf_batcher *b, const qf__sparse_comps *sc, size_t nq)
{
    if (!sc->is_sparse)
        return QF_OK;
    b->sparse = malloc(nq * sizeof(*b->sparse));
    b->dense = malloc(nq * sizeof(*b->dense));
    if (!b->sparse || !b->dense)
        return qf__batch_oom();
    memcpy(b->sparse, sc->is_sparse, nq * sizeof(*b->sparse));
    memcpy(b->dense, sc->dense, nq * sizeof(*b->dense));
    return QF_OK;
}

/* The handle's names: source 0's, in the queue's order (or none). */
static qf_code copy_names(qf_batcher *b, const plan *p, char **src_names)
{
    if (!src_names)
        return QF_OK;
    b->names = calloc(p->nq, sizeof(*b->names));
    for (size_t j = 0; b->names && j < p->nq; j++)
        b->names[j] = strdup(src_names[p->order[j]]);
    bool ok = b->names != NULL;
    for (size_t j = 0; ok && j < p->nq; j++)
        ok = b->names[j] != NULL;
    return ok ? QF_OK : qf__batch_oom();
}

static void name_gauge(const build_args *a, const char *name, qf_batcher *b)
{
    b->gauge.queue = b->q;
    b->gauge.capacity = qf_queue_capacity(b->q);
    int64_t mad = a->o->min_after_dequeue;
    if (a->v == V_SHUFFLE) { /* spec 178 */
        b->gauge.min_after_dequeue = mad;
        snprintf(b->gauge.name, sizeof(b->gauge.name),
                 "%s/fraction_over_%" PRId64 "_of_%" PRId64 "_full", name, mad,
                 b->gauge.capacity - mad);
    } else { /* spec 161 */
        snprintf(b->gauge.name, sizeof(b->gauge.name), "%s/fraction_of_%" PRId64 "_full", name,
                 b->gauge.capacity);
    }
}

/* Fill the handle over queue q and its runner (the plan's dtypes and
 * shapes move in). */
static qf_code fill_handle(const build_args *a, plan *p, char **src_names, qf_queue *q,
                           qf_batcher *b)
{
    b->q = qf_queue_ref(q);
    b->batch_size = a->batch_size;
    b->smaller = a->o->allow_smaller_final_batch;
    b->padded = a->o->dynamic_pad && a->v != V_SHUFFLE;
    b->nq = p->nq;
    b->dtypes = p->qdt;
    b->shapes = p->qsh;
    p->qdt = NULL;
    p->qsh = NULL;
    return copy_names(b, p, src_names);
}

static const char *queue_kind(const build_args *a)
{
    if (a->v == V_SHUFFLE)
        return "random_shuffle_queue";
    return a->o->dynamic_pad ? "padding_fifo_queue" : "fifo_queue";
}

/* The queue, the runner and the handle, in the scope. Consumes the
 * sources. */
static qf_code make_batcher(build_args *a, plan *p, qf_batcher **ret)
{
    const char *name = a->o->name ? a->o->name : default_name(a);
    char qname[256];
    snprintf(qname, sizeof(qname), "%s/%s", name, queue_kind(a));
    bstate *bs = calloc(1, sizeof(*bs));
    qf_batcher *b = calloc(1, sizeof(*b));
    if (b)
        b->gather = qf__gather_new(a->batch_size);
    qf_code rc = bs && b && b->gather ? QF_OK : qf__batch_oom();
    if (rc == QF_OK) {
        bs->sc = p->sc; /* moves into the op state */
        memset(&p->sc, 0, sizeof(p->sc));
        rc = copy_sparse(b, &bs->sc, p->nq);
    }
    if (rc == QF_OK)
        rc = make_queue(a, p, qname, &bs->q);
    if (rc == QF_OK)
        rc = make_state(a, p, bs);
    if (rc == QF_OK)
        rc = make_runner(a, bs, qname, &b->runner);
    if (rc != QF_OK) {
        qf__batch_state_free(bs);
        qf_batcher_free(b);
        return rc;
    }
    /* The runner owns bs, and with it the sources (s0 lives on). */
    qf_queue_runner *runner = b->runner;
    rc = fill_handle(a, p, bs->srcs[0]->names, bs->q, b);
    if (rc == QF_OK) {
        name_gauge(a, name, b);
        rc = qf_scope_add_queue_runner(scope_of(a), runner, a->o->collection);
    }
    if (rc != QF_OK) {
        qf_queue_runner_free(runner);
        qf_batcher_free(b);
        return rc;
    }
    *ret = b;
    return QF_OK;
}

static qf_code build(build_args *a, qf_batcher **ret)
{
    qf_batch_options dflt;
    memset(&dflt, 0, sizeof(dflt));
    if (!a->o)
        a->o = &dflt;
    plan p;
    memset(&p, 0, sizeof(p));
    qf_code rc = check_args(a, ret);
    if (rc == QF_OK)
        rc = check_options(a);
    if (rc == QF_OK)
        rc = check_sources(a);
    if (rc == QF_OK)
        rc = plan_components(a, &p);
    if (rc == QF_OK)
        rc = make_batcher(a, &p, ret);
    /* Sources not yet moved into the op state are still ours. */
    for (size_t i = 0; a->srcs && i < a->n_srcs; i++)
        qf_batch_source_free(a->srcs[i]);
    free(a->srcs);
    a->srcs = NULL;
    plan_free(&p);
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
