/* test_nats_codec.c - qf_nats_encode() / qf_nats_decode(): elements to and
 * from message payloads. No server needed.
 *
 * Round trips of every dtype that can travel, with shapes, names, empty
 * strings and zero-size tensors; the encoder's refusals (pointers, missing
 * components, short buffers); and the decoder on hostile input: every
 * truncation of a valid payload, every single-byte change of one, a wrong
 * magic, version and flags, bools that are not 0/1, counts that exceed the
 * payload, trailing bytes, duplicate names. Each must give QF_DATA_LOSS (or
 * decode to a valid element for byte changes in values), never crash or
 * read out of bounds (ASan runs these).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qf_nats.h"
#include "qf_sparse.h"

static qf_element *sample(void)
{
    qf_shape s23 = QF_SHAPE(2, 3), s2 = QF_SHAPE(2), s0 = QF_SHAPE(0);
    float f[6] = {1, 2, 3, 4, 5, 6.5f};
    double d[2] = {-1.25, 1e300};
    int64_t i64[2] = {INT64_MIN, INT64_MAX};
    bool b[2] = {true, false};
    uint16_t h[2] = {0x3c00, 0xffff};
    float cx[4] = {1, -1, 2, -2}; /* two complex64 */
    qf_tensor *strs = qf_tensor_new(QF_STRING, &s2);
    qf_tensor_set_string(strs, 0, "", 0);
    qf_tensor_set_string(strs, 1, "a\0b", 3);
    qf_tensor *parts[9] = {
        qf_tensor_new_from(QF_FLOAT32, &s23, f, sizeof(f)),
        qf_tensor_new_from(QF_FLOAT64, &s2, d, sizeof(d)),
        qf_tensor_new_from(QF_INT64, &s2, i64, sizeof(i64)),
        qf_tensor_new_from(QF_BOOL, &s2, b, sizeof(b)),
        qf_tensor_new_from(QF_FLOAT16, &s2, h, sizeof(h)),
        qf_tensor_new_from(QF_COMPLEX64, &s2, cx, sizeof(cx)),
        strs,
        qf_tensor_new(QF_INT32, &s0),
        qf_tensor_new_cstr("scalar"),
    };
    qf_element *e = qf_element_of(9, parts);
    cr_assert_not_null(e);
    return e;
}

static void *encode(const qf_element *e, size_t *len)
{
    cr_assert_eq(qf_nats_encoded_size(e, len), QF_OK, "%s", qf_last_message());
    void *buf = malloc(*len);
    size_t got = 0;
    cr_assert_eq(qf_nats_encode(e, buf, *len, &got), QF_OK, "%s", qf_last_message());
    cr_assert_eq(got, *len);
    return buf;
}

static void assert_same(const qf_element *a, const qf_element *b)
{
    cr_assert_eq(qf_element_size(a), qf_element_size(b));
    for (size_t i = 0; i < qf_element_size(a); i++)
        cr_assert(qf_tensor_equal(qf_element_get(a, i), qf_element_get(b, i)), "component %zu", i);
    cr_assert_eq(qf_element_has_names(a), qf_element_has_names(b));
    for (size_t i = 0; qf_element_has_names(a) && i < qf_element_size(a); i++)
        cr_assert_str_eq(qf_element_name(a, i), qf_element_name(b, i));
}

Test(nats_codec, round_trip_every_dtype_and_shape)
{
    qf_element *e = sample();
    size_t len;
    void *buf = encode(e, &len);
    cr_assert_eq(memcmp(buf, "QFE\x01", 4), 0, "magic and version 1");
    qf_element *d = NULL;
    cr_assert_eq(qf_nats_decode(buf, len, &d), QF_OK, "%s", qf_last_message());
    assert_same(e, d);
    qf_element_free(d);
    free(buf);
    qf_element_free(e);
}

Test(nats_codec, round_trip_with_names)
{
    qf_element *e = sample();
    const char *names[9] = {"f", "d", "i", "b", "h", "c", "s", "empty", "scalar"};
    cr_assert_eq(qf_element_set_names(e, names), QF_OK);
    size_t len;
    void *buf = encode(e, &len);
    qf_element *d = NULL;
    cr_assert_eq(qf_nats_decode(buf, len, &d), QF_OK, "%s", qf_last_message());
    assert_same(e, d);
    cr_assert_not_null(qf_element_get_by_name(d, "scalar"));
    qf_element_free(d);
    free(buf);
    qf_element_free(e);
}

