/* qf_scope.c - scopes: collections of runners, start_queue_runners, the
 * name registry, and runner definitions as text.
 *
 * A definition is a few "key: value" lines, close to TensorFlow's
 * QueueRunnerDef text form:
 *
 *     queue_name: "scope/q"
 *     enqueue_op_name: "scope/op"          (one line per op)
 *     close_op_name: "scope/q_Close"
 *     cancel_op_name: "scope/q_Close_1"
 *     queue_closed_exception_types: 11     (canonical numbers)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_lock-impl.h"
#include "qf_queue_runner-impl.h"

typedef struct collection {
    char *name;
    qf_queue_runner **rs;
    size_t n, cap;
} collection;

typedef struct named_queue {
    char *name;
    qf_queue *q;
} named_queue;

typedef struct named_op {
    qf_enqueue_op op;
    char *name;
} named_op;

typedef struct named_action {
    char *name;
    qf_runner_action_fn fn;
    void *arg;
} named_action;

struct qf_scope {
    _Atomic uint32_t lock;
    collection *colls;
    size_t n_colls;
    qf_queue_runner **owned;
    size_t n_owned, cap_owned;
    qf_queue_registry *registry;
    named_queue *queues;
    size_t n_queues;
    named_op *ops;
    size_t n_ops;
    named_action *actions;
    size_t n_actions;
};

static bool grow(void **arr, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 8;
    void *na = realloc(*arr, nc * elem);
    if (!na)
        return false;
    *arr = na;
    *cap = nc;
    return true;
}

qf_code qf_scope_new(qf_scope **ret_scope)
{
    if (!ret_scope)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL ret_scope");
    qf_scope *s = calloc(1, sizeof(*s));
    if (!s)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a scope");
    qf_code rc = qf_queue_registry_new(&s->registry);
    if (rc != QF_OK) {
        free(s);
        return rc;
    }
    *ret_scope = s;
    return QF_OK;
}

void qf_scope_free(qf_scope *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_colls; i++) {
        free(s->colls[i].name);
        free(s->colls[i].rs);
    }
    free(s->colls);
    for (size_t i = 0; i < s->n_owned; i++)
        qf_queue_runner_free(s->owned[i]);
    free(s->owned);
    for (size_t i = 0; i < s->n_queues; i++) {
        free(s->queues[i].name);
        qf_queue_unref(s->queues[i].q);
    }
    free(s->queues);
    for (size_t i = 0; i < s->n_ops; i++) {
        free(s->ops[i].name);
        qf_queue_unref(s->ops[i].op.input);
    }
    free(s->ops);
    for (size_t i = 0; i < s->n_actions; i++)
        free(s->actions[i].name);
    free(s->actions);
    qf_queue_registry_free(s->registry);
    free(s);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static qf_scope *default_scope;

static void make_default(void)
{
    if (qf_scope_new(&default_scope) != QF_OK)
        default_scope = NULL;
}

qf_scope *qf_scope_default(void)
{
    pthread_once(&default_once, make_default);
    return default_scope;
}

qf_queue_registry *qf_scope_registry(qf_scope *s)
{
    return s ? s->registry : qf_queue_registry_default();
}

/* ------------------------------------------------------------ collections */

static collection *find_coll(qf_scope *s, const char *name, bool create)
{
    for (size_t i = 0; i < s->n_colls; i++)
        if (strcmp(s->colls[i].name, name) == 0)
            return &s->colls[i];
    if (!create)
        return NULL;
    collection *nc = realloc(s->colls, (s->n_colls + 1) * sizeof(*nc));
    if (!nc)
        return NULL;
    s->colls = nc;
    collection *c = &s->colls[s->n_colls];
    memset(c, 0, sizeof(*c));
    if (!(c->name = strdup(name)))
        return NULL;
    s->n_colls++;
    return c;
}

qf_code qf_scope_add_queue_runner(qf_scope *s, qf_queue_runner *r, const char *collection_name)
{
    if (!r)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL runner");
    if (!s)
        s = qf_scope_default();
    const char *cn = collection_name ? collection_name : QF_QUEUE_RUNNERS;
    qf__lock(&s->lock);
    collection *c = find_coll(s, cn, true);
    bool owned = false;
    for (size_t i = 0; i < s->n_owned; i++)
        owned = owned || s->owned[i] == r;
    if (!c || !grow((void **)&c->rs, c->n, &c->cap, sizeof(*c->rs)) ||
        (!owned && !grow((void **)&s->owned, s->n_owned, &s->cap_owned, sizeof(*s->owned)))) {
        qf__unlock(&s->lock);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory adding a QueueRunner");
    }
    c->rs[c->n++] = r;
    if (!owned)
        s->owned[s->n_owned++] = r;
    qf__unlock(&s->lock);
    return QF_OK;
}

