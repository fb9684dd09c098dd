/* qf_nats_codec.c - elements to and from message payloads (format in
 * qf_nats.h, version 1).
 *
 * The decoder trusts nothing: every count is checked against the bytes
 * that are left before anything is allocated (a shape claiming 2^40
 * floats in a 30-byte payload is refused, not allocated), booleans must
 * be 0 or 1 (anything else would be undefined behaviour when read as a
 * C bool), names must be distinct, non-empty and free of NUL, and the
 * payload must end exactly where the last component does.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_nats.h"

#define MAX_COMPONENTS 4096
#define MAX_NAME 1024
#define HEADER 8
#define FLAG_NAMES 1u

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

/* Bytes per scalar that byte order applies to (complex: each half). */
static size_t scalar_width(qf_dtype dt)
{
    size_t sz = qf_dtype_size(dt);
    return dt == QF_COMPLEX64 || dt == QF_COMPLEX128 ? sz / 2 : sz;
}

/* Copy n bytes of little-endian scalars of `w` bytes (to or from host order). */
static void copy_le(void *dst, const void *src, size_t n, size_t w)
{
    if (!HOST_BIG_ENDIAN || w <= 1) {
        memcpy(dst, src, n);
        return;
    }
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i + w <= n; i += w)
        for (size_t k = 0; k < w; k++)
            d[i + k] = s[i + w - 1 - k];
}

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* QF_PTR and QF_SPARSE tensors hold pointers (to the user's objects, to
 * sparse tensors): sent, they would mean nothing in the receiver, and
 * received, they would be dereferenced there. */
static bool encodable(qf_dtype dt)
{
    return qf_dtype_is_valid(dt) && dt != QF_PTR && dt != QF_SPARSE;
}

/* ------------------------------------------------------------------ encode */

qf_code qf_nats_encoded_size(const qf_element *e, size_t *ret_len)
{
    if (!e || !ret_len)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_encoded_size: %s is NULL",
                            e ? "ret_len" : "e");
    size_t nc = qf_element_size(e);
    if (nc == 0 || nc > MAX_COMPONENTS)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_encode: %zu components (1 to %d)", nc,
                            MAX_COMPONENTS);
    bool names = qf_element_has_names(e);
    size_t total = HEADER;
    for (size_t i = 0; i < nc; i++) {
        const qf_tensor *t = qf_element_get(e, i);
        if (!t)
            return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_encode: component %zu is missing", i);
        qf_dtype dt = qf_tensor_dtype(t);
        if (!encodable(dt))
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "qf_nats_encode: component %zu is %s, which cannot be sent (a "
                                "pointer means nothing in another process)",
                                i, qf_dtype_name(dt));
        if (names) {
            size_t nl = strlen(qf_element_name(e, i));
            if (nl == 0 || nl > MAX_NAME)
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "qf_nats_encode: component %zu's name has %zu bytes (1 to "
                                    "%d)",
                                    i, nl, MAX_NAME);
            total += 2 + nl;
        }
        const qf_shape *sh = qf_tensor_shape(t);
        total += 2 + 8 * (size_t)sh->rank;
        int64_t n = qf_tensor_num_elements(t);
        if (dt == QF_STRING) {
            for (int64_t k = 0; k < n; k++) {
                size_t len = 0;
                qf_tensor_string(t, k, &len);
                if (len > UINT32_MAX)
                    return qf_set_error(QF_INVALID_ARGUMENT,
                                        "qf_nats_encode: string %lld of component %zu has %zu "
                                        "bytes (at most 4 GiB - 1)",
                                        (long long)k, i, len);
                total += 4 + len;
            }
        } else {
            total += (size_t)n * qf_dtype_size(dt);
        }
    }
    *ret_len = total;
    return QF_OK;
}

