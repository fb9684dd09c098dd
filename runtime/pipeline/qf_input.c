/* qf_input.c - fill gauges, limit_epochs and the input producers.
 *
 * Every producer is the same machine over a table of rows: rows[i][c] is
 * row i of input component c, sliced once at construction and shared by
 * reference afterwards (a row tensor is immutable once made). The runner's
 * op is a poll op that owns a cursor into the current epoch's permutation:
 *
 *     pos == n_rows  ->  start an epoch: count it against num_epochs (the
 *                        run after the last epoch returns OUT_OF_RANGE,
 *                        TensorFlow's limit_epochs), reshuffle perm
 *                        (shuffle_epoch(): TensorFlow's own orders)
 *     otherwise      ->  wrap rows[perm[pos]] in an element, pos++, and
 *                        enqueue it with the queue's poll form; while the
 *                        queue is full the element waits in `holding` and
 *                        the task is parked on the queue.
 *
 * A producer over a deferred input (qf_deferred.h) is built with a queue
 * of the declared row shape and no rows; its first run takes the value,
 * checks it, and makes the rows there. From then on it is the same machine.
 *
 * The op state is touched only by the runner's one task for this op (a
 * runner starts one task per op and never two for the same op on one
 * runtime), so it needs no synchronisation: the runtime's hand-off between
 * polls orders it. The state belongs to the runner (its cleanup hook).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_deferred.h"
#include "qf_input.h"
#include "qf_philox-impl.h"
#include "qf_rng-impl.h"
#include "qf_status-impl.h"

/* ------------------------------------------------------------ fill gauges */

double qf_fill_gauge_value(const qf_fill_gauge *g)
{
    if (!g || !g->queue)
        return 0.0;
    int64_t span = g->capacity - g->min_after_dequeue;
    if (span <= 0)
        return 0.0;
    int64_t over = qf_queue_size(g->queue) - g->min_after_dequeue;
    return over > 0 ? (double)over / (double)span : 0.0;
}

qf_code qf_input_producer_gauge(const qf_queue *q, const char *summary_name,
                                qf_fill_gauge *ret_gauge)
{
    if (!q || !ret_gauge)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", q ? "ret_gauge" : "queue");
    qf_fill_gauge g;
    memset(&g, 0, sizeof(g));
    g.queue = q;
    g.capacity = qf_queue_capacity(q);
    if (summary_name)
        snprintf(g.name, sizeof(g.name), "%s/%s", qf_queue_name(q), summary_name);
    else
        snprintf(g.name, sizeof(g.name), "%s/fraction_of_%" PRId64 "_full", qf_queue_name(q),
                 g.capacity);
    *ret_gauge = g;
    return QF_OK;
}

double qf_input_producer_fraction_full(const qf_queue *q)
{
    if (!q)
        return 0.0;
    qf_fill_gauge g = {.queue = q, .capacity = qf_queue_capacity(q)};
    return qf_fill_gauge_value(&g);
}

/* ----------------------------------------------------------- limit_epochs */

struct qf_limit_epochs {
    qf_tensor *t;
    int64_t limit; /* 0: none */
    _Atomic int64_t count;
};

static qf_code bad_epochs(int64_t n)
{
    return qf_set_error(QF_INVALID_ARGUMENT, "num_epochs must be > 0 not %" PRId64, n);
}