size_t qf_scope_get_collection(qf_scope *s, const char *collection_name, const char *name_scope,
                               qf_queue_runner **out, size_t cap)
{
    if (!s)
        s = qf_scope_default();
    const char *cn = collection_name ? collection_name : QF_QUEUE_RUNNERS;
    size_t plen = name_scope ? strlen(name_scope) : 0;
    size_t k = 0;
    qf__lock(&s->lock);
    collection *c = find_coll(s, cn, false);
    for (size_t i = 0; c && i < c->n; i++) {
        if (plen && strncmp(qf_queue_runner_name(c->rs[i]), name_scope, plen) != 0)
            continue;
        if (k < cap && out)
            out[k] = c->rs[i];
        k++;
    }
    qf__unlock(&s->lock);
    return k;
}

qf_code qf_start_queue_runners(qf_runtime *rt, qf_coord *coord, qf_scope *s,
                               const char *collection_name, unsigned flags, qf_task ***ret_tasks,
                               size_t *ret_n)
{
    if (flags & ~(unsigned)(QF_RUNNER_START | QF_RUNNER_DAEMON))
        return qf_set_error(QF_INVALID_ARGUMENT, "flags 0x%x has unknown bits (0x%x)", flags,
                            flags & ~(unsigned)(QF_RUNNER_START | QF_RUNNER_DAEMON));
    if (ret_tasks)
        *ret_tasks = NULL;
    if (ret_n)
        *ret_n = 0;
    if (!rt)
        rt = qf_runtime_default();
    if (!rt)
        return qf_set_error(QF_FAILED_PRECONDITION,
                            "Cannot start queue runners: No default runtime");
    size_t n = qf_scope_get_collection(s, collection_name, NULL, NULL, 0);
    qf_queue_runner **rs = malloc((n ? n : 1) * sizeof(*rs));
    if (!rs)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory starting queue runners");
    n = qf_scope_get_collection(s, collection_name, NULL, rs, n);
    /* One batch: one push of every task and one wake (issue 26). */
    qf_code rc = qf_queue_runners_start(rs, n, rt, coord, flags, ret_tasks, ret_n);
    free(rs);
    return rc;
}

/* ------------------------------------------------------------ name registry */

qf_code qf_scope_register_queue(qf_scope *s, qf_queue *q)
{
    if (!s || !q)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", s ? "queue" : "scope");
    qf__lock(&s->lock);
    named_queue *nq = realloc(s->queues, (s->n_queues + 1) * sizeof(*nq));
    char *name = nq ? strdup(qf_queue_name(q)) : NULL;
    if (!name) {
        if (nq)
            s->queues = nq;
        qf__unlock(&s->lock);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory registering a queue");
    }
    s->queues = nq;
    s->queues[s->n_queues++] = (named_queue){name, qf_queue_ref(q)};
    qf__unlock(&s->lock);
    return QF_OK;
}

qf_code qf_scope_register_op(qf_scope *s, const qf_enqueue_op *op)
{
    if (!s || !op || !op->name)
        return qf_set_error(QF_INVALID_ARGUMENT, "A registered op needs a scope and a name");
    qf__lock(&s->lock);
    named_op *no = realloc(s->ops, (s->n_ops + 1) * sizeof(*no));
    char *name = no ? strdup(op->name) : NULL;
    if (!name) {
        if (no)
            s->ops = no;
        qf__unlock(&s->lock);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory registering an op");
    }
    s->ops = no;
    named_op *slot = &s->ops[s->n_ops++];
    slot->op = *op;
    slot->name = name;
    slot->op.name = name;
    qf_queue_ref(op->input);
    qf__unlock(&s->lock);
    return QF_OK;
}

qf_code qf_scope_register_action(qf_scope *s, const char *name, qf_runner_action_fn fn, void *arg)
{
    if (!s || !name || !fn)
        return qf_set_error(QF_INVALID_ARGUMENT, "A registered action needs a name and a function");
    qf__lock(&s->lock);
    named_action *na = realloc(s->actions, (s->n_actions + 1) * sizeof(*na));
    char *nm = na ? strdup(name) : NULL;
    if (!nm) {
        if (na)
            s->actions = na;
        qf__unlock(&s->lock);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory registering an action");
    }
    s->actions = na;
    s->actions[s->n_actions++] = (named_action){nm, fn, arg};
    qf__unlock(&s->lock);
    return QF_OK;
}

/* ---------------------------------------------------------------- defs */

static const char *strip(const char *name, const char *scope)
{
    size_t n = scope ? strlen(scope) : 0;
    return n && strncmp(name, scope, n) == 0 ? name + n : name;
}