qf_code qf_nats_encode(const qf_element *e, void *buf, size_t cap, size_t *ret_len)
{
    size_t need;
    qf_code rc = qf_nats_encoded_size(e, &need);
    if (rc != QF_OK)
        return rc;
    if (!buf || !ret_len)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_encode: %s is NULL",
                            buf ? "ret_len" : "buf");
    if (cap < need)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_nats_encode: a buffer of %zu bytes is too small: the element "
                            "needs %zu bytes",
                            cap, need);
    unsigned char *p = buf;
    size_t nc = qf_element_size(e);
    bool names = qf_element_has_names(e);
    p[0] = 'Q';
    p[1] = 'F';
    p[2] = 'E';
    p[3] = QF_NATS_CODEC_VERSION;
    p[4] = names ? FLAG_NAMES : 0;
    p[5] = 0;
    put_u16(p + 6, (uint16_t)nc);
    size_t off = HEADER;
    for (size_t i = 0; i < nc; i++) {
        const qf_tensor *t = qf_element_get(e, i);
        qf_dtype dt = qf_tensor_dtype(t);
        if (names) {
            const char *name = qf_element_name(e, i);
            size_t nl = strlen(name);
            put_u16(p + off, (uint16_t)nl);
            memcpy(p + off + 2, name, nl);
            off += 2 + nl;
        }
        const qf_shape *sh = qf_tensor_shape(t);
        p[off] = (unsigned char)dt;
        p[off + 1] = (unsigned char)sh->rank;
        off += 2;
        for (int k = 0; k < sh->rank; k++, off += 8)
            put_u64(p + off, (uint64_t)sh->dims[k]);
        int64_t n = qf_tensor_num_elements(t);
        if (dt == QF_STRING) {
            for (int64_t k = 0; k < n; k++) {
                size_t len = 0;
                const char *s = qf_tensor_string(t, k, &len);
                put_u32(p + off, (uint32_t)len);
                if (len)
                    memcpy(p + off + 4, s, len);
                off += 4 + len;
            }
        } else {
            size_t bytes = (size_t)n * qf_dtype_size(dt);
            if (bytes)
                copy_le(p + off, qf_tensor_cdata(t), bytes, scalar_width(dt));
            off += bytes;
        }
    }
    *ret_len = off;
    return QF_OK;
}

/* ------------------------------------------------------------------ decode */

typedef struct rd {
    const unsigned char *p;
    size_t len, off;
} rd;

