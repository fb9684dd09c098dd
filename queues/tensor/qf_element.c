/* qf_element.c - elements: tuples of tensor references with optional names.
 *
 * The component slots live in the same allocation as the element. Names,
 * when set, are one allocation too: the pointer array followed by the
 * strings, so replacing or clearing them is a single free.
 */
#include "qf_tensor.h"

#include <assert.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "qf_blockcache-impl.h"
#include "qf_tensor-impl.h"
#include "qf_status-impl.h"

#define MAX_COMPONENTS QF__MAX_COMPONENTS

/* Largest key + value kept in one home block. A tensor taken out of such an
 * element keeps the whole block alive, so big values get blocks of their
 * own rather than pinning each other. */
#define HOME_MAX_BYTES 4096

/* An element of n components whose slots the caller fills. */
static qf_element *element_alloc(size_t n)
{
    if (n == 0 || n > MAX_COMPONENTS) {
        qf_set_error(QF_INVALID_ARGUMENT, "An element needs 1 to %d components, got %zu",
                     MAX_COMPONENTS, n);
        return NULL;
    }
    uint8_t cls;
    qf_element *e = qf__block_alloc(sizeof(qf_element) + n * sizeof(qf_tensor *), &cls);
    if (!e) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating an element of %zu components", n);
        return NULL;
    }
    e->n = n;
    e->names = NULL;
    e->home = NULL;
    e->block_class = cls;
    return e;
}

qf_element *qf_element_new(size_t n)
{
    qf_element *e = element_alloc(n);
    if (e)
        memset(e->comps, 0, n * sizeof(e->comps[0]));
    return e;
}

qf_element *qf_element_of(size_t n, qf_tensor *const *tensors)
{
    if (n > 0 && !tensors) {
        qf_set_error(QF_INVALID_ARGUMENT, "tensors is NULL");
        return NULL;
    }
    qf_element *e = element_alloc(n);
    if (!e) {
        for (size_t i = 0; i < n; i++)
            qf_tensor_unref(tensors[i]);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        e->comps[i] = tensors[i];
    return e;
}

void qf_element_free(qf_element *e)
{
    if (!e)
        return;
    if (e->names)
        free(e->names);
    if (!e->home) {
        for (size_t i = 0; i < e->n; i++)
            qf_tensor_unref(e->comps[i]);
        qf__block_free(e, e->block_class);
        return;
    }
    /* A record's element: it and the tensors that are still only its own
     * go with one release of their block (one atomic instead of three). */
    uint32_t k = 1;
    for (size_t i = 0; i < e->n; i++) {
        if (e->comps[i] && qf__tensor_dies_with_home(e->comps[i], e->home))
            k++;
        else
            qf_tensor_unref(e->comps[i]);
    }
    qf__home_release_n(e->home, k);
}

void qf__element_free_plain(qf_element *e)
{
    if (e->names || e->home) {
        qf_element_free(e);
        return;
    }
    /* The usual producer's element: its own tensors, made for this put.
     * A numeric or bool tensor owns nothing but its block, so the last
     * reference (an acquire load, as in qf_tensor_unref()) frees the block
     * with no dispatch on its dtype. */
    for (size_t i = 0; i < e->n; i++) {
        qf_tensor *t = e->comps[i];
        /* A string, pointer or sparse tensor owns more than its block. */
        assert(!t || (t->dtype != QF_STRING && t->dtype != QF_PTR && t->dtype != QF_SPARSE));
        if (t && !t->home && atomic_load_explicit(&t->refs, memory_order_acquire) == 1)
            qf__tensor_free_block(t);
        else
            qf_tensor_unref(t);
    }
    qf__block_free(e, e->block_class);
}

static size_t round_up(size_t n)
{
    size_t a = alignof(max_align_t);
    return (n + a - 1) / a * a;
}

qf_element *qf__element_of_two_strings(const char *s0, size_t len0, const char *s1, size_t len1)
{
    if (len0 > HOME_MAX_BYTES || len1 > HOME_MAX_BYTES - len0) {
        qf_tensor *ts[2] = {qf_tensor_new_string(s0, len0), qf_tensor_new_string(s1, len1)};
        if (!ts[0] || !ts[1]) {
            qf_tensor_unref(ts[0]);
            qf_tensor_unref(ts[1]);
            return NULL;
        }
        return qf_element_of(2, ts); /* takes both references */
    }
    /* [home][element + 2 slots][tensor 0][tensor 1], each aligned. */
    size_t off_e = round_up(sizeof(qf__home));
    size_t off_t0 = off_e + round_up(sizeof(qf_element) + 2 * sizeof(qf_tensor *));
    size_t off_t1 = off_t0 + qf__string_scalar_size(len0);
    size_t total = off_t1 + qf__string_scalar_size(len1);
    char *mem = malloc(total);
    if (!mem) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating an element of %zu bytes", total);
        return NULL;
    }
    qf__home *h = (qf__home *)mem;
    atomic_init(&h->live, 3); /* the element and its two tensors */
    h->block_class = 0;       /* malloc()'s */
    qf_element *e = (qf_element *)(mem + off_e);
    e->n = 2;
    e->names = NULL;
    e->home = h;
    e->comps[0] = qf__string_scalar_place(mem + off_t0, s0, len0, h);
    e->comps[1] = qf__string_scalar_place(mem + off_t1, s1, len1, h);
    return e;
}