qf_code qf_queue_runner_to_def(const qf_queue_runner *r, const char *export_scope, char **ret_text)
{
    if (!r || !ret_text)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", r ? "ret_text" : "runner");
    const char *qn = qf_queue_name(r->queue);
    if (export_scope && *export_scope && strncmp(qn, export_scope, strlen(export_scope)) != 0) {
        *ret_text = NULL; /* not in the exported scope (spec 146) */
        return QF_OK;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory writing a definition");
    fprintf(f, "queue_name: \"%s\"\n", strip(qn, export_scope));
    for (size_t i = 0; i < r->n_ops; i++)
        fprintf(f, "enqueue_op_name: \"%s\"\n", strip(r->ops[i].name, export_scope));
    fprintf(f, "close_op_name: \"%s\"\n", strip(r->close_name, export_scope));
    fprintf(f, "cancel_op_name: \"%s\"\n", strip(r->cancel_name, export_scope));
    for (size_t i = 0; i < r->n_closed; i++)
        fprintf(f, "queue_closed_exception_types: %d\n", (int)r->closed[i]);
    fclose(f);
    *ret_text = buf;
    return QF_OK;
}

/* Parse `key: "value"` or `key: number`; returns false on malformed text. */
static bool parse_line(char *line, char **key, char **val)
{
    char *colon = strchr(line, ':');
    if (!colon)
        return false;
    *colon = 0;
    *key = line;
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == '\n' || v[n - 1] == '\r' || v[n - 1] == ' '))
        v[--n] = 0;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v[n - 1] = 0;
        v++;
    }
    *val = v;
    return true;
}

static char *scoped(const char *scope, const char *name)
{
    char *s = NULL;
    if (asprintf(&s, "%s%s", scope ? scope : "", name) < 0)
        return NULL;
    return s;
}

/* A QueueRunnerDef's fields (its text form), the names already scoped. */
typedef struct runner_def {
    char *queue_name, *close_name, *cancel_name;
    char **op_names;
    size_t n_ops;
    qf_code codes[QF_CODE_COUNT];
    size_t n_codes;
} runner_def;

static void runner_def_free(runner_def *d)
{
    for (size_t i = 0; i < d->n_ops; i++)
        free(d->op_names[i]);
    free(d->op_names);
    free(d->queue_name);
    free(d->close_name);
    free(d->cancel_name);
}

/* Replace *field by the scoped name. */
static void set_scoped(char **field, const char *import_scope, const char *val)
{
    free(*field);
    *field = scoped(import_scope, val);
}

/* One `key: value` line's field into d. An enqueue op that finds no room
 * is dropped here and reported missing by resolve_ops(). */
static qf_code def_field(runner_def *d, const char *key, const char *val, const char *import_scope)
{
    if (strcmp(key, "queue_name") == 0) {
        set_scoped(&d->queue_name, import_scope, val);
    } else if (strcmp(key, "enqueue_op_name") == 0) {
        char **no = realloc(d->op_names, (d->n_ops + 1) * sizeof(*no));
        if (no) {
            d->op_names = no;
            d->op_names[d->n_ops++] = scoped(import_scope, val);
        }
    } else if (strcmp(key, "close_op_name") == 0) {
        set_scoped(&d->close_name, import_scope, val);
    } else if (strcmp(key, "cancel_op_name") == 0) {
        set_scoped(&d->cancel_name, import_scope, val);
    } else if (strcmp(key, "queue_closed_exception_types") == 0) {
        int code = atoi(val);
        if (!qf_code_is_valid(code) || code == QF_OK || d->n_codes == QF_CODE_COUNT)
            return qf_set_error(QF_INVALID_ARGUMENT, "Bad queue_closed_exception_types %s", val);
        d->codes[d->n_codes++] = (qf_code)code;
    } else {
        return qf_set_error(QF_INVALID_ARGUMENT, "Unknown QueueRunner definition field '%s'", key);
    }
    return QF_OK;
}

/* The definition's text into d (which holds what was parsed, also on
 * failure). */
static qf_code parse_def(const char *text, const char *import_scope, runner_def *d)
{
    char *copy = strdup(text);
    qf_code rc = QF_OK;
    char *save = NULL;
    for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line && rc == QF_OK;
         line = strtok_r(NULL, "\n", &save)) {
        char *key, *val;
        if (!*line)
            continue;
        if (!parse_line(line, &key, &val))
            rc = qf_set_error(QF_INVALID_ARGUMENT, "Malformed QueueRunner definition line '%s'",
                              line);
        else
            rc = def_field(d, key, val, import_scope);
    }
    free(copy);
    if (rc == QF_OK && !d->queue_name)
        rc = qf_set_error(QF_INVALID_ARGUMENT, "QueueRunner definition has no queue_name");
    return rc;
}