qf_code qf_limit_epochs_new(qf_tensor *t, int64_t num_epochs, qf_limit_epochs **ret)
{
    if (!t || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", t ? "ret" : "tensor");
    if (num_epochs < 0)
        return bad_epochs(num_epochs);
    qf_limit_epochs *l = calloc(1, sizeof(*l));
    if (!l)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in limit_epochs");
    l->t = qf_tensor_ref(t);
    l->limit = num_epochs;
    atomic_init(&l->count, 0);
    *ret = l;
    return QF_OK;
}

void qf_limit_epochs_free(qf_limit_epochs *l)
{
    if (!l)
        return;
    qf_tensor_unref(l->t);
    free(l);
}

qf_code qf_limit_epochs_next(qf_limit_epochs *l, qf_tensor **ret_t)
{
    if (!l || !ret_t)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", l ? "ret_t" : "limit_epochs");
    if (l->limit == 0) {
        atomic_fetch_add_explicit(&l->count, 1, memory_order_relaxed);
    } else {
        /* A CAS rather than a fetch-add, so the counter never passes the
         * limit (it is TensorFlow's "epochs" variable, readable). */
        int64_t c = atomic_load_explicit(&l->count, memory_order_relaxed);
        do {
            if (c >= l->limit)
                return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %" PRId64, l->limit);
        } while (!atomic_compare_exchange_weak_explicit(&l->count, &c, c + 1, memory_order_relaxed,
                                                        memory_order_relaxed));
    }
    *ret_t = qf_tensor_ref(l->t);
    return QF_OK;
}

int64_t qf_limit_epochs_count(const qf_limit_epochs *l)
{
    if (!l) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_limit_epochs_count: limit_epochs is NULL");
        return 0;
    }
    return atomic_load_explicit(&((qf_limit_epochs *)l)->count, memory_order_relaxed);
}

void qf_limit_epochs_reset(qf_limit_epochs *l)
{
    if (!l) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_limit_epochs_reset: limit_epochs is NULL");
        return;
    }
    atomic_store_explicit(&l->count, 0, memory_order_relaxed);
}

