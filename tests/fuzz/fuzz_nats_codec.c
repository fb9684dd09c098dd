/* fuzz_nats_codec.c - libFuzzer target: qf_nats_decode() on any bytes, as a
 * message payload arrives from the network.
 *
 * A payload that is not exactly one well-formed element must give
 * QF_DATA_LOSS (or QF_RESOURCE_EXHAUSTED), never a crash, an over-read or a
 * leak (ASan). Version 1 has one spelling per element (flags bit 0 only, a
 * zero reserved byte, bools 0 or 1, exact lengths, nothing after the last
 * component; a NaN keeps its bits), so a payload that decodes must encode
 * back to exactly its own bytes: a decoder that let anything else through
 * fails here. And that encoding decodes to an equal element (dtypes,
 * shapes, values, names). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "qf_nats.h"

/* The payload of e (malloc'd), checked against what qf_nats_encoded_size()
 * announced. */
static unsigned char *encode(const qf_element *e, size_t *ret_len)
{
    size_t len = 0, got = 0;
    check(qf_nats_encoded_size(e, &len) == QF_OK);
    unsigned char *buf = malloc(len ? len : 1);
    check(buf);
    check(qf_nats_encode(e, buf, len, &got) == QF_OK && got == len);
    if (len > 0) /* one byte short is refused, and writes nothing */
        check(qf_nats_encode(e, buf, len - 1, &got) == QF_INVALID_ARGUMENT);
    *ret_len = len;
    return buf;
}

static void check_same(const qf_element *a, const qf_element *b)
{
    size_t n = qf_element_size(a);
    check(qf_element_size(b) == n);
    check(qf_element_has_names(a) == qf_element_has_names(b));
    for (size_t i = 0; i < n; i++) {
        const qf_tensor *x = qf_element_get(a, i), *y = qf_element_get(b, i);
        check(x && y && qf_tensor_dtype(x) == qf_tensor_dtype(y));
        const qf_shape *sx = qf_tensor_shape(x), *sy = qf_tensor_shape(y);
        check(sx->rank == sy->rank);
        for (int d = 0; d < sx->rank; d++)
            check(sx->dims[d] == sy->dims[d]);
        if (qf_tensor_dtype(x) == QF_STRING) {
            for (int64_t k = 0; k < qf_shape_num_elements(sx); k++) {
                size_t lx = 0, ly = 0;
                const char *px = qf_tensor_string(x, k, &lx), *py = qf_tensor_string(y, k, &ly);
                check(lx == ly && (lx == 0 || memcmp(px, py, lx) == 0));
            }
        } else {
            size_t bytes = (size_t)qf_shape_num_elements(sx) * qf_dtype_size(qf_tensor_dtype(x));
            check(bytes == 0 || memcmp(qf_tensor_cdata(x), qf_tensor_cdata(y), bytes) == 0);
        }
        if (qf_element_has_names(a))
            check(strcmp(qf_element_name(a, i), qf_element_name(b, i)) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so that ASan sees any over-read. */
    unsigned char *in = malloc(size ? size : 1);
    check(in);
    memcpy(in, data, size);
    qf_element *e = NULL;
    qf_code rc = qf_nats_decode(in, size, &e);
    free(in);
    if (rc == QF_OK) { /* the one spelling of its element */
        size_t len = 0;
        unsigned char *again = encode(e, &len);
        check(len == size && memcmp(again, data, size) == 0);
        free(again);
    }
    if (rc != QF_OK) {
        check(rc == QF_DATA_LOSS || rc == QF_RESOURCE_EXHAUSTED);
        check(e == NULL); /* untouched on failure */
        return 0;
    }
    check(e);
    size_t len1 = 0, len2 = 0;
    unsigned char *p1 = encode(e, &len1);
    qf_element *e2 = NULL;
    check(qf_nats_decode(p1, len1, &e2) == QF_OK);
    check_same(e, e2);
    unsigned char *p2 = encode(e2, &len2);
    check(len1 == len2 && memcmp(p1, p2, len1) == 0);
    free(p1);
    free(p2);
    qf_element_free(e);
    qf_element_free(e2);
    return 0;
}