/* The scope's queue of that name (the last registered). s->lock held. */
static qf_code resolve_queue(qf_scope *s, const char *queue_name, qf_queue **ret)
{
    qf_queue *q = NULL;
    for (size_t i = 0; i < s->n_queues; i++)
        if (strcmp(s->queues[i].name, queue_name) == 0)
            q = s->queues[i].q;
    if (!q)
        return qf_set_error(QF_NOT_FOUND,
                            "Queue '%s' of the QueueRunner definition is not "
                            "registered in the scope",
                            queue_name);
    *ret = q;
    return QF_OK;
}

/* The registered enqueue ops the definition names, into ops. s->lock held. */
static qf_code resolve_ops(qf_scope *s, const runner_def *d, qf_enqueue_op *ops)
{
    for (size_t i = 0; i < d->n_ops; i++) {
        const char *nm = d->op_names[i];
        bool found = false;
        for (size_t j = 0; j < s->n_ops && !found; j++)
            if (nm && strcmp(s->ops[j].name, nm) == 0) {
                ops[i] = s->ops[j].op;
                found = true;
            }
        if (!found)
            return qf_set_error(QF_NOT_FOUND, "Enqueue op '%s' is not registered in the scope",
                                nm ? nm : "");
    }
    return QF_OK;
}

/* The close (k == 0) or cancel (k == 1) op named nm into o: nothing for
 * none or the queue's default name `def`, else a registered action.
 * s->lock held. */
static qf_code resolve_action(qf_scope *s, int k, const char *nm, const char *def,
                              qf_queue_runner_options *o)
{
    if (!nm || (def && strcmp(nm, def) == 0))
        return QF_OK;
    for (size_t j = 0; j < s->n_actions; j++) {
        const named_action *a = &s->actions[j];
        if (strcmp(a->name, nm) != 0)
            continue;
        if (k == 0) {
            o->close_op = a->fn;
            o->close_arg = a->arg;
            o->close_op_name = nm;
        } else {
            o->cancel_op = a->fn;
            o->cancel_arg = a->arg;
            o->cancel_op_name = nm;
        }
        return QF_OK;
    }
    return qf_set_error(QF_NOT_FOUND, "%s op '%s' is not registered in the scope",
                        k == 0 ? "Close" : "Cancel", nm);
}

/* Close/cancel ops: the queue's defaults by their default names, or
 * registered actions. s->lock held. */
static qf_code resolve_actions(qf_scope *s, const runner_def *d, qf_queue *q,
                               qf_queue_runner_options *o)
{
    char *def_close = scoped(qf_queue_name(q), "_Close");
    char *def_cancel = scoped(qf_queue_name(q), "_Close_1");
    qf_code rc = resolve_action(s, 0, d->close_name, def_close, o);
    if (rc == QF_OK)
        rc = resolve_action(s, 1, d->cancel_name, def_cancel, o);
    free(def_close);
    free(def_cancel);
    return rc;
}

/* What the definition names, looked up in the scope: the queue (a
 * reference in *ret_q), the ops and the close/cancel actions. */
static qf_code resolve_def(qf_scope *s, const runner_def *d, qf_enqueue_op *ops,
                           qf_queue_runner_options *o, qf_queue **ret_q)
{
    qf_queue *q = NULL;
    qf__lock(&s->lock);
    qf_code rc = resolve_queue(s, d->queue_name, &q);
    if (rc == QF_OK)
        rc = resolve_ops(s, d, ops);
    if (rc == QF_OK)
        rc = resolve_actions(s, d, q, o);
    if (rc == QF_OK)
        *ret_q = qf_queue_ref(q);
    qf__unlock(&s->lock);
    return rc;
}

qf_code qf_queue_runner_from_def(qf_scope *s, const char *text, const char *import_scope,
                                 qf_queue_runner **ret)
{
    if (!s || !text || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL argument to qf_queue_runner_from_def");
    runner_def d;
    memset(&d, 0, sizeof(d));
    qf_code rc = parse_def(text, import_scope, &d);
    qf_enqueue_op *ops = calloc(d.n_ops ? d.n_ops : 1, sizeof(*ops));
    if (!ops && rc == QF_OK)
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory reading a QueueRunnerDef");
    qf_queue_runner_options o = {0};
    qf_queue *q = NULL;
    if (rc == QF_OK)
        rc = resolve_def(s, &d, ops, &o, &q);
    if (rc == QF_OK) {
        o.closed_codes = d.n_codes ? d.codes : NULL;
        o.n_closed_codes = d.n_codes; /* empty: {OUT_OF_RANGE} (spec 146) */
        rc = qf_queue_runner_new(q, ops, d.n_ops, &o, ret);
        qf_queue_unref(q);
    }
    free(ops);
    runner_def_free(&d);
    return rc;
}