qf_code qf_limit_epochs_produce(void *arg, qf_element **ret_elem)
{
    if (!ret_elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_elem");
    qf_tensor *t = NULL;
    qf_code rc = qf_limit_epochs_next(arg, &t);
    if (rc != QF_OK)
        return rc;
    qf_element *e = qf_element_of(1, &t);
    if (!e)
        return qf_last_code();
    *ret_elem = e;
    return QF_OK;
}

/* -------------------------------------------------------------- producers */

typedef struct producer {
    qf_queue *q; /* a reference */
    size_t n_rows, n_comp;
    qf_tensor **rows; /* n_rows * n_comp, row-major */
    size_t *perm;
    size_t pos; /* next index into perm; n_rows: an epoch is due */
    bool shuffle;
    qf__philox gen; /* the shuffles' generator (shuffle_epoch()) */
    int64_t num_epochs, epochs;
    qf_element *holding;   /* made, waiting for room */
    const char *empty_msg; /* zero rows: the op fails with this (spec 155) */
    qf_deferred *deferred; /* the input, until the first run takes it */
    qf_shape row_shape;    /* a deferred input's rows must have this shape */
} producer;

/* The shuffles are TensorFlow's, draw for draw, so that a seed gives the
 * orders it gives there (spec 160's test counts the orders of one seed).
 * input_producer shuffles each epoch with random_shuffle(input, seed): its
 * seeds are random_seed.get_seed(seed) with no graph-level seed, that is
 * (87654321, seed mod (2^31 - 1)), and the op's Philox generator
 * (qf_philox-impl.h) is keyed with the first and counts from the second. */
#define TF_DEFAULT_GRAPH_SEED 87654321
#define TF_MAXINT32 2147483647

static void seed_shuffles(producer *p, int64_t seed)
{
    if (seed != 0) {
        int64_t op_seed = seed % TF_MAXINT32; /* Python's %: never negative */
        if (op_seed < 0)
            op_seed += TF_MAXINT32;
        qf__philox_init(&p->gen, TF_DEFAULT_GRAPH_SEED, (uint64_t)op_seed);
        return;
    }
    qf__rng r; /* seed 0: a stream of its own (clock, address, counter) */
    qf__rng_seed(&r, 0);
    uint64_t key = qf__rng_next(&r);
    qf__philox_init(&p->gen, key, qf__rng_next(&r));
}

/* One epoch's order, as TensorFlow's RandomShuffle kernel makes it from
 * the input in its own order: an input of one row is left as it is and
 * draws nothing; else the op reserves n - 1 words and, for i from the
 * front, swaps row i with row i + (next word mod (n - i)). */
static void shuffle_epoch(producer *p)
{
    size_t n = p->n_rows;
    for (size_t i = 0; i < n; i++)
        p->perm[i] = i;
    if (n <= 1)
        return;
    qf__philox_words w = qf__philox_reserve32(&p->gen, (uint64_t)n - 1);
    for (size_t i = 0; i + 1 < n; i++) {
        /* TensorFlow's count is 32-bit; past 2^32 rows (never in memory
         * here) this caps it rather than wrap to 0. */
        uint64_t left = n - i;
        uint32_t m = left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
        size_t j = i + qf__philox_word(&w) % m;
        size_t t = p->perm[i];
        p->perm[i] = p->perm[j];
        p->perm[j] = t;
    }
}

static void producer_free(void *arg)
{
    producer *p = arg;
    if (!p)
        return;
    qf_element_free(p->holding);
    for (size_t i = 0; p->rows && i < p->n_rows * p->n_comp; i++)
        qf_tensor_unref(p->rows[i]);
    free(p->rows);
    free(p->perm);
    qf_deferred_unref(p->deferred);
    qf_queue_unref(p->q);
    free(p);
}

static qf_code make_rows(producer *p, const qf_tensor *const *in, size_t nc, qf_shape *row_shapes,
                         qf_dtype *dtypes);

static const char NOT_NULL_ERR[] = "string_input_producer requires a non-null input tensor";
static const char NON_EMPTY_ERR[] = "input_producer requires a non-empty input tensor";

/* The first run of a producer over a deferred input: take the value (spec
 * 150-151), check its rows against the queue's shape (TensorFlow's
 * enqueue_many check, spec 18), and make the rows. */
static qf_code producer_take_deferred(producer *p)
{
    qf_tensor *t = NULL;
    qf_code rc = qf_deferred_value(p->deferred, &t);
    if (rc != QF_OK)
        return rc;
    const qf_shape *sh = qf_tensor_shape(t);
    qf_shape rows = sh->rank >= 1 ? qf_shape_make(sh->rank - 1, sh->dims + 1) : *sh;
    if (sh->rank < 1) {
        rc = qf_set_error(QF_INVALID_ARGUMENT,
                          "Input tensor must be at least rank 1: '%s' evaluated to a scalar",
                          qf_deferred_name(p->deferred));
    } else if (!qf_shape_equal(&rows, &p->row_shape)) {
        char a[96], b[96];
        qf_shape want = qf_shape_prepend(sh->dims[0], &p->row_shape);
        rc = qf_set_error(QF_INVALID_ARGUMENT,
                          "Shape mismatch in tuple component 0. Expected %s, got %s (the value "
                          "of '%s')",
                          qf_shape_format(&want, a, sizeof(a)), qf_shape_format(sh, b, sizeof(b)),
                          qf_deferred_name(p->deferred));
    } else {
        qf_shape rs;
        qf_dtype dt;
        const qf_tensor *in = t;
        rc = make_rows(p, &in, 1, &rs, &dt);
    }
    qf_tensor_unref(t);
    if (rc == QF_OK && p->n_rows == 0)
        rc = qf_set_error(QF_INVALID_ARGUMENT, "%s ('%s' evaluated to no %s)", p->empty_msg,
                          qf_deferred_name(p->deferred),
                          p->empty_msg == NOT_NULL_ERR ? "strings" : "rows");
    if (rc == QF_OK) {
        qf_deferred_unref(p->deferred);
        p->deferred = NULL;
    }
    return rc;
}

static qf_code producer_poll(qf_task *task, void *arg)
{
    producer *p = arg;
    if (p->deferred) {
        qf_code rc = producer_take_deferred(p);
        if (rc != QF_OK)
            return rc; /* an error of the op (spec 155) */
    }
    if (!p->holding) {
        if (p->n_rows == 0)
            return qf_set_error(QF_INVALID_ARGUMENT, "%s", p->empty_msg);
        if (p->pos == p->n_rows) {
            if (p->num_epochs > 0 && p->epochs >= p->num_epochs)
                return qf_set_error(QF_OUT_OF_RANGE, "Reached limit of %" PRId64,
                                    p->num_epochs); /* spec 148-149 */
            p->epochs++;
            p->pos = 0;
            if (p->shuffle) /* a fresh permutation per epoch (spec 149, 153) */
                shuffle_epoch(p);
        }
        qf_tensor *parts[16];
        qf_tensor **pp = p->n_comp <= 16 ? parts : malloc(p->n_comp * sizeof(*pp));
        if (!pp)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in an input producer");
        qf_tensor **row = p->rows + p->perm[p->pos] * p->n_comp;
        for (size_t c = 0; c < p->n_comp; c++)
            pp[c] = qf_tensor_ref(row[c]);
        p->holding = qf_element_of(p->n_comp, pp);
        if (pp != parts)
            free(pp);
        if (!p->holding)
            return qf_last_code();
        p->pos++;
    }
    qf_code rc = qf_queue_poll_enqueue(p->q, p->holding, qf_task_waker(task));
    if (rc == QF_OK)
        p->holding = NULL;
    return rc; /* QF_PENDING: parked with the element held */
}

/* Slice every input into rows; check that they agree. */
static qf_code make_rows(producer *p, const qf_tensor *const *in, size_t nc, qf_shape *row_shapes,
                         qf_dtype *dtypes)
{
    int64_t n = -1;
    for (size_t c = 0; c < nc; c++) {
        if (!in[c])
            return qf_set_error(QF_INVALID_ARGUMENT, "NULL input tensor %zu", c);
        const qf_shape *sh = qf_tensor_shape(in[c]);
        if (sh->rank < 1)
            return qf_set_error(QF_INVALID_ARGUMENT, "Input tensor must be at least rank 1");
        if (n >= 0 && sh->dims[0] != n)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "All input tensors must have the same size in the 0th dimension. "
                                "Component %zu has %" PRId64 ", and should have %" PRId64,
                                c, sh->dims[0], n);
        n = sh->dims[0];
        row_shapes[c] = qf_shape_make(sh->rank - 1, sh->dims + 1);
        dtypes[c] = qf_tensor_dtype(in[c]);
        if (dtypes[c] == QF_PTR && qf_tensor_ptr_dtor(in[c]))
            return qf_set_error(QF_FAILED_PRECONDITION,
                                "an input producer cannot share a QF_PTR tensor that owns its "
                                "objects");
    }
    p->n_rows = (size_t)n;
    p->n_comp = nc;
    size_t cells = (size_t)n * nc;
    p->rows = calloc(cells ? cells : 1, sizeof(*p->rows));
    p->perm = calloc(n ? (size_t)n : 1, sizeof(*p->perm));
    if (!p->rows || !p->perm)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in an input producer");
    for (size_t i = 0; i < (size_t)n; i++) {
        p->perm[i] = i;
        for (size_t c = 0; c < nc; c++) {
            qf_tensor *r = qf_tensor_slice(in[c], (int64_t)i);
            if (!r)
                return qf_last_code();
            p->rows[i * nc + c] = r;
        }
    }
    p->pos = p->n_rows;
    return QF_OK;
}