size_t qf__dense_layout(size_t n, qf__dense_comp *comps)
{
    size_t off =
        round_up(sizeof(qf__home)) + round_up(sizeof(qf_element) + n * sizeof(qf_tensor *));
    for (size_t c = 0; c < n; c++) {
        comps[c].home_off = off;
        off += round_up(sizeof(qf_tensor) + comps[c].nbytes);
    }
    return off;
}

qf_element *qf__element_of_dense(size_t n, const qf__dense_comp *comps, size_t home_bytes,
                                 const void *values)
{
    uint8_t cls;
    char *mem = qf__block_alloc(home_bytes, &cls);
    if (!mem) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating an element of %zu bytes",
                     home_bytes);
        return NULL;
    }
    qf__home *h = (qf__home *)mem;
    atomic_init(&h->live, (uint32_t)n + 1);
    h->block_class = cls;
    qf_element *e = (qf_element *)(mem + round_up(sizeof(qf__home)));
    e->n = n;
    e->names = NULL;
    e->home = h;
    e->block_class = 0;
    for (size_t c = 0; c < n; c++) {
        const qf__dense_comp *dc = &comps[c];
        qf_tensor *t = (qf_tensor *)(mem + dc->home_off);
        atomic_init(&t->refs, 1);
        t->dtype = dc->dtype;
        t->dtor = NULL;
        t->n = dc->n;
        t->nbytes = dc->nbytes;
        t->home = h;
        t->held = NULL;
        t->all_borrowed = false;
        t->block_class = 0;
        t->arena_cap = 0;
        t->arena_used = 0;
        t->shape = dc->shape;
        if (values)
            memcpy(t->buf, (const char *)values + dc->off, dc->nbytes);
        e->comps[c] = t;
    }
    return e;
}

qf_element *qf__element_of_one_dense(qf_dtype dt, const qf_shape *sh, int64_t n, size_t nbytes)
{
    qf__dense_comp dc = {.dtype = dt, .n = n, .nbytes = nbytes, .off = 0, .shape = *sh};
    return qf__element_of_dense(1, &dc, qf__dense_layout(1, &dc), NULL);
}

/* The accessors' answer to a NULL element (static message: cheap). */
static bool null_element(const qf_element *e, const char *msg)
{
    if (e)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

size_t qf_element_size(const qf_element *e)
{
    return null_element(e, "qf_element_size: Element (e) is NULL") ? 0 : e->n;
}

static qf_code check_index(const qf_element *e, size_t i)
{
    if (!e)
        return qf_set_error(QF_INVALID_ARGUMENT, "Element is NULL");
    if (i >= e->n)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Component index %zu out of range for an element of %zu components", i,
                            e->n);
    return QF_OK;
}

qf_code qf_element_set(qf_element *e, size_t i, qf_tensor *t)
{
    qf_code rc = check_index(e, i);
    if (rc != QF_OK) {
        qf_tensor_unref(t);
        return rc;
    }
    qf_tensor *old = e->comps[i];
    e->comps[i] = t;
    qf_tensor_unref(old);
    return QF_OK;
}

qf_tensor *qf_element_get(const qf_element *e, size_t i)
{
    return check_index(e, i) == QF_OK ? e->comps[i] : NULL;
}

qf_tensor *qf_element_take(qf_element *e, size_t i)
{
    if (check_index(e, i) != QF_OK)
        return NULL;
    qf_tensor *t = e->comps[i];
    e->comps[i] = NULL;
    return t;
}

qf_code qf_element_set_names(qf_element *e, const char *const *names)
{
    if (!e)
        return qf_set_error(QF_INVALID_ARGUMENT, "Element is NULL");
    if (!names) {
        free(e->names);
        e->names = NULL;
        return QF_OK;
    }
    /* Validate everything before touching e, so a failure leaves the old
     * names in place. Elements are small; the quadratic check is cheap. */
    size_t bytes = e->n * sizeof(char *);
    for (size_t i = 0; i < e->n; i++) {
        if (!names[i] || !names[i][0])
            return qf_set_error(QF_INVALID_ARGUMENT, "Name of component %zu is empty", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "Duplicate name '%s' for components %zu and %zu", names[i], j,
                                    i);
        size_t len = strlen(names[i]) + 1;
        if (__builtin_add_overflow(bytes, len, &bytes))
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "Element names are too long");
    }
    char **copy = malloc(bytes);
    if (!copy)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when copying %zu element names", e->n);
    char *p = (char *)(copy + e->n);
    for (size_t i = 0; i < e->n; i++) {
        size_t len = strlen(names[i]) + 1;
        memcpy(p, names[i], len);
        copy[i] = p;
        p += len;
    }
    free(e->names);
    e->names = copy;
    return QF_OK;
}

bool qf_element_has_names(const qf_element *e)
{
    return !null_element(e, "qf_element_has_names: Element (e) is NULL") && e->names;
}

const char *qf_element_name(const qf_element *e, size_t i)
{
    if (null_element(e, "qf_element_name: Element (e) is NULL") || !e->names || i >= e->n)
        return NULL;
    return e->names[i];
}

qf_tensor *qf_element_get_by_name(const qf_element *e, const char *name)
{
    if (null_element(e, "qf_element_get_by_name: Element (e) is NULL"))
        return NULL;
    if (!name) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_element_get_by_name: name is NULL");
        return NULL;
    }
    if (!e->names)
        return NULL;
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->names[i], name) == 0)
            return e->comps[i];
    return NULL;
}