static qf_code loss(const rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static qf_code loss(const rd *r, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return qf_set_error(QF_DATA_LOSS, "NATS payload of %zu bytes: %s at byte %zu", r->len, what,
                        r->off);
}

static bool have(const rd *r, size_t n)
{
    return r->len - r->off >= n;
}

static qf_code decode_component(rd *r, size_t i, qf_tensor **ret)
{
    if (!have(r, 2))
        return loss(r, "component %zu: its dtype and rank are missing", i);
    qf_dtype dt = (qf_dtype)r->p[r->off];
    int rank = r->p[r->off + 1];
    if (!encodable(dt))
        return loss(r, "component %zu: dtype %d is not one that can be sent", i, (int)dt);
    if (rank > QF_MAX_RANK)
        return loss(r, "component %zu: rank %d (at most %d)", i, rank, QF_MAX_RANK);
    r->off += 2;
    if (!have(r, 8 * (size_t)rank))
        return loss(r, "component %zu: %d dimensions need %d bytes", i, rank, 8 * rank);
    int64_t dims[QF_MAX_RANK];
    uint64_t n = 1;
    for (int k = 0; k < rank; k++) {
        uint64_t d = get_u(r->p + r->off + 8 * (size_t)k, 8);
        if (d > (uint64_t)INT64_MAX)
            return loss(r, "component %zu: dimension %d is negative", i, k);
        dims[k] = (int64_t)d;
        if (d && n > UINT64_MAX / d)
            n = UINT64_MAX; /* too many for any payload: refused below */
        else
            n *= d;
    }
    r->off += 8 * (size_t)rank;
    size_t left = r->len - r->off;
    size_t esz = qf_dtype_size(dt);
    if (dt == QF_STRING ? n > left / 4 : n > left / esz)
        return loss(r, "component %zu: %llu values cannot fit in the %zu bytes left", i,
                    (unsigned long long)n, left);
    qf_shape sh = qf_shape_make(rank, dims);
    qf_tensor *t = qf_tensor_new(dt, &sh);
    if (!t)
        return qf_last_code() == QF_RESOURCE_EXHAUSTED
                   ? qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_decode: out of memory")
                   : loss(r, "component %zu: shape refused", i);
    if (dt == QF_STRING) {
        for (uint64_t k = 0; k < n; k++) {
            if (!have(r, 4)) {
                qf_tensor_unref(t);
                return loss(r, "component %zu: string %llu's length is missing", i,
                            (unsigned long long)k);
            }
            size_t len = (size_t)get_u(r->p + r->off, 4);
            r->off += 4;
            if (!have(r, len)) {
                qf_tensor_unref(t);
                return loss(r, "component %zu: string %llu claims %zu bytes", i,
                            (unsigned long long)k, len);
            }
            if (qf_tensor_set_string(t, (int64_t)k, (const char *)r->p + r->off, len) != QF_OK) {
                qf_tensor_unref(t);
                return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_decode: out of memory");
            }
            r->off += len;
        }
    } else {
        size_t bytes = (size_t)n * esz;
        if (dt == QF_BOOL)
            for (size_t k = 0; k < bytes; k++)
                if (r->p[r->off + k] > 1) {
                    qf_tensor_unref(t);
                    r->off += k;
                    return loss(r, "component %zu: a bool holds %u", i, r->p[r->off]);
                }
        if (bytes)
            copy_le(qf_tensor_data(t), r->p + r->off, bytes, scalar_width(dt));
        r->off += bytes;
    }
    *ret = t;
    return QF_OK;
}

qf_code qf_nats_decode(const void *buf, size_t len, qf_element **ret_elem)
{
    if ((!buf && len) || !ret_elem)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_nats_decode: %s is NULL",
                            ret_elem ? "buf" : "ret_elem");
    rd r = {.p = buf, .len = len, .off = 0};
    if (!have(&r, HEADER) || memcmp(r.p, "QFE", 3) != 0)
        return loss(&r, "not a qflow element (no \"QFE\" header)");
    if (r.p[3] != QF_NATS_CODEC_VERSION)
        return loss(&r, "format version %u (this build reads version %d)", r.p[3],
                    QF_NATS_CODEC_VERSION);
    unsigned flags = r.p[4];
    if ((flags & ~FLAG_NAMES) || r.p[5] != 0)
        return loss(&r, "unknown flags 0x%02x%02x", r.p[5], flags);
    size_t nc = (size_t)get_u(r.p + 6, 2);
    if (nc == 0 || nc > MAX_COMPONENTS)
        return loss(&r, "%zu components (1 to %d)", nc, MAX_COMPONENTS);
    r.off = HEADER;
    qf_element *e = qf_element_new(nc);
    char **names = flags & FLAG_NAMES ? calloc(nc, sizeof(*names)) : NULL;
    if (!e || ((flags & FLAG_NAMES) && !names)) {
        qf_element_free(e);
        free(names);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_decode: out of memory");
    }
    qf_code rc = QF_OK;
    for (size_t i = 0; i < nc && rc == QF_OK; i++) {
        if (names) {
            if (!have(&r, 2)) {
                rc = loss(&r, "component %zu: its name is missing", i);
                break;
            }
            size_t nl = (size_t)get_u(r.p + r.off, 2);
            r.off += 2;
            if (nl == 0 || nl > MAX_NAME || !have(&r, nl) || memchr(r.p + r.off, 0, nl)) {
                rc = loss(&r,
                          "component %zu: a name of %zu bytes (1 to %d, no NUL, within "
                          "the payload)",
                          i, nl, MAX_NAME);
                break;
            }
            if (!(names[i] = strndup((const char *)r.p + r.off, nl))) {
                rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_nats_decode: out of memory");
                break;
            }
            r.off += nl;
        }
        qf_tensor *t = NULL;
        if ((rc = decode_component(&r, i, &t)) == QF_OK)
            qf_element_set(e, i, t);
    }
    if (rc == QF_OK && r.off != r.len)
        rc = loss(&r, "%zu bytes after the last component", r.len - r.off);
    if (rc == QF_OK && names && qf_element_set_names(e, (const char *const *)names) != QF_OK)
        rc = loss(&r, "component names are not distinct");
    for (size_t i = 0; names && i < nc; i++)
        free(names[i]);
    free(names);
    if (rc != QF_OK) {
        qf_element_free(e);
        return rc;
    }
    *ret_elem = e;
    return QF_OK;
}