Test(nats_codec, encode_refuses_what_cannot_travel)
{
    qf_tensor *p = qf_tensor_new_scalar_ptr((void *)1, NULL);
    qf_element *e = qf_element_of(1, &p);
    size_t len = 0;
    cr_assert_eq(qf_nats_encoded_size(e, &len), QF_INVALID_ARGUMENT);
    cr_assert(strstr(qf_last_message(), "component 0 is ptr"), "%s", qf_last_message());
    qf_element_free(e);

    qf_element *hole = qf_element_new(2);
    qf_element_set(hole, 0, qf_tensor_new_i32(1));
    cr_assert_eq(qf_nats_encoded_size(hole, &len), QF_INVALID_ARGUMENT);
    cr_assert(strstr(qf_last_message(), "component 1 is missing"), "%s", qf_last_message());
    qf_element_free(hole);

    qf_element *ok = sample();
    cr_assert_eq(qf_nats_encoded_size(ok, &len), QF_OK);
    char small[8];
    size_t got = 77;
    memset(small, 0x5a, sizeof(small));
    cr_assert_eq(qf_nats_encode(ok, small, sizeof(small), &got), QF_INVALID_ARGUMENT);
    cr_assert(strstr(qf_last_message(), "too small"), "%s", qf_last_message());
    cr_assert_eq(got, 77, "ret_len untouched on failure");
    cr_assert_eq(small[0], 0x5a, "buffer untouched on failure");
    cr_assert_eq(qf_nats_encoded_size(NULL, &len), QF_INVALID_ARGUMENT);
    qf_element_free(ok);
}

static void expect_loss(const void *buf, size_t len, const char *why)
{
    qf_element *d = (qf_element *)(uintptr_t)0x1;
    qf_code rc = qf_nats_decode(buf, len, &d);
    cr_assert_eq(rc, QF_DATA_LOSS, "%s: got %s", why, qf_code_name(rc));
    cr_assert_eq(d, (qf_element *)(uintptr_t)0x1, "%s: output untouched", why);
    cr_assert(strstr(qf_last_message(), "NATS payload of"), "%s", qf_last_message());
}

Test(nats_codec, every_truncation_is_data_loss)
{
    qf_element *e = sample();
    size_t len;
    unsigned char *buf = encode(e, &len);
    for (size_t n = 0; n < len; n++) {
        /* a copy of exactly n bytes, so ASan sees any read past the end */
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        expect_loss(cut, n, "truncated");
        free(cut);
    }
    free(buf);
    qf_element_free(e);
}

Test(nats_codec, hostile_headers_and_counts)
{
    qf_element *e = sample();
    size_t len;
    unsigned char *buf = encode(e, &len);
    unsigned char *m = malloc(len + 1);

    memcpy(m, buf, len);
    m[0] = 'X';
    expect_loss(m, len, "magic");
    cr_assert(strstr(qf_last_message(), "not a qflow element"), "%s", qf_last_message());

    memcpy(m, buf, len);
    m[3] = 2;
    expect_loss(m, len, "version");
    cr_assert(strstr(qf_last_message(), "format version 2"), "%s", qf_last_message());

    memcpy(m, buf, len);
    m[4] = 0x80;
    expect_loss(m, len, "flags");

    memcpy(m, buf, len);
    m[6] = 0;
    m[7] = 0;
    expect_loss(m, len, "zero components");

    memcpy(m, buf, len);
    m[len] = 0;
    expect_loss(m, len + 1, "trailing byte");
    cr_assert(strstr(qf_last_message(), "after the last component"), "%s", qf_last_message());

    /* component 0: dtype float at 8, rank 2 at 9, dims at 10.. : claim 2^40 rows */
    memcpy(m, buf, len);
    uint64_t big = (uint64_t)1 << 40;
    memcpy(m + 10, &big, 8);
    expect_loss(m, len, "huge dimension");
    cr_assert(strstr(qf_last_message(), "cannot fit"), "%s", qf_last_message());

    memcpy(m, buf, len);
    m[8] = 100; /* QF_PTR */
    expect_loss(m, len, "pointer dtype");
    memcpy(m, buf, len);
    m[8] = 101; /* QF_SPARSE: its values would be taken for sparse tensors */
    expect_loss(m, len, "sparse dtype");
    memcpy(m, buf, len);
    m[9] = 9;
    expect_loss(m, len, "rank 9");
    free(m);
    free(buf);
    qf_element_free(e);
}

