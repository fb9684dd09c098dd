/* qf_deferred.c - deferred tensors (computed once, on first use) and
 * match_filenames_once.
 *
 * A deferred tensor is a small once-cell: a mutex, a "done" flag, and the
 * outcome (a tensor or a status). The first qf_deferred_value() call runs
 * fn under the mutex, so concurrent first calls wait for that one result
 * instead of computing their own; `done` is read under the mutex too, since
 * the cell is consulted once per producer, not per element.
 *
 * match_filenames_once is glob(3) per pattern with GLOB_PERIOD (TensorFlow
 * matches with fnmatch without FNM_PERIOD, so '*' matches a leading dot),
 * minus the "." and ".." entries GLOB_PERIOD lets a wildcard produce
 * (TensorFlow lists directories without them), then one sort of everything
 * by bytes (TensorFlow's MatchingFiles sorts its whole output).
 */
#include "qf_deferred.h"
#include "qf_status-impl.h"

#include <glob.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHAPE_TXT 160
#define NAME_MAX_TXT 200

struct qf_deferred {
    _Atomic uint32_t refs;
    qf_dtype dtype;
    qf_shape shape;
    qf_deferred_fn fn;
    void *arg;
    void (*free_arg)(void *);
    char *name;
    pthread_mutex_t mu;
    bool done;          /* under mu */
    qf_tensor *value;   /* under mu; set once */
    qf_status *failure; /* under mu; set once */
};

qf_code qf_deferred_new(qf_dtype dt, const qf_shape *static_shape, qf_deferred_fn fn, void *arg,
                        void (*free_arg)(void *), const char *name, qf_deferred **ret)
{
    qf_code rc = QF_OK;
    if (!fn || !ret)
        rc = qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", fn ? "ret" : "deferred function");
    else if (!qf_dtype_is_valid(dt))
        rc = qf_set_error(QF_INVALID_ARGUMENT, "deferred tensor: invalid dtype %d", (int)dt);
    else if (static_shape && !qf_shape_is_valid(static_shape))
        rc = qf_set_error(QF_INVALID_ARGUMENT, "deferred tensor: invalid static shape");
    qf_deferred *d = rc == QF_OK ? calloc(1, sizeof(*d)) : NULL;
    if (rc == QF_OK && (!d || !(d->name = strdup(name ? name : "deferred")))) {
        free(d);
        d = NULL;
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory making a deferred tensor");
    }
    if (rc != QF_OK) {
        if (free_arg)
            free_arg(arg);
        return rc;
    }
    atomic_init(&d->refs, 1);
    d->dtype = dt;
    d->shape = static_shape ? *static_shape : qf_shape_unknown();
    d->fn = fn;
    d->arg = arg;
    d->free_arg = free_arg;
    pthread_mutex_init(&d->mu, NULL);
    *ret = d;
    return QF_OK;
}

qf_deferred *qf_deferred_ref(qf_deferred *d)
{
    if (d)
        atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}

void qf_deferred_unref(qf_deferred *d)
{
    /* acq_rel: the last owner sees every other owner's use (the value was
     * published under the mutex, which they took). */
    if (!d || atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1)
        return;
    qf_tensor_unref(d->value);
    qf_status_free(d->failure);
    if (d->free_arg)
        d->free_arg(d->arg);
    pthread_mutex_destroy(&d->mu);
    free(d->name);
    free(d);
}

/* The accessors' answer to a NULL deferred tensor: a neutral value, the
 * error recorded (static message). */
