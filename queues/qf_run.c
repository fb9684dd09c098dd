/* qf_run.c - runs of (key, value) rows (see qf_run-impl.h).
 *
 * Layout, one allocation aligned to QF__RUN_ALIGN:
 *   [qf__home: rows not consumed][header][row table][key prefix][bytes]
 * where each row's bytes are its key suffix followed by its value. The
 * counter is a qf__home so that releasing shares its code (and its TSan
 * handling) with the element blocks.
 */
#include "qf_run-impl.h"

#include <stdlib.h>
#include <string.h>

#include "qf_tensor-impl.h"

typedef struct run_row {
    uint32_t off;  /* of the suffix, from bytes */
    uint32_t slen; /* suffix length */
    uint32_t vlen; /* value length (the value follows the suffix) */
} run_row;

struct qf__run {
    qf__home home; /* first: qf__home_release_n() frees the allocation */
    uint32_t n;    /* rows set so far */
    uint32_t cap;
    uint32_t used; /* bytes used */
    uint32_t prefix_len;
    char *prefix;
    char *bytes;
    run_row rows[];
};

qf__run *qf__run_new(size_t rows, size_t bytes, const char *key_prefix, size_t prefix_len, int sep)
{
    size_t plen = prefix_len + (sep >= 0);
    if (rows == 0 || rows > QF__RUN_MAX || bytes > UINT32_MAX || plen > UINT32_MAX) {
        qf_set_error(QF_INVALID_ARGUMENT, "a run holds 1 to %d rows and under 4 GiB", QF__RUN_MAX);
        return NULL;
    }
    size_t head = sizeof(qf__run) + rows * sizeof(run_row);
    size_t total = head + plen + bytes;
    total = (total + QF__RUN_ALIGN - 1) / QF__RUN_ALIGN * QF__RUN_ALIGN;
    qf__run *r = aligned_alloc(QF__RUN_ALIGN, total);
    if (!r) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when allocating a run of %zu rows", rows);
        return NULL;
    }
    atomic_init(&r->home.live, (uint32_t)rows);
    r->n = 0;
    r->cap = (uint32_t)rows;
    r->used = 0;
    r->prefix_len = (uint32_t)plen;
    r->prefix = (char *)r + head;
    r->bytes = r->prefix + plen;
    if (prefix_len)
        memcpy(r->prefix, key_prefix, prefix_len);
    if (sep >= 0)
        r->prefix[prefix_len] = (char)sep;
    return r;
}

void qf__run_append(qf__run *r, const char *suffix, size_t suffix_len, const char *value,
                    size_t value_len)
{
    run_row *row = &r->rows[r->n++];
    row->off = r->used;
    row->slen = (uint32_t)suffix_len;
    row->vlen = (uint32_t)value_len;
    char *d = r->bytes + r->used;
    memcpy(d, suffix, suffix_len);
    memcpy(d + suffix_len, value, value_len);
    r->used += (uint32_t)(suffix_len + value_len);
}

void *qf__run_slot(const qf__run *r, size_t i)
{
    return (void *)((uintptr_t)r + 2 * i + 1);
}

void qf__run_discard(qf__run *r)
{
    free(r);
}

static qf__run *run_of(const void *slot, size_t *ret_i)
{
    uintptr_t v = (uintptr_t)slot;
    uintptr_t base = v & ~(uintptr_t)(QF__RUN_ALIGN - 1);
    *ret_i = (size_t)((v - base) >> 1);
    return (qf__run *)base;
}

void qf__row_string(const void *slot, size_t c, const char **s0, size_t *len0, const char **s1,
                    size_t *len1)
{
    size_t i;
    const qf__run *r = run_of(slot, &i);
    const run_row *row = &r->rows[i];
    const char *b = r->bytes + row->off;
    if (c == 0) {
        *s0 = r->prefix;
        *len0 = r->prefix_len;
        *s1 = b;
        *len1 = row->slen;
    } else {
        *s0 = b + row->slen;
        *len0 = row->vlen;
        *s1 = NULL;
        *len1 = 0;
    }
}

void qf__rows_release(void *const *slots, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t ri;
        qf__run *r = run_of(slots[i], &ri);
        uint32_t k = 1;
        while (i + k < n && run_of(slots[i + k], &ri) == r)
            k++;
        i += k;
        qf__home_release_n(&r->home, k);
    }
}

qf_element *qf__slot_element(void *slot)
{
    if (!qf__slot_is_row(slot))
        return slot;
    const char *k0, *k1, *v, *unused;
    size_t k0n, k1n, vn, unused_n;
    qf__row_string(slot, 0, &k0, &k0n, &k1, &k1n);
    qf__row_string(slot, 1, &v, &vn, &unused, &unused_n);
    /* The key is two parts; assemble it where it fits, else allocate. */
    char small[512];
    char *key = k0n + k1n <= sizeof(small) ? small : malloc(k0n + k1n);
    if (!key) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "OOM when making an element of a row");
        return NULL;
    }
    memcpy(key, k0, k0n);
    memcpy(key + k0n, k1, k1n);
    qf_element *e = qf__element_of_two_strings(key, k0n + k1n, v, vn);
    if (key != small)
        free(key);
    if (e)
        qf__rows_release(&slot, 1);
    return e;
}

void qf__slot_free(void *slot)
{
    qf__slots_free(&slot, 1);
}

void qf__slots_free(void *const *slots, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (!qf__slot_is_row(slots[i])) {
            qf_element_free(slots[i++]);
            continue;
        }
        size_t k = 1;
        while (i + k < n && qf__slot_is_row(slots[i + k]))
            k++;
        qf__rows_release(slots + i, k);
        i += k;
    }
}

bool qf__rows_string_bytes(void *const *slots, size_t n, size_t c, size_t *ret_bytes)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!qf__slot_is_row(slots[i]))
            return false;
        size_t ri;
        const qf__run *r = run_of(slots[i], &ri);
        const run_row *row = &r->rows[ri];
        size_t len = c == 0 ? r->prefix_len + row->slen : row->vlen;
        total += len ? len + 1 : 0; /* rows are < 4 GiB each: no overflow */
    }
    *ret_bytes = total;
    return true;
}

char *qf__rows_string_copy(void *const *slots, size_t n, size_t c, qf_string *dst, char *arena)
{
    for (size_t i = 0; i < n; i++) {
        size_t ri;
        const qf__run *r = run_of(slots[i], &ri);
        const run_row *row = &r->rows[ri];
        const char *b = r->bytes + row->off;
        size_t len;
        if (c == 0) {
            len = r->prefix_len + row->slen;
            memcpy(arena, r->prefix, r->prefix_len);
            memcpy(arena + r->prefix_len, b, row->slen);
        } else {
            len = row->vlen;
            memcpy(arena, b + row->slen, len);
        }
        if (len == 0) {
            dst[i] = (qf_string){0, NULL};
            continue;
        }
        dst[i] = (qf_string){len, arena};
        arena[len] = '\0';
        arena += len + 1;
    }
    return arena;
}