/* A QF_SPARSE component holds pointers to sparse tensors: refused like
 * QF_PTR, nothing written. */
Test(nats_codec, sparse_components_cannot_be_sent)
{
    qf_sparse *sp = NULL;
    cr_assert_eq(qf_sparse_new_from(QF_INT64, 1, 1, (const int64_t[]){0}, (const int64_t[]){5},
                                    (const int64_t[]){2}, &sp),
                 QF_OK);
    qf_tensor *t = qf_tensor_new_sparse(sp);
    qf_element *e = qf_element_of(1, &t);
    size_t len = 77;
    cr_assert_eq(qf_nats_encoded_size(e, &len), QF_INVALID_ARGUMENT);
    cr_assert(strstr(qf_last_message(), "cannot be sent"), "%s", qf_last_message());
    unsigned char buf[256];
    cr_assert_eq(qf_nats_encode(e, buf, sizeof(buf), &len), QF_INVALID_ARGUMENT);
    cr_assert_eq(len, 77);
    qf_element_free(e);
}

Test(nats_codec, bools_must_be_zero_or_one)
{
    qf_shape s3 = QF_SHAPE(3);
    bool b[3] = {true, false, true};
    qf_tensor *t = qf_tensor_new_from(QF_BOOL, &s3, b, sizeof(b));
    qf_element *e = qf_element_of(1, &t);
    size_t len;
    unsigned char *buf = encode(e, &len);
    buf[len - 2] = 2;
    expect_loss(buf, len, "bool 2");
    cr_assert(strstr(qf_last_message(), "a bool holds 2"), "%s", qf_last_message());
    free(buf);
    qf_element_free(e);
}

Test(nats_codec, duplicate_names_are_data_loss)
{
    qf_tensor *p[2] = {qf_tensor_new_i32(1), qf_tensor_new_i32(2)};
    qf_element *e = qf_element_of(2, p);
    const char *names[2] = {"aa", "ab"};
    qf_element_set_names(e, names);
    size_t len;
    unsigned char *buf = encode(e, &len);
    /* second name starts after header 8, name 0 (2+2), comp 0 (2+4) */
    cr_assert_eq(memcmp(buf + 8 + 4 + 6 + 2, "ab", 2), 0);
    buf[8 + 4 + 6 + 3] = 'a';
    expect_loss(buf, len, "duplicate names");
    free(buf);
    qf_element_free(e);
}

/* Every single-byte change of a valid payload: either DATA_LOSS, or an
 * element that encodes back to exactly those bytes (a change inside a
 * value). Never anything else. */
Test(nats_codec, every_byte_flip_is_caught_or_harmless)
{
    qf_element *e = sample();
    const char *names[9] = {"f", "d", "i", "b", "h", "c", "s", "empty", "scalar"};
    qf_element_set_names(e, names);
    size_t len;
    unsigned char *buf = encode(e, &len);
    unsigned char *m = malloc(len);
    unsigned flips[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < len; i++) {
        for (size_t k = 0; k < sizeof(flips) / sizeof(flips[0]); k++) {
            memcpy(m, buf, len);
            m[i] ^= (unsigned char)flips[k];
            qf_element *d = NULL;
            qf_code rc = qf_nats_decode(m, len, &d);
            if (rc == QF_DATA_LOSS)
                continue;
            cr_assert_eq(rc, QF_OK, "byte %zu: %s", i, qf_code_name(rc));
            size_t l2;
            void *again = encode(d, &l2);
            cr_assert_eq(l2, len, "byte %zu", i);
            cr_assert_eq(memcmp(again, m, len), 0, "byte %zu re-encodes differently", i);
            free(again);
            qf_element_free(d);
        }
    }
    free(m);
    free(buf);
    qf_element_free(e);
}

Test(nats_codec, decode_bad_arguments)
{
    qf_element *d = NULL;
    cr_assert_eq(qf_nats_decode(NULL, 4, &d), QF_INVALID_ARGUMENT);
    cr_assert_eq(qf_nats_decode("QFE", 3, NULL), QF_INVALID_ARGUMENT);
    expect_loss("", 0, "empty payload");
}