static qf_code check_producer_options(const qf_input_producer_options *o)
{
    if (o->num_epochs < 0)
        return bad_epochs(o->num_epochs);
    if (o->shuffle != QF_SHUFFLE_DEFAULT && o->shuffle != QF_SHUFFLE_ON &&
        o->shuffle != QF_SHUFFLE_OFF)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "shuffle must be QF_SHUFFLE_DEFAULT, _ON or _OFF, not %d",
                            (int)o->shuffle);
    return QF_OK;
}

/* The producer's rows, or its deferred input, with the queue's dtypes and
 * shapes in dt and sh; the rows checked against element_shape. */
static qf_code plan_rows(producer *p, const qf_tensor *const *in, size_t nc, qf_deferred *deferred,
                         const qf_shape *rows, const qf_input_producer_options *o,
                         const char *empty_msg, qf_shape *sh, qf_dtype *dt)
{
    if (deferred) {
        p->deferred = qf_deferred_ref(deferred);
        p->row_shape = *rows;
        sh[0] = *rows;
        dt[0] = qf_deferred_dtype(deferred);
        return QF_OK;
    }
    qf_code rc = make_rows(p, in, nc, sh, dt);
    if (rc != QF_OK)
        return rc;
    if (p->n_rows == 0 && !empty_msg)
        return qf_set_error(QF_INVALID_ARGUMENT, "%s", NON_EMPTY_ERR);
    if (o->element_shape && (nc != 1 || !qf_shape_compatible(o->element_shape, &sh[0]))) {
        char a[96], b[96];
        return qf_set_error(
            QF_INVALID_ARGUMENT, "element_shape %s is not compatible with the input's rows %s",
            qf_shape_format(o->element_shape, a, sizeof(a)), qf_shape_format(&sh[0], b, sizeof(b)));
    }
    return QF_OK;
}