static bool null_deferred(const qf_deferred *d, const char *msg)
{
    if (d)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

qf_dtype qf_deferred_dtype(const qf_deferred *d)
{
    return null_deferred(d, "qf_deferred_dtype: deferred tensor (d) is NULL") ? QF_DT_INVALID
                                                                              : d->dtype;
}

const qf_shape *qf_deferred_static_shape(const qf_deferred *d)
{
    return null_deferred(d, "qf_deferred_static_shape: deferred tensor (d) is NULL") ? NULL
                                                                                     : &d->shape;
}

const char *qf_deferred_name(const qf_deferred *d)
{
    return null_deferred(d, "qf_deferred_name: deferred tensor (d) is NULL") ? NULL : d->name;
}

/* Run fn and check what it gave against the declaration. */
static qf_code compute(qf_deferred *d, qf_tensor **ret)
{
    qf_tensor *t = NULL;
    qf_code rc = d->fn(d->arg, &t);
    if (rc != QF_OK) {
        qf_tensor_unref(t);
        return rc;
    }
    if (!t)
        return qf_set_error(QF_INVALID_ARGUMENT, "deferred '%s' evaluated to nothing", d->name);
    if (qf_tensor_dtype(t) != d->dtype || !qf_shape_compatible(qf_tensor_shape(t), &d->shape)) {
        char a[SHAPE_TXT], b[SHAPE_TXT];
        rc = qf_set_error(QF_INVALID_ARGUMENT, "deferred '%s' evaluated to %s %s, declared %s %s",
                          d->name, qf_dtype_name(qf_tensor_dtype(t)),
                          qf_shape_format(qf_tensor_shape(t), a, sizeof(a)),
                          qf_dtype_name(d->dtype), qf_shape_format(&d->shape, b, sizeof(b)));
        qf_tensor_unref(t);
        return rc;
    }
    *ret = t;
    return QF_OK;
}

qf_code qf_deferred_value(qf_deferred *d, qf_tensor **ret_t)
{
    if (!d || !ret_t)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", d ? "ret_t" : "deferred tensor");
    pthread_mutex_lock(&d->mu);
    if (!d->done) {
        qf_tensor *t = NULL;
        qf_code c = compute(d, &t);
        if (c == QF_OK)
            d->value = t;
        else if (qf_last_code() == c)      /* fn said why */
            d->failure = qf_last_status(); /* NULL only when out of memory */
        else
            d->failure = qf_status_new(c, "deferred '%s' failed (%s)", d->name, qf_code_name(c));
        d->done = true;
    }
    qf_code rc = QF_OK;
    if (d->value)
        *ret_t = qf_tensor_ref(d->value);
    else if (d->failure)
        rc = qf_set_error(qf_status_code(d->failure), "%s", qf_status_message(d->failure));
    else
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "deferred '%s' failed (out of memory)", d->name);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* ------------------------------------------------- match_filenames_once */

typedef struct matcher {
    size_t n;
    char **patterns;
} matcher;

static void matcher_free(void *arg)
{
    matcher *m = arg;
    for (size_t i = 0; m && i < m->n; i++)
        free(m->patterns[i]);
    if (m)
        free(m->patterns);
    free(m);
}

/* Is `c` (len bytes) "." or ".."? */
static bool is_dot_entry(const char *c, size_t len)
{
    return (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.');
}

/* False when `path` has a "." or ".." component where the pattern has
 * something else there (a wildcard produced it). Paths whose components do
 * not line up with the pattern's are kept. */
static bool wanted(const char *pattern, const char *path)
{
    const char *p = pattern, *q = path;
    for (;;) {
        size_t pl = strcspn(p, "/"), ql = strcspn(q, "/");
        if (is_dot_entry(q, ql) && (pl != ql || memcmp(p, q, ql) != 0))
            return false;
        if (!p[pl] || !q[ql])
            return true;
        p += pl + 1;
        q += ql + 1;
    }
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static qf_code match_files(void *arg, qf_tensor **ret_t)
{
    matcher *m = arg;
    glob_t *g = calloc(m->n, sizeof(*g));
    if (!g)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory matching files");
    qf_code rc = QF_OK;
    size_t total = 0, done = 0;
    for (; done < m->n && rc == QF_OK; done++) {
        int r = glob(m->patterns[done], GLOB_PERIOD | GLOB_NOSORT, NULL, &g[done]);
        if (r == GLOB_NOMATCH) {
            g[done].gl_pathc = 0; /* nothing matched: not an error */
        } else if (r != 0) {
            rc = qf_set_error(r == GLOB_NOSPACE ? QF_RESOURCE_EXHAUSTED : QF_UNKNOWN,
                              "matching '%s' failed (glob error %d)", m->patterns[done], r);
        }
        total += g[done].gl_pathc;
    }
    char **names = rc == QF_OK ? malloc((total ? total : 1) * sizeof(*names)) : NULL;
    if (rc == QF_OK && !names)
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory matching files");
    size_t k = 0;
    for (size_t i = 0; rc == QF_OK && i < m->n; i++)
        for (size_t j = 0; j < g[i].gl_pathc; j++)
            if (wanted(m->patterns[i], g[i].gl_pathv[j]))
                names[k++] = g[i].gl_pathv[j];
    qf_tensor *t = NULL;
    if (rc == QF_OK) {
        qsort(names, k, sizeof(*names), cmp_names);
        qf_shape sh = qf_shape_make(1, (const int64_t[]){(int64_t)k});
        t = qf_tensor_new(QF_STRING, &sh);
        rc = t ? QF_OK : qf_last_code();
        for (size_t i = 0; rc == QF_OK && i < k; i++)
            rc = qf_tensor_set_string(t, (int64_t)i, names[i], strlen(names[i]));
    }
    for (size_t i = 0; i < done; i++)
        globfree(&g[i]);
    free(g);
    free(names);
    if (rc != QF_OK) {
        qf_tensor_unref(t);
        return rc;
    }
    *ret_t = t;
    return QF_OK;
}

qf_code qf_match_filenames_once(const char *const *patterns, size_t n, const char *name,
                                qf_deferred **ret)
{
    if (!patterns || n == 0 || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "match_filenames_once needs %s",
                            ret ? "at least one pattern" : "ret");
    for (size_t i = 0; i < n; i++)
        if (!patterns[i])
            return qf_set_error(QF_INVALID_ARGUMENT, "match_filenames_once: pattern %zu is NULL",
                                i);
    matcher *m = calloc(1, sizeof(*m));
    if (m)
        m->patterns = calloc(n, sizeof(*m->patterns));
    bool ok = m && m->patterns;
    for (size_t i = 0; ok && i < n; i++, m->n++)
        ok = (m->patterns[i] = strdup(patterns[i])) != NULL;
    if (!ok) {
        matcher_free(m);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory in match_filenames_once");
    }
    /* The default name quotes the first pattern (and says if there are more). */
    char dflt[NAME_MAX_TXT];
    if (!name) {
        snprintf(dflt, sizeof(dflt), "match_filenames_once('%.120s'%s)", patterns[0],
                 n > 1 ? ", ..." : "");
        name = dflt;
    }
    qf_shape sh = qf_shape_make(1, (const int64_t[]){QF_UNKNOWN_DIM});
    return qf_deferred_new(QF_STRING, &sh, match_files, m, matcher_free, name, ret);
}