static qf_code make_producer_queue(qf_scope *s, const qf_input_producer_options *o,
                                   const char *name, size_t nc, qf_dtype *dt, qf_shape *sh,
                                   qf_queue **ret)
{
    qf_queue_options qo;
    memset(&qo, 0, sizeof(qo));
    qo.capacity = o->capacity ? o->capacity : QF_INPUT_DEFAULT_CAPACITY;
    qo.num_components = nc;
    qo.dtypes = dt;
    qo.shapes = sh;
    qo.name = name;
    qo.shared_name = o->shared_name;
    qo.registry = qf_scope_registry(s);
    return qf_fifo_queue_new(&qo, ret);
}

/* The runner over the producer's one op, added to the scope. Once the
 * runner is made it owns the producer (*pp becomes NULL), also when adding
 * it fails. */
static qf_code start_runner(qf_scope *s, producer **pp, const char *name,
                            const qf_input_producer_options *o)
{
    char opname[256];
    snprintf(opname, sizeof(opname), "%s_EnqueueMany", name);
    qf_enqueue_op op = {.name = opname, .kind = QF_OP_POLL, .poll = producer_poll, .arg = *pp};
    qf_queue_runner_options ro;
    memset(&ro, 0, sizeof(ro));
    ro.cancel_op = o->cancel_op;
    ro.cancel_arg = o->cancel_arg;
    ro.cleanup = producer_free;
    ro.cleanup_arg = *pp;
    qf_queue_runner *r = NULL;
    qf_code rc = qf_queue_runner_new((*pp)->q, &op, 1, &ro, &r);
    if (rc != QF_OK)
        return rc;
    *pp = NULL;
    if ((rc = qf_scope_add_queue_runner(s, r, o->collection)) != QF_OK)
        qf_queue_runner_free(r); /* frees the producer, and its queue reference */
    return rc;
}

/* The shared constructor: rows, queue, runner, collection. With a
 * deferred input (nc 1, `in` unused) the rows are made by the first run,
 * and `rows` is the shape they must have (the queue's). */
static qf_code build(qf_scope *s, const qf_tensor *const *in, size_t nc, qf_deferred *deferred,
                     const qf_shape *rows, const qf_input_producer_options *o,
                     const char *empty_msg, qf_queue **ret_queue)
{
    qf_input_producer_options dflt;
    memset(&dflt, 0, sizeof(dflt));
    if (!o)
        o = &dflt;
    qf_code rc = check_producer_options(o);
    if (rc != QF_OK)
        return rc;
    if (!s)
        s = qf_scope_default();
    if (!s)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "no default scope");
    const char *name = o->name ? o->name : "input_producer";

    producer *p = calloc(1, sizeof(*p));
    qf_shape shapes[16];
    qf_dtype dtypes[16];
    qf_shape *sh = nc <= 16 ? shapes : malloc(nc * sizeof(*sh));
    qf_dtype *dt = nc <= 16 ? dtypes : malloc(nc * sizeof(*dt));
    if (!p || !sh || !dt)
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in an input producer");
    if (rc == QF_OK)
        rc = plan_rows(p, in, nc, deferred, rows, o, empty_msg, sh, dt);
    if (rc == QF_OK) {
        p->empty_msg = empty_msg;
        p->num_epochs = o->num_epochs;
        p->shuffle = o->shuffle != QF_SHUFFLE_OFF;
        seed_shuffles(p, o->seed);
        rc = make_producer_queue(s, o, name, nc, dt, sh, &p->q); /* the producer's reference */
    }
    qf_queue *q = p ? p->q : NULL;
    if (rc == QF_OK)
        rc = start_runner(s, &p, name, o);
    if (rc == QF_OK && ret_queue)
        *ret_queue = qf_queue_ref(q);
    if (p)
        producer_free(p); /* also drops q when it got that far */
    if (sh != shapes)
        free(sh);
    if (dt != dtypes)
        free(dt);
    return rc;
}

qf_code qf_input_producer(qf_scope *s, const qf_tensor *input,
                          const qf_input_producer_options *opts, qf_queue **ret_queue)
{
    if (!input)
        return qf_set_error(QF_INVALID_ARGUMENT, "input_producer requires an input tensor");
    return build(s, &input, 1, NULL, NULL, opts, NULL, ret_queue);
}

qf_code qf_string_input_producer(qf_scope *s, const char *const *strings, size_t n,
                                 const qf_input_producer_options *opts, qf_queue **ret_queue)
{
    if (n == 0 || !strings) /* spec 154 */
        return qf_set_error(QF_INVALID_ARGUMENT, "%s", NOT_NULL_ERR);
    qf_shape sh = qf_shape_make(1, (const int64_t[]){(int64_t)n});
    qf_tensor *t = qf_tensor_new(QF_STRING, &sh);
    if (!t)
        return qf_last_code();
    for (size_t i = 0; i < n; i++) {
        if (!strings[i]) {
            qf_tensor_unref(t);
            return qf_set_error(QF_INVALID_ARGUMENT, "%s (string %zu is NULL)", NOT_NULL_ERR, i);
        }
        qf_code rc = qf_tensor_set_string(t, (int64_t)i, strings[i], strlen(strings[i]));
        if (rc != QF_OK) {
            qf_tensor_unref(t);
            return rc;
        }
    }
    const qf_tensor *in = t;
    qf_code rc = build(s, &in, 1, NULL, NULL, opts, NULL, ret_queue);
    qf_tensor_unref(t);
    return rc;
}

qf_code qf_string_input_producer_tensor(qf_scope *s, const qf_tensor *strings,
                                        const qf_input_producer_options *opts, qf_queue **ret_queue)
{
    if (!strings || qf_tensor_dtype(strings) != QF_STRING || qf_tensor_shape(strings)->rank != 1)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "string_input_producer requires a 1-D string tensor");
    /* spec 155: checked at run */
    return build(s, &strings, 1, NULL, NULL, opts, NOT_NULL_ERR, ret_queue);
}

qf_code qf_range_input_producer(qf_scope *s, int32_t limit, const qf_input_producer_options *opts,
                                qf_queue **ret_queue)
{
    if (limit <= 0)
        return qf_set_error(QF_INVALID_ARGUMENT, "range_input_producer requires limit > 0 not %d",
                            (int)limit);
    qf_shape sh = qf_shape_make(1, (const int64_t[]){limit});
    qf_tensor *t = qf_tensor_new(QF_INT32, &sh);
    if (!t)
        return qf_last_code();
    int32_t *v = qf_tensor_data(t);
    for (int32_t i = 0; i < limit; i++)
        v[i] = i;
    const qf_tensor *in = t;
    qf_code rc = build(s, &in, 1, NULL, NULL, opts, NULL, ret_queue);
    qf_tensor_unref(t);
    return rc;
}

qf_code qf_slice_input_producer(qf_scope *s, const qf_tensor *const *tensors, size_t n,
                                const qf_input_producer_options *opts, qf_queue **ret_queue)
{
    if (n == 0 || !tensors) /* spec 160 */
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Expected at least one tensor in slice_input_producer().");
    return build(s, tensors, n, NULL, NULL, opts, NULL, ret_queue);
}

/* ---------------------------------------------------- deferred producers */

/* The rows' shape of a deferred input: its static shape without the first
 * dimension merged with element_shape (TensorFlow's
 * input_tensor.shape[1:].merge_with(element_shape)); it must come out
 * fully defined (spec 151). */
static qf_code deferred_rows(const qf_deferred *d, const qf_shape *element_shape, qf_shape *ret)
{
    const qf_shape *st = qf_deferred_static_shape(d);
    if (st->rank == 0)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Input tensor must be at least rank 1: '%s' is declared a scalar",
                            qf_deferred_name(d));
    qf_shape rows = st->rank == QF_UNKNOWN_RANK ? qf_shape_unknown()
                                                : qf_shape_make(st->rank - 1, st->dims + 1);
    if (element_shape) {
        char a[96], b[96];
        if (!qf_shape_is_valid(element_shape) || !qf_shape_compatible(element_shape, &rows))
            return qf_set_error(
                QF_INVALID_ARGUMENT, "element_shape %s is not compatible with the input's rows %s",
                qf_shape_format(element_shape, a, sizeof(a)), qf_shape_format(&rows, b, sizeof(b)));
        if (rows.rank == QF_UNKNOWN_RANK)
            rows = *element_shape;
        else
            for (int k = 0; k < rows.rank && element_shape->rank != QF_UNKNOWN_RANK; k++)
                if (rows.dims[k] == QF_UNKNOWN_DIM)
                    rows.dims[k] = element_shape->dims[k];
    }
    if (!qf_shape_is_fully_defined(&rows))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Either `input_tensor` must have a fully defined shape or "
                            "`element_shape` must be specified");
    *ret = rows;
    return QF_OK;
}

static qf_code build_deferred(qf_scope *s, qf_deferred *d, const qf_shape *element_shape,
                              const qf_input_producer_options *opts, const char *empty_msg,
                              qf_queue **ret_queue)
{
    qf_shape rows;
    qf_code rc = deferred_rows(d, element_shape, &rows);
    if (rc != QF_OK)
        return rc;
    /* The value's rows are shared by reference between epochs. */
    if (qf_deferred_dtype(d) == QF_PTR || qf_deferred_dtype(d) == QF_SPARSE)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "an input producer cannot take a deferred %s tensor",
                            qf_dtype_name(qf_deferred_dtype(d)));
    return build(s, NULL, 1, d, &rows, opts, empty_msg, ret_queue);
}

qf_code qf_input_producer_deferred(qf_scope *s, qf_deferred *input,
                                   const qf_input_producer_options *opts, qf_queue **ret_queue)
{
    if (!input)
        return qf_set_error(QF_INVALID_ARGUMENT, "input_producer requires an input tensor");
    return build_deferred(s, input, opts ? opts->element_shape : NULL, opts, NON_EMPTY_ERR,
                          ret_queue);
}

qf_code qf_string_input_producer_deferred(qf_scope *s, qf_deferred *strings,
                                          const qf_input_producer_options *opts,
                                          qf_queue **ret_queue)
{
    const qf_shape *st = strings ? qf_deferred_static_shape(strings) : NULL;
    if (!strings || qf_deferred_dtype(strings) != QF_STRING ||
        (st->rank != QF_UNKNOWN_RANK && st->rank != 1))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "string_input_producer requires a 1-D string tensor");
    /* TensorFlow passes element_shape=[] whatever the input declares. */
    qf_shape scalar = qf_shape_scalar();
    return build_deferred(s, strings, &scalar, opts, NOT_NULL_ERR, ret_queue);
}
