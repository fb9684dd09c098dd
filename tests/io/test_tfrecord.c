/* test_tfrecord.c - TFRecord writer and iterator (qf_tfrecord.h), and the
 * compressed record formats of qf_reader.h: TFRecordReader with
 * compression_type ""/"ZLIB"/"GZIP"/"ZSTD" and FixedLengthRecordReader with
 * encoding "ZLIB"/"GZIP"/"ZSTD" (spec 197-200 applied to the decompressed
 * stream).
 *
 * Independent files: tests/data/py_*.{tfrecord,gz,zz} were made by
 * tests/data/make_record_fixtures.py from the documented format, with its
 * own bitwise CRC-32C and Python's zlib/gzip; the .zst ones and
 * py_zstd.tfrecord by zstd(1) from them (see that script);
 * expected_records() below makes the same record list. Round trips: writer -> reader and writer ->
 * iterator must give back every record byte for byte, for every
 * compression and a spread of zlib options.
 */
#include <fcntl.h>
#include <zlib.h>
#include <zstd.h>

#include "qf_reader-impl.h" /* white-box: qf__crc32c */
#include "qf_test_io.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(tfrecord, .timeout = 240);
#endif

#define NREC 12

/* The fixtures' records (see make_record_fixtures.py). */
typedef struct recs {
    char *data[NREC];
    size_t len[NREC];
} recs;

static recs expected_records(void)
{
    recs r;
    for (int i = 0; i < 10; i++) {
        char head[16];
        int h = snprintf(head, sizeof(head), "rec-%d:", i);
        r.len[i] = (size_t)h + (size_t)i * 37;
        r.data[i] = malloc(r.len[i] + 1);
        memcpy(r.data[i], head, (size_t)h);
        for (int j = 0; j < i * 37; j++)
            r.data[i][h + j] = (char)((i * 31 + j) & 0xff);
    }
    r.len[10] = 0;
    r.data[10] = malloc(1);
    r.len[11] = 70000;
    r.data[11] = malloc(70000);
    for (int j = 0; j < 70000; j++)
        r.data[11][j] = (char)((j * 7 + j / 251) & 0xff);
    return r;
}

static void recs_free(recs *r)
{
    for (int i = 0; i < NREC; i++)
        free(r->data[i]);
}

static const char *fixture(const char *name)
{
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 512, "%s/%s", QF_TEST_DATA, name);
    return b;
}

/* Iterate `path` and compare with the expected records and offsets. */
static void expect_iterated(const char *path, qf_compression c, const recs *want)
{
    qf_tfrecord_options o = {.compression = c};
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(path, &o, &it));
    uint64_t off = 0;
    for (int i = 0; i < NREC; i++) {
        cr_expect_eq(qf_tfrecord_iterator_offset(it), off, "record %d offset", i);
        const char *d = NULL;
        size_t n = 0;
        OK(qf_tfrecord_iterator_next(it, &d, &n));
        cr_assert_eq(n, want->len[i], "record %d length %zu, want %zu", i, n, want->len[i]);
        cr_assert(memcmp(d, want->data[i], n) == 0, "record %d bytes differ", i);
        cr_expect_eq(d[n], '\0');
        off += 16 + n;
    }
    const char *d = NULL;
    size_t n = 0;
    REFUSED(qf_tfrecord_iterator_next(it, &d, &n), QF_OUT_OF_RANGE, "end of");
    REFUSED(qf_tfrecord_iterator_next(it, &d, &n), QF_OUT_OF_RANGE, "end of");
    cr_expect_null(d);
    qf_tfrecord_iterator_free(it);
}

/* Read `path` with a TFRecordReader and compare records and keys. */
static void expect_read(const char *path, qf_compression c, const qf_zlib_options *z,
                        size_t buffer_bytes, const recs *want)
{
    qf_reader_options ro = {
        .kind = QF_READER_TFRECORD, .compression = c, .buffer_bytes = buffer_bytes};
    if (z)
        ro.zlib = *z;
    qf_reader *r = NULL;
    OK(qf_reader_new(&ro, &r));
    qf_queue *q = work_queue();
    put(q, path);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    uint64_t off = 0;
    for (int i = 0; i < NREC; i++) {
        OK(qf_reader_read(r, q, &rec));
        cr_assert_eq(rec.value_len, want->len[i], "record %d", i);
        cr_assert(memcmp(rec.value, want->data[i], rec.value_len) == 0, "record %d bytes", i);
        cr_expect_str_eq(rec.key, keyf(path, off));
        off += 16 + rec.value_len;
    }
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    cr_expect_eq(qf_reader_num_records_produced(r), NREC);
    cr_expect_eq(qf_reader_num_work_units_completed(r), 1);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

/* ====================================================== independent files */

/* The public checksum (qf_crc32c_extend()) is the readers' own: the standard
 * vector, extended in pieces, and the framing of a record of the independent
 * files, whose stored CRCs Python computed bit by bit. */
Test(tfrecord, the_public_crc32c_is_the_framings)
{
    cr_expect_eq(qf_crc32c_extend(0, "123456789", 9), 0xE3069283u);
    cr_expect_eq(qf_crc32c_extend(qf_crc32c_extend(0, "1234", 4), "56789", 5), 0xE3069283u);
    unsigned char big[3000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (unsigned char)(i * 131 + 7);
    for (size_t n = 0; n <= sizeof(big); n += 97)
        cr_expect_eq(qf_crc32c_extend(0, big, n), qf__crc32c(big, n), "length %zu", n);
    const char *path = fixture("py_plain.tfrecord");
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    unsigned char head[12];
    cr_assert_eq(fread(head, 1, 12, f), 12u);
    uint64_t len = 0;
    for (int i = 0; i < 8; i++)
        len |= (uint64_t)head[i] << (8 * i);
    uint32_t stored = (uint32_t)head[8] | (uint32_t)head[9] << 8 | (uint32_t)head[10] << 16 |
                      (uint32_t)head[11] << 24;
    cr_expect_eq(qf__crc32c_mask(qf_crc32c_extend(0, head, 8)), stored);
    cr_assert_lt(len, 1u << 20);
    unsigned char *data = malloc(len + 4);
    cr_assert_not_null(data);
    cr_assert_eq(fread(data, 1, len + 4, f), len + 4);
    stored = (uint32_t)data[len] | (uint32_t)data[len + 1] << 8 | (uint32_t)data[len + 2] << 16 |
             (uint32_t)data[len + 3] << 24;
    cr_expect_eq(qf__crc32c_mask(qf_crc32c_extend(0, data, len)), stored);
    free(data);
    fclose(f);
}

Test(tfrecord, independent_plain_zlib_and_gzip_files_iterate_record_for_record)
{
    recs want = expected_records();
    expect_iterated(fixture("py_plain.tfrecord"), QF_COMPRESSION_NONE, &want);
    expect_iterated(fixture("py_zlib.tfrecord"), QF_COMPRESSION_ZLIB, &want);
    expect_iterated(fixture("py_gzip.tfrecord"), QF_COMPRESSION_GZIP, &want);
    expect_iterated(fixture("py_zstd.tfrecord"), QF_COMPRESSION_ZSTD, &want);
    recs_free(&want);
}

Test(tfrecord, independent_files_read_through_the_reader_with_offsets_as_keys)
{
    recs want = expected_records();
    expect_read(fixture("py_plain.tfrecord"), QF_COMPRESSION_NONE, NULL, 0, &want);
    expect_read(fixture("py_zlib.tfrecord"), QF_COMPRESSION_ZLIB, NULL, 0, &want);
    expect_read(fixture("py_gzip.tfrecord"), QF_COMPRESSION_GZIP, NULL, 0, &want);
    expect_read(fixture("py_zstd.tfrecord"), QF_COMPRESSION_ZSTD, NULL, 0, &want);
    /* Tiny buffers: every record and header crosses buffer and inflate
     * boundaries. */
    qf_zlib_options small = {.input_buffer_size = 7, .output_buffer_size = 5};
    expect_read(fixture("py_gzip.tfrecord"), QF_COMPRESSION_GZIP, &small, 16, &want);
    expect_read(fixture("py_zlib.tfrecord"), QF_COMPRESSION_ZLIB, &small, 16, &want);
    expect_read(fixture("py_zstd.tfrecord"), QF_COMPRESSION_ZSTD, &small, 16, &want);
    expect_read(fixture("py_plain.tfrecord"), QF_COMPRESSION_NONE, NULL, 16, &want);
    recs_free(&want);
}

Test(tfrecord, compression_type_strings_are_tensorflows)
{
    qf_compression c = QF_COMPRESSION_GZIP;
    OK(qf_compression_parse("", &c));
    cr_expect_eq(c, QF_COMPRESSION_NONE);
    OK(qf_compression_parse("ZLIB", &c));
    cr_expect_eq(c, QF_COMPRESSION_ZLIB);
    OK(qf_compression_parse("ZSTD", &c));
    cr_expect_eq(c, QF_COMPRESSION_ZSTD);
    OK(qf_compression_parse("GZIP", &c));
    cr_expect_eq(c, QF_COMPRESSION_GZIP);
    REFUSED(qf_compression_parse("gzip", &c), QF_INVALID_ARGUMENT,
            "unknown compression type 'gzip'");
    cr_expect_eq(c, QF_COMPRESSION_GZIP, "untouched on failure");
}

/* ============================================================ round trips */

static void write_all_recs(const char *path, const qf_tfrecord_options *o, const recs *want)
{
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(path, o, &w));
    for (int i = 0; i < NREC; i++) {
        OK(qf_tfrecord_writer_write(w, want->data[i], want->len[i]));
        if (i == 5)
            OK(qf_tfrecord_writer_flush(w));
    }
    OK(qf_tfrecord_writer_close(w));
}

Test(tfrecord, uncompressed_writer_output_is_byte_identical_to_the_independent_file)
{
    tdir d;
    tdir_make(&d);
    recs want = expected_records();
    const char *p = tpath(&d, "w.tfrecord");
    write_all_recs(p, NULL, &want);
    size_t a_len, b_len;
    char *a = slurp_file(p, &a_len);
    char *b = slurp_file(fixture("py_plain.tfrecord"), &b_len);
    cr_assert_eq(a_len, b_len);
    cr_expect(memcmp(a, b, a_len) == 0, "the framing and masked CRCs differ");
    free(a);
    free(b);
    recs_free(&want);
    tdir_remove(&d);
}

Test(tfrecord, writer_reader_iterator_round_trip_for_every_compression_and_option_spread)
{
    tdir d;
    tdir_make(&d);
    recs want = expected_records();
    struct {
        qf_compression c;
        qf_zlib_options z;
    } cases[] = {
        {QF_COMPRESSION_NONE, {0}},
        {QF_COMPRESSION_ZLIB, {0}},
        {QF_COMPRESSION_GZIP, {0}},
        {QF_COMPRESSION_GZIP, {.compression_level = QF_ZLIB_LEVEL_STORED}},
        {QF_COMPRESSION_ZLIB, {.compression_level = 9, .mem_level = 1, .window_bits = 9}},
        {QF_COMPRESSION_GZIP, {.input_buffer_size = 3, .output_buffer_size = 11, .flush_mode = 3}},
        {QF_COMPRESSION_ZLIB, {.strategy = 2 /* Z_HUFFMAN_ONLY */, .flush_mode = 2}},
        {QF_COMPRESSION_NONE, {.output_buffer_size = 10}},
        {QF_COMPRESSION_ZSTD, {0}},
        {QF_COMPRESSION_ZSTD, {.compression_level = 19}},
        {QF_COMPRESSION_ZSTD, {.input_buffer_size = 3, .output_buffer_size = 11, .flush_mode = 3}},
        {QF_COMPRESSION_ZSTD, {.compression_level = 1, .flush_mode = 2}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "rt%zu.tfrecord", i);
        const char *p = tpath(&d, name);
        qf_tfrecord_options o = {.compression = cases[i].c, .zlib = cases[i].z};
        write_all_recs(p, &o, &want);
        expect_iterated(p, cases[i].c, &want);
        expect_read(p, cases[i].c, &cases[i].z, 16, &want);
        expect_read(p, cases[i].c, NULL, 0, &want);
    }
    recs_free(&want);
    tdir_remove(&d);
}

/* Issue 24 item 8: a compressed file followed while its writer flushes.
 * An unfinished stream reads as DATA_LOSS "truncated <C> stream" (TensorFlow
 * reports OUT_OF_RANGE there); the iterator keeps its place and its
 * inflater, and the next flush's records come out. */
Test(tfrecord, a_flushed_compressed_file_can_be_read_before_close_and_followed)
{
    tdir d;
    tdir_make(&d);
    qf_compression cs[] = {QF_COMPRESSION_GZIP, QF_COMPRESSION_ZLIB, QF_COMPRESSION_ZSTD};
    const char *names[] = {"GZIP", "ZLIB", "ZSTD"};
    const char *files[] = {"open.tfrecord.gz", "open.tfrecord.z", "open.tfrecord.zst"};
    for (int k = 0; k < 3; k++) {
        const char *p = tpath(&d, files[k]);
        qf_tfrecord_options o = {.compression = cs[k]};
        qf_tfrecord_writer *w = NULL;
        OK(qf_tfrecord_writer_open(p, &o, &w));
        OK(qf_tfrecord_writer_write(w, "alpha", 5));
        OK(qf_tfrecord_writer_write(w, "beta", 4));
        OK(qf_tfrecord_writer_flush(w));
        cr_expect_gt(qf_tfrecord_writer_bytes(w), 0);
        qf_tfrecord_iterator *it = NULL;
        OK(qf_tfrecord_iterator_open(p, &o, &it));
        const char *data;
        size_t n;
        OK(qf_tfrecord_iterator_next(it, &data, &n));
        cr_expect_str_eq(data, "alpha");
        OK(qf_tfrecord_iterator_next(it, &data, &n));
        cr_expect_str_eq(data, "beta");
        char want[64];
        snprintf(want, sizeof(want), "truncated %s stream", names[k]);
        /* The member is not finished: the stream is truncated for now. */
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, want);
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, want);
        cr_expect_eq(qf_tfrecord_iterator_offset(it), 2 * 16 + 9);
        OK(qf_tfrecord_writer_write(w, "gamma", 5));
        OK(qf_tfrecord_writer_flush(w));
        OK(qf_tfrecord_iterator_next(it, &data, &n));
        cr_expect_str_eq(data, "gamma");
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, want);
        OK(qf_tfrecord_writer_write(w, "delta", 5));
        OK(qf_tfrecord_writer_close(w)); /* Z_FINISH: now the stream ends */
        OK(qf_tfrecord_iterator_next(it, &data, &n));
        cr_expect_str_eq(data, "delta");
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
        cr_expect_eq(qf_tfrecord_iterator_offset(it), 4 * 16 + 19);
        qf_tfrecord_iterator_free(it);
    }
    tdir_remove(&d);
}

Test(tfrecord, writer_refuses_bad_options_and_creates_no_file)
{
    tdir d;
    tdir_make(&d);
    const char *p = tpath(&d, "never");
    qf_tfrecord_writer *w = NULL;
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_GZIP, .zlib = {.compression_level = 10}};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "compression_level");
    o.zlib = (qf_zlib_options){.window_bits = 16};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "window_bits");
    o.zlib = (qf_zlib_options){.flush_mode = 4};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "flush_mode");
    o.zlib = (qf_zlib_options){.mem_level = -1};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "mem_level");
    o.zlib = (qf_zlib_options){.strategy = 9};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "strategy");
    o = (qf_tfrecord_options){.compression = (qf_compression)7};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "unknown compression 7");
    /* ZSTD: libzstd's levels, no zlib-only option */
    o = (qf_tfrecord_options){.compression = QF_COMPRESSION_ZSTD,
                              .zlib = {.compression_level = 23}};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT,
            "ZSTD compression_level must be 1..22");
    o.zlib = (qf_zlib_options){.compression_level = QF_ZLIB_LEVEL_STORED};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "compression_level");
    o.zlib = (qf_zlib_options){.window_bits = 15};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT,
            "zlib option window_bits does not apply to a ZSTD stream");
    o.zlib = (qf_zlib_options){.mem_level = 8};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "mem_level");
    o.zlib = (qf_zlib_options){.strategy = 1};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "strategy");
    o.zlib = (qf_zlib_options){.flush_mode = 1};
    REFUSED(qf_tfrecord_writer_open(p, &o, &w), QF_INVALID_ARGUMENT, "ZSTD flush_mode");
    cr_expect_null(w);
    cr_expect_neq(access(p, F_OK), 0, "a refused open created the file");
    REFUSED(qf_tfrecord_writer_open(NULL, NULL, &w), QF_INVALID_ARGUMENT, "NULL path");
    REFUSED(qf_tfrecord_writer_open(tpath(&d, "no/such/dir"), NULL, &w), QF_NOT_FOUND,
            "No such file or directory");
    OK(qf_tfrecord_writer_open(p, NULL, &w));
    REFUSED(qf_tfrecord_writer_write(w, NULL, 3), QF_INVALID_ARGUMENT, "NULL data");
    REFUSED(qf_tfrecord_writer_write(NULL, "x", 1), QF_INVALID_ARGUMENT, "NULL writer");
    OK(qf_tfrecord_writer_write(w, NULL, 0));
    OK(qf_tfrecord_writer_close(w));
    cr_expect_eq(qf_tfrecord_writer_close(NULL), QF_OK);
    tdir_remove(&d);
}

Test(tfrecord, iterator_reports_open_errors_and_null_arguments)
{
    qf_tfrecord_iterator *it = NULL;
    REFUSED(qf_tfrecord_iterator_open("/nonexistent/x.tfrecord", NULL, &it), QF_NOT_FOUND,
            "/nonexistent/x.tfrecord; No such file or directory");
    REFUSED(qf_tfrecord_iterator_open(NULL, NULL, &it), QF_INVALID_ARGUMENT, "NULL path");
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_ZLIB, .zlib = {.window_bits = 3}};
    REFUSED(qf_tfrecord_iterator_open(fixture("py_zlib.tfrecord"), &o, &it), QF_INVALID_ARGUMENT,
            "window_bits");
    cr_expect_null(it);
    OK(qf_tfrecord_iterator_open(fixture("py_plain.tfrecord"), NULL, &it));
    const char *data;
    REFUSED(qf_tfrecord_iterator_next(it, &data, NULL), QF_INVALID_ARGUMENT, "NULL ret_len");
    qf_tfrecord_iterator_free(it);
    qf_tfrecord_iterator_free(NULL);
}

/* ===================================================== damaged compression */

static char *copy_fixture(const tdir *d, const char *name, const char *out, size_t *ret_len)
{
    char *b = slurp_file(fixture(name), ret_len);
    write_bytes(d, out, b, *ret_len);
    return b;
}

/* Flip `len` bytes from `at` of the fixture `name` (compression c): the
 * reader reports DATA_LOSS naming the file (the decompressor's check or a
 * record's CRC: "corrupt"), then reads the next file, one of c written by
 * qflow. */
static void expect_damage_then_next_file(const char *name, qf_compression c, size_t at_num,
                                         size_t at_den, size_t len)
{
    tdir d;
    tdir_make(&d);
    size_t n;
    char *b = copy_fixture(&d, name, "bad", &n);
    for (size_t i = n * at_num / at_den; i < n * at_num / at_den + len; i++)
        b[i] ^= (char)(i & 1 ? 0xaa : 0x55);
    const char *bad = write_bytes(&d, "bad", b, n);
    const char *good = tpath(&d, "good");
    {
        qf_tfrecord_options o = {.compression = c};
        qf_tfrecord_writer *w = NULL;
        OK(qf_tfrecord_writer_open(good, &o, &w));
        OK(qf_tfrecord_writer_write(w, "after", 5));
        OK(qf_tfrecord_writer_close(w));
    }
    qf_reader *r = NULL;
    OK(qf_tfrecord_reader_new_compressed(c, NULL, &r));
    qf_queue *q = work_queue();
    put_all(q, bad, good, NULL);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    qf_code rc;
    int records = 0;
    while ((rc = qf_reader_read(r, q, &rec)) == QF_OK && strcmp(rec.value, "after") != 0)
        records++;
    /* The damage is found either by the decompressor or by a record checksum. */
    cr_assert_eq(rc, QF_DATA_LOSS, "%s: %s", qf_code_name(rc), qf_last_message());
    cr_expect(has(qf_last_message(), bad), "%s", qf_last_message());
    cr_expect(has(qf_last_message(), "corrupt"), "%s", qf_last_message());
    cr_expect(has(qf_last_message(), "offset") || has(qf_last_message(), "record at"), "%s",
              qf_last_message());
    cr_expect_lt(records, NREC);
    /* The reader moved on to the next file. */
    OK(qf_reader_read(r, q, &rec));
    cr_expect_str_eq(rec.value, "after");
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    free(b);
    tdir_remove(&d);
}

Test(tfrecord, corrupt_compressed_stream_is_data_loss_with_file_and_offset_then_next_file)
{
    expect_damage_then_next_file("py_zlib.tfrecord", QF_COMPRESSION_ZLIB, 1, 2, 2);
}

/* A file of text read as compression c (named `cname` in messages):
 * corrupt, at the offset `where` says, and again on the next call (the
 * iterator keeps its place, issue 24). */
static void expect_not_compressed_at_all(qf_compression c, const char *cname, const char *where)
{
    tdir d;
    tdir_make(&d);
    const char *p = write_str(&d, "notcompressed", "this is not a compressed stream at all");
    qf_tfrecord_options o = {.compression = c};
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(p, &o, &it));
    const char *data;
    size_t n;
    char want[64];
    snprintf(want, sizeof(want), "corrupt %s stream in '", cname);
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, want);
    EXPECT_MSG(where);
    EXPECT_MSG("notcompressed");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, want);
    qf_tfrecord_iterator_free(it);
    tdir_remove(&d);
}

Test(tfrecord, bad_gzip_header_is_corrupt_at_compressed_offset_0)
{
    expect_not_compressed_at_all(QF_COMPRESSION_GZIP, "GZIP", "at compressed offset");
}

/* Every prefix of the fixture `name` (a cut each `step` bytes past the
 * first 64) iterates as a clean prefix of the records and then ends in
 * DATA_LOSS, or, cut at 0, as an empty file. */
static void expect_every_truncation(const char *name, qf_compression c, size_t step)
{
    tdir d;
    tdir_make(&d);
    size_t n;
    char *b = slurp_file(fixture(name), &n);
    recs want = expected_records();
    qf_tfrecord_options o = {.compression = c};
    for (size_t cut = 0; cut < n; cut += (cut < 64 ? 1 : step)) {
        const char *p = write_bytes(&d, "cut", b, cut);
        qf_tfrecord_iterator *it = NULL;
        OK(qf_tfrecord_iterator_open(p, &o, &it));
        const char *data;
        size_t len;
        qf_code rc;
        int i = 0;
        while ((rc = qf_tfrecord_iterator_next(it, &data, &len)) == QF_OK) {
            cr_assert_lt(i, NREC);
            cr_assert(len == want.len[i] && memcmp(data, want.data[i], len) == 0);
            i++;
        }
        if (cut == 0)
            cr_expect_eq(rc, QF_OUT_OF_RANGE, "an empty file has no records");
        else
            cr_expect_eq(rc, QF_DATA_LOSS, "%s cut at %zu: %s %s", name, cut, qf_code_name(rc),
                         qf_last_message());
        qf_tfrecord_iterator_free(it);
    }
    free(b);
    recs_free(&want);
    tdir_remove(&d);
}

Test(tfrecord, every_truncation_of_a_gzip_file_is_data_loss_or_a_clean_prefix)
{
    expect_every_truncation("py_gzip.tfrecord", QF_COMPRESSION_GZIP, 37);
}

Test(tfrecord, concatenated_gzip_members_read_as_one_stream)
{
    tdir d;
    tdir_make(&d);
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_GZIP};
    const char *a = tpath(&d, "a.gz"), *b = tpath(&d, "b.gz");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(a, &o, &w));
    OK(qf_tfrecord_writer_write(w, "one", 3));
    OK(qf_tfrecord_writer_close(w));
    OK(qf_tfrecord_writer_open(b, &o, &w));
    OK(qf_tfrecord_writer_write(w, "two", 3));
    OK(qf_tfrecord_writer_close(w));
    size_t an, bn;
    char *ab = slurp_file(a, &an);
    char *bb = slurp_file(b, &bn);
    ab = realloc(ab, an + bn);
    memcpy(ab + an, bb, bn);
    const char *cat = write_bytes(&d, "cat.gz", ab, an + bn);
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(cat, &o, &it));
    const char *data;
    size_t n;
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "one");
    cr_expect_eq(qf_tfrecord_iterator_offset(it), 19);
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "two");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    qf_tfrecord_iterator_free(it);
    free(ab);
    free(bb);
    tdir_remove(&d);
}

/* ============================================================ record bounds */

/* A 12-byte header with a valid length CRC. */
static void huge_header(unsigned char h[12], uint64_t len)
{
    for (int i = 0; i < 8; i++)
        h[i] = (unsigned char)(len >> (8 * i));
    uint32_t c = qf__crc32c_mask(qf__crc32c(h, 8));
    for (int i = 0; i < 4; i++)
        h[8 + i] = (unsigned char)(c >> (8 * i));
}

/* A zlib stream of the raw bytes (zlib's own compress2). */
static const char *write_zlib(const tdir *d, const char *name, const void *raw, size_t n)
{
    uLongf cap = compressBound(n);
    unsigned char *z = malloc(cap);
    cr_assert_eq(compress2(z, &cap, raw, n, 6), Z_OK);
    const char *p = write_bytes(d, name, z, cap);
    free(z);
    return p;
}

Test(tfrecord, huge_length_with_valid_crc_is_data_loss_never_an_allocation)
{
    tdir d;
    tdir_make(&d);
    unsigned char h[12];
    huge_header(h, (uint64_t)16 << 30); /* 16 GiB */
    const char *plain = write_bytes(&d, "huge", h, sizeof(h));
    qf_tfrecord_iterator *it = NULL;
    const char *data;
    size_t n;
    /* spec: a regular file bounds the length by its size (issue 16). */
    OK(qf_tfrecord_iterator_open(plain, NULL, &it));
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "truncated record at 0 in '");
    qf_tfrecord_iterator_free(it);
    /* Inside a compressed stream the size is unknown: the configured bound
     * (256 MiB by default) and the record's offset. */
    unsigned char raw[18 + 12];
    huge_header(raw, 2);
    memcpy(raw + 12, "ok", 2);
    uint32_t c = qf__crc32c_mask(qf__crc32c("ok", 2));
    for (int i = 0; i < 4; i++)
        raw[14 + i] = (unsigned char)(c >> (8 * i));
    memcpy(raw + 18, h, 12);
    const char *z = write_zlib(&d, "huge.z", raw, sizeof(raw));
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_ZLIB};
    OK(qf_tfrecord_iterator_open(z, &o, &it));
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "ok");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "corrupted record at 18 in '");
    EXPECT_MSG("over max_record_bytes 268435456");
    qf_tfrecord_iterator_free(it);
    /* 2^36 and more: the same DATA_LOSS, not RESOURCE_EXHAUSTED. */
    huge_header(raw + 18, (uint64_t)1 << 40);
    z = write_zlib(&d, "huge2.z", raw, sizeof(raw));
    qf_reader_options ro = {.kind = QF_READER_TFRECORD, .compression = QF_COMPRESSION_ZLIB};
    qf_reader *r = NULL;
    OK(qf_reader_new(&ro, &r));
    qf_queue *q = work_queue();
    put(q, z);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    OK(qf_reader_read(r, q, &rec));
    REFUSED(qf_reader_read(r, q, &rec), QF_DATA_LOSS, "corrupted record at 18 in '");
    EXPECT_MSG("length 1099511627776 is over max_record_bytes");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
    tdir_remove(&d);
}

Test(tfrecord, max_record_bytes_is_configurable)
{
    tdir d;
    tdir_make(&d);
    const char *p = tpath(&d, "sized");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(p, NULL, &w));
    char big[100];
    memset(big, 'b', sizeof(big));
    OK(qf_tfrecord_writer_write(w, "small", 5));
    OK(qf_tfrecord_writer_write(w, big, sizeof(big)));
    OK(qf_tfrecord_writer_close(w));
    qf_tfrecord_options o = {.max_record_bytes = 50};
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(p, &o, &it));
    const char *data;
    size_t n;
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "corrupted record at 21 in '");
    EXPECT_MSG("length 100 is over max_record_bytes 50");
    qf_tfrecord_iterator_free(it);
    qf_reader_options ro = {.kind = QF_READER_TFRECORD, .max_record_bytes = UINT64_MAX};
    qf_reader *r = NULL;
    REFUSED(qf_reader_new(&ro, &r), QF_INVALID_ARGUMENT, "max_record_bytes");
    tdir_remove(&d);
}

/* ================================================ fixed-length, compressed */

Test(tfrecord, fixed_length_reader_reads_zlib_gzip_and_zstd_encodings) /* spec 197, 198 */
{
    qf_compression enc[] = {QF_COMPRESSION_ZLIB, QF_COMPRESSION_GZIP, QF_COMPRESSION_ZSTD};
    const char *files[] = {fixture("py_fixed.bin.zz"), fixture("py_fixed.bin.gz"),
                           fixture("py_fixed.bin.zst")};
    for (int e = 0; e < 3; e++) {
        qf_reader_options ro = {.kind = QF_READER_FIXED_LENGTH_RECORD,
                                .record_bytes = 3,
                                .header_bytes = 5,
                                .footer_bytes = 2,
                                .compression = enc[e],
                                .zlib = {.input_buffer_size = 4, .output_buffer_size = 3}};
        qf_reader *r = NULL;
        OK(qf_reader_new(&ro, &r));
        qf_queue *q = work_queue();
        put(q, files[e]);
        close_q(q);
        qf_record rec = QF_RECORD_INIT;
        for (int i = 0; i < 7; i++) {
            OK(qf_reader_read(r, q, &rec));
            char v[4] = {(char)('0' + i), (char)('0' + i), (char)('0' + i), 0};
            cr_expect_str_eq(rec.value, v);
            cr_expect_str_eq(rec.key, keyf(files[e], (uint64_t)i));
        }
        REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
        qf_record_clear(&rec);
        qf_reader_free(r);
        qf_queue_unref(q);
    }
}

Test(tfrecord, fixed_length_hops_apply_to_the_decompressed_stream) /* spec 200 */
{
    qf_reader_options ro = {.kind = QF_READER_FIXED_LENGTH_RECORD,
                            .record_bytes = 3,
                            .header_bytes = 5,
                            .footer_bytes = 2,
                            .hop_bytes = 2,
                            .compression = QF_COMPRESSION_GZIP};
    qf_reader *r = NULL;
    OK(qf_reader_new(&ro, &r));
    qf_queue *q = work_queue();
    const char *f = fixture("py_hop.bin.gz");
    put(q, f);
    close_q(q);
    qf_record rec = QF_RECORD_INIT;
    const char *want[] = {"012", "234", "456"};
    for (int i = 0; i < 3; i++) {
        OK(qf_reader_read(r, q, &rec));
        cr_expect_str_eq(rec.value, want[i]);
        cr_expect_str_eq(rec.key, keyf(f, (uint64_t)i));
    }
    REFUSED(qf_reader_read(r, q, &rec), QF_OUT_OF_RANGE, "is closed");
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_queue_unref(q);
}

Test(tfrecord, compression_is_refused_for_readers_without_an_encoding)
{
    qf_reader_options ro = {.kind = QF_READER_TEXT_LINE, .compression = QF_COMPRESSION_GZIP};
    qf_reader *r = NULL;
    REFUSED(qf_reader_new(&ro, &r), QF_INVALID_ARGUMENT,
            "compression is only for TFRecordReader and FixedLengthRecordReader, not "
            "TextLineReader");
    ro = (qf_reader_options){.kind = QF_READER_TFRECORD, .compression = (qf_compression)7};
    REFUSED(qf_reader_new(&ro, &r), QF_INVALID_ARGUMENT, "unknown compression 7");
    ro = (qf_reader_options){.kind = QF_READER_TFRECORD,
                             .compression = QF_COMPRESSION_ZSTD,
                             .zlib = {.window_bits = 12}};
    REFUSED(qf_reader_new(&ro, &r), QF_INVALID_ARGUMENT, "does not apply to a ZSTD stream");
    ro = (qf_reader_options){.kind = QF_READER_TFRECORD,
                             .compression = QF_COMPRESSION_ZLIB,
                             .zlib = {.input_buffer_size = (size_t)2 << 30}};
    REFUSED(qf_reader_new(&ro, &r), QF_INVALID_ARGUMENT, "input_buffer_size");
    cr_expect_null(r);
}

Test(tfrecord, output_held_inside_inflate_is_read_before_the_end_of_the_input)
{
    /* Long runs compress to a few bytes: the input is gone while inflate
     * still holds most of the output, which small output buffers take out
     * a little at a time. Nothing of it may be lost as "truncated". */
    tdir d;
    tdir_make(&d);
    char run[5000];
    memset(run, 'a', sizeof(run));
    qf_compression cs[] = {QF_COMPRESSION_ZLIB, QF_COMPRESSION_GZIP};
    for (int c = 0; c < 2; c++) {
        const char *p = tpath(&d, c ? "runs.gz" : "runs.z");
        qf_tfrecord_options o = {.compression = cs[c]};
        qf_tfrecord_writer *w = NULL;
        OK(qf_tfrecord_writer_open(p, &o, &w));
        for (int i = 0; i < 3; i++)
            OK(qf_tfrecord_writer_write(w, run, sizeof(run)));
        OK(qf_tfrecord_writer_close(w));
        for (size_t out = 1; out <= 9; out += 4) {
            o.zlib = (qf_zlib_options){.input_buffer_size = 65536, .output_buffer_size = out};
            qf_tfrecord_iterator *it = NULL;
            OK(qf_tfrecord_iterator_open(p, &o, &it));
            const char *data;
            size_t n;
            for (int i = 0; i < 3; i++) {
                OK(qf_tfrecord_iterator_next(it, &data, &n));
                cr_expect(n == sizeof(run) && memcmp(data, run, n) == 0);
            }
            REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
            qf_tfrecord_iterator_free(it);
        }
    }
    tdir_remove(&d);
}

Test(tfrecord, what_comes_before_damage_does_not_depend_on_buffer_sizes)
{
    /* tests/data/held_output.gz (found by fuzz_fixed_gzip) is a cut-off
     * gzip stream whose tail is long matches: every buffer size must give
     * the same records before the same DATA_LOSS. */
    const char *f = fixture("held_output.gz");
    long want = -1;
    for (size_t buf = 16; buf <= 64; buf += 13) {
        for (size_t out = 1; out <= 16; out += 3) {
            for (size_t in = 1; in <= 64; in *= 8) {
                qf_reader_options ro = {
                    .kind = QF_READER_FIXED_LENGTH_RECORD,
                    .record_bytes = 3,
                    .header_bytes = 5,
                    .footer_bytes = 2,
                    .hop_bytes = 2,
                    .buffer_bytes = buf,
                    .compression = QF_COMPRESSION_GZIP,
                    .zlib = {.input_buffer_size = in, .output_buffer_size = out}};
                qf_reader *r = NULL;
                OK(qf_reader_new(&ro, &r));
                qf_queue *q = work_queue();
                put(q, f);
                close_q(q);
                qf_record rec = QF_RECORD_INIT;
                long n = 0;
                qf_code rc;
                while ((rc = qf_reader_read(r, q, &rec)) == QF_OK)
                    n++;
                cr_expect_eq(rc, QF_DATA_LOSS, "%s", qf_last_message());
                EXPECT_MSG("truncated GZIP stream in '");
                if (want < 0)
                    want = n;
                cr_expect_eq(n, want, "buffer %zu, in %zu, out %zu: %ld records, want %ld", buf, in,
                             out, n, want);
                qf_record_clear(&rec);
                qf_reader_free(r);
                qf_queue_unref(q);
            }
        }
    }
    cr_expect_eq(want, 79);
}

/* ======================================================= issue 24: windows */

/* Item 7: zlib's deflate has no 256-byte window (asked for 8 it writes a
 * ZLIB header saying 9, and refuses 8 for GZIP), so a file written with
 * window_bits 8 did not read back with 8 ("invalid window size"). Every
 * value TensorFlow takes, 8..15, both compressions, writer -> iterator and
 * writer -> reader, with the same options. */
Test(tfrecord, every_window_bits_value_round_trips_for_zlib_and_gzip)
{
    tdir d;
    tdir_make(&d);
    recs want = expected_records();
    qf_compression cs[] = {QF_COMPRESSION_ZLIB, QF_COMPRESSION_GZIP};
    for (int k = 0; k < 2; k++) {
        for (int wb = 8; wb <= 15; wb++) {
            char name[32];
            snprintf(name, sizeof(name), "w%d-%d", k, wb);
            const char *p = tpath(&d, name);
            qf_tfrecord_options o = {.compression = cs[k], .zlib = {.window_bits = wb}};
            write_all_recs(p, &o, &want);
            if (cs[k] == QF_COMPRESSION_ZLIB) {
                /* The header's CINFO is log2(window) - 8; 8 is written as 9. */
                size_t n;
                unsigned char *b = (unsigned char *)slurp_file(p, &n);
                cr_expect_eq(b[0] >> 4, (wb == 8 ? 9 : wb) - 8, "window_bits %d: CMF %#x", wb,
                             b[0]);
                free(b);
            }
            qf_tfrecord_iterator *it = NULL;
            OK(qf_tfrecord_iterator_open(p, &o, &it));
            for (int i = 0; i < NREC; i++) {
                const char *data = NULL;
                size_t n = 0;
                qf_code rc = qf_tfrecord_iterator_next(it, &data, &n);
                cr_assert_eq(rc, QF_OK, "c %d window_bits %d record %d: %s", k, wb, i,
                             qf_last_message());
                cr_assert(n == want.len[i] && memcmp(data, want.data[i], n) == 0);
            }
            const char *data;
            size_t n;
            REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
            qf_tfrecord_iterator_free(it);
            expect_read(p, cs[k], &o.zlib, 16, &want);
        }
    }
    /* A reader's window must still hold the writer's (as zlib and
     * TensorFlow have it): 15 written, 9 read. */
    const char *p = tpath(&d, "w15");
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_ZLIB, .zlib = {.window_bits = 15}};
    write_all_recs(p, &o, &want);
    o.zlib.window_bits = 9;
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(p, &o, &it));
    const char *data;
    size_t n;
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "invalid window size");
    qf_tfrecord_iterator_free(it);
    recs_free(&want);
    tdir_remove(&d);
}

/* ============================================ issue 24: following a file */

static void append_bytes(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, data, n), (ssize_t)n);
    close(fd);
}

/* The framed bytes of one record (header, data, footer). */
static char *framed(const tdir *d, const char *data, size_t len, size_t *ret_n)
{
    const char *p = tpath(d, "one-record");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(p, NULL, &w));
    OK(qf_tfrecord_writer_write(w, data, len));
    OK(qf_tfrecord_writer_close(w));
    char *b = slurp_file(p, ret_n);
    unlink(p);
    return b;
}

/* Item 8 (TensorFlow's testReadGrowingFile_preservesReadOffset): after the
 * end, records appended later come out, from the same open iterator. */
Test(tfrecord, iterator_returns_records_appended_after_the_end)
{
    tdir d;
    tdir_make(&d);
    const char *p = tpath(&d, "growing");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(p, NULL, &w));
    OK(qf_tfrecord_writer_write(w, "one", 3));
    OK(qf_tfrecord_writer_write(w, "two", 3));
    OK(qf_tfrecord_writer_flush(w));
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(p, NULL, &it));
    const char *data;
    size_t n;
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "one");
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "two");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    cr_expect_eq(qf_tfrecord_iterator_offset(it), 38);
    OK(qf_tfrecord_writer_write(w, "three", 5));
    OK(qf_tfrecord_writer_flush(w));
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "three");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    /* Many small appends, each read at once, and a large one. */
    char big[100000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i * 13);
    for (int i = 0; i < 50; i++) {
        char rec[16];
        int l = snprintf(rec, sizeof(rec), "r%d", i);
        OK(qf_tfrecord_writer_write(w, rec, (size_t)l));
        OK(qf_tfrecord_writer_flush(w));
        OK(qf_tfrecord_iterator_next(it, &data, &n));
        cr_assert_str_eq(data, rec);
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    }
    OK(qf_tfrecord_writer_write(w, big, sizeof(big)));
    OK(qf_tfrecord_writer_close(w));
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect(n == sizeof(big) && memcmp(data, big, n) == 0);
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    /* A file cut below what was read: an end that says so. */
    cr_assert_eq(truncate(p, 10), 0);
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "now shorter than");
    qf_tfrecord_iterator_free(it);
    tdir_remove(&d);
}

/* Item 8 (TensorFlow's testReadTruncatedFile_preservesReadOffset): a record
 * cut short is DATA_LOSS on every call until it is whole, then returned;
 * for a cut inside the data and inside the 12-byte header. */
Test(tfrecord, iterator_returns_a_truncated_record_once_it_is_completed)
{
    tdir d;
    tdir_make(&d);
    size_t rn;
    char *rec = framed(&d, "truncated", 9, &rn);
    size_t cuts[] = {rn - 1, 5, 12, 1};
    for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
        const char *p = tpath(&d, "cut");
        qf_tfrecord_writer *w = NULL;
        OK(qf_tfrecord_writer_open(p, NULL, &w));
        OK(qf_tfrecord_writer_write(w, "good", 4));
        OK(qf_tfrecord_writer_close(w));
        append_bytes(p, rec, cuts[c]);
        qf_tfrecord_iterator *it = NULL;
        OK(qf_tfrecord_iterator_open(p, NULL, &it));
        const char *data;
        size_t n;
        OK(qf_tfrecord_iterator_next(it, &data, &n));
        cr_expect_str_eq(data, "good");
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "truncated record at 20");
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "truncated record at 20");
        cr_expect_eq(qf_tfrecord_iterator_offset(it), 20);
        append_bytes(p, rec + cuts[c], rn - cuts[c]);
        OK(qf_tfrecord_iterator_next(it, &data, &n));
        cr_expect_str_eq(data, "truncated", "cut at %zu", cuts[c]);
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
        qf_tfrecord_iterator_free(it);
        unlink(p);
    }
    free(rec);
    tdir_remove(&d);
}

/* A damaged record is reported on every call: the iterator never skips
 * it (TensorFlow's RecordReader does the same). */
Test(tfrecord, iterator_reports_a_corrupted_record_on_every_call)
{
    tdir d;
    tdir_make(&d);
    const char *p = tpath(&d, "bad");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(p, NULL, &w));
    OK(qf_tfrecord_writer_write(w, "good", 4));
    OK(qf_tfrecord_writer_write(w, "damaged", 7));
    OK(qf_tfrecord_writer_write(w, "after", 5));
    OK(qf_tfrecord_writer_close(w));
    size_t n;
    char *b = slurp_file(p, &n);
    b[20 + 12 + 3] ^= 0x20;
    write_bytes(&d, "bad", b, n);
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(p, NULL, &it));
    const char *data;
    size_t len;
    OK(qf_tfrecord_iterator_next(it, &data, &len));
    for (int i = 0; i < 3; i++)
        REFUSED(qf_tfrecord_iterator_next(it, &data, &len), QF_DATA_LOSS,
                "corrupted record at 20 in '");
    /* Repaired in place: it reads on. */
    b[20 + 12 + 3] ^= 0x20;
    write_bytes(&d, "bad", b, n);
    OK(qf_tfrecord_iterator_next(it, &data, &len));
    cr_expect_str_eq(data, "damaged");
    OK(qf_tfrecord_iterator_next(it, &data, &len));
    cr_expect_str_eq(data, "after");
    qf_tfrecord_iterator_free(it);
    free(b);
    tdir_remove(&d);
}

/* A compressed file read while its writer writes without flushing: the
 * file ends anywhere, inside records too, so the iterator goes back and
 * inflates from the start. Every record still comes out once, in order.
 * Incompressible records, so that deflate hands out blocks as it goes. */
Test(tfrecord, iterator_follows_an_unflushed_compressed_writer_record_for_record)
{
    tdir d;
    tdir_make(&d);
    enum { N = 40, LEN = 3000 };
    static char data_[N][LEN];
    uint32_t x = 12345;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < LEN; j++) {
            x = x * 1103515245u + 12345u;
            data_[i][j] = (char)(x >> 24);
        }
    qf_compression cs[] = {QF_COMPRESSION_ZLIB, QF_COMPRESSION_GZIP};
    for (int k = 0; k < 2; k++) {
        const char *p = tpath(&d, k ? "live.gz" : "live.z");
        qf_tfrecord_options o = {.compression = cs[k],
                                 .zlib = {.output_buffer_size = 64, .compression_level = 1}};
        qf_tfrecord_writer *w = NULL;
        OK(qf_tfrecord_writer_open(p, &o, &w));
        qf_tfrecord_iterator *it = NULL;
        OK(qf_tfrecord_iterator_open(p, &o, &it));
        int got = 0, losses = 0;
        for (int i = 0; i <= N; i++) {
            if (i < N)
                OK(qf_tfrecord_writer_write(w, data_[i], (size_t)(LEN - i)));
            else
                OK(qf_tfrecord_writer_finish(w));
            for (;;) {
                const char *data;
                size_t n;
                qf_code rc = qf_tfrecord_iterator_next(it, &data, &n);
                if (rc != QF_OK) {
                    cr_assert(rc == QF_DATA_LOSS || rc == QF_OUT_OF_RANGE, "%s", qf_last_message());
                    if (rc == QF_DATA_LOSS)
                        cr_assert(has(qf_last_message(), "truncated"), "%s", qf_last_message());
                    losses += rc == QF_DATA_LOSS;
                    break;
                }
                cr_assert_lt(got, N);
                cr_assert(n == (size_t)(LEN - got) && memcmp(data, data_[got], n) == 0, "record %d",
                          got);
                got++;
            }
        }
        cr_expect_eq(got, N);
        cr_expect_gt(losses, 0, "the unfinished stream was seen");
        const char *data;
        size_t n;
        REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
        qf_tfrecord_iterator_free(it);
        qf_tfrecord_writer_free(w);
    }
    tdir_remove(&d);
}

/* A finished GZIP file that gets a second member appended (gzip files
 * concatenate): the iterator goes on into it after its end. */
Test(tfrecord, iterator_reads_a_gzip_member_appended_after_the_end)
{
    tdir d;
    tdir_make(&d);
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_GZIP};
    const char *a = tpath(&d, "a.gz"), *b = tpath(&d, "b.gz");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(a, &o, &w));
    OK(qf_tfrecord_writer_write(w, "one", 3));
    OK(qf_tfrecord_writer_close(w));
    OK(qf_tfrecord_writer_open(b, &o, &w));
    OK(qf_tfrecord_writer_write(w, "two", 3));
    OK(qf_tfrecord_writer_close(w));
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(a, &o, &it));
    const char *data;
    size_t n;
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "one");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    size_t bn;
    char *bb = slurp_file(b, &bn);
    append_bytes(a, bb, bn / 2);
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "truncated GZIP stream");
    append_bytes(a, bb + bn / 2, bn - bn / 2);
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "two");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    /* Damage appended after that: reported, and again (never skipped). */
    append_bytes(a, "\x1f\x8b\x08garbage", 10);
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "GZIP stream");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_DATA_LOSS, "GZIP stream");
    cr_expect_eq(qf_tfrecord_iterator_offset(it), 38);
    qf_tfrecord_iterator_free(it);
    free(bb);
    tdir_remove(&d);
}

/* On a pipe nothing can be read again: the first end is final. */
Test(tfrecord, iterator_on_a_pipe_ends_for_good)
{
    tdir d;
    tdir_make(&d);
    size_t rn;
    char *rec = framed(&d, "piped", 5, &rn);
    const char *p = tpath(&d, "fifo");
    cr_assert_eq(mkfifo(p, 0600), 0);
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(p, NULL, &it));
    int fd = open(p, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, rec, rn), (ssize_t)rn);
    close(fd);
    const char *data;
    size_t n;
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "piped");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    qf_tfrecord_iterator_free(it);
    free(rec);
    tdir_remove(&d);
}

/* ================================================ issue 24: writer finish */

Test(tfrecord, a_finished_writer_refuses_writes_and_flushes_clearly)
{
    tdir d;
    tdir_make(&d);
    qf_compression cs[] = {QF_COMPRESSION_NONE, QF_COMPRESSION_GZIP};
    for (int k = 0; k < 2; k++) {
        const char *p = tpath(&d, k ? "f.gz" : "f");
        qf_tfrecord_options o = {.compression = cs[k]};
        qf_tfrecord_writer *w = NULL;
        OK(qf_tfrecord_writer_open(p, &o, &w));
        OK(qf_tfrecord_writer_write(w, "kept", 4));
        OK(qf_tfrecord_writer_finish(w));
        uint64_t bytes = qf_tfrecord_writer_bytes(w);
        cr_expect_gt(bytes, 0);
        REFUSED(qf_tfrecord_writer_write(w, "late", 4), QF_FAILED_PRECONDITION, "is closed");
        EXPECT_MSG("cannot write");
        EXPECT_MSG(p);
        REFUSED(qf_tfrecord_writer_flush(w), QF_FAILED_PRECONDITION, "cannot flush");
        OK(qf_tfrecord_writer_finish(w)); /* again: nothing more */
        cr_expect_eq(qf_tfrecord_writer_bytes(w), bytes);
        qf_tfrecord_writer_free(w);
        size_t n;
        free(slurp_file(p, &n));
        cr_expect_eq(n, bytes, "the late write left nothing");
        qf_tfrecord_iterator *it = NULL;
        OK(qf_tfrecord_iterator_open(p, &o, &it));
        const char *data;
        size_t len;
        OK(qf_tfrecord_iterator_next(it, &data, &len));
        cr_expect_str_eq(data, "kept");
        REFUSED(qf_tfrecord_iterator_next(it, &data, &len), QF_OUT_OF_RANGE, "end of");
        qf_tfrecord_iterator_free(it);
    }
    /* free() alone finishes the file too (close() = finish + free). */
    const char *p = tpath(&d, "freed.gz");
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_GZIP};
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(p, &o, &w));
    OK(qf_tfrecord_writer_write(w, "x", 1));
    qf_tfrecord_writer_free(w);
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(p, &o, &it));
    const char *data;
    size_t len;
    OK(qf_tfrecord_iterator_next(it, &data, &len));
    REFUSED(qf_tfrecord_iterator_next(it, &data, &len), QF_OUT_OF_RANGE, "end of");
    qf_tfrecord_iterator_free(it);
    tdir_remove(&d);
}

/* A write error (ENOSPC from /dev/full) is finish()'s answer, every time;
 * free() does not overwrite the thread's last error. */
Test(tfrecord, finish_reports_the_write_error_and_free_keeps_the_last_error)
{
    qf_tfrecord_writer *w = NULL;
    if (qf_tfrecord_writer_open("/dev/full", NULL, &w) != QF_OK)
        cr_skip_test("/dev/full: %s", qf_last_message());
    OK(qf_tfrecord_writer_write(w, "lost", 4)); /* buffered */
    REFUSED(qf_tfrecord_writer_finish(w), QF_RESOURCE_EXHAUSTED, "No space left on device");
    REFUSED(qf_tfrecord_writer_finish(w), QF_RESOURCE_EXHAUSTED, "No space left on device");
    REFUSED(qf_tfrecord_writer_write(w, "x", 1), QF_FAILED_PRECONDITION, "is closed");
    qf_tfrecord_writer_free(w);
    OK(qf_tfrecord_writer_open("/dev/full", NULL, &w));
    OK(qf_tfrecord_writer_write(w, "lost", 4));
    qf_set_error(QF_ABORTED, "the caller's own error");
    qf_tfrecord_writer_free(w); /* its finish fails, silently */
    cr_expect_eq(qf_last_code(), QF_ABORTED);
    EXPECT_MSG("the caller's own error");
    OK(qf_tfrecord_writer_open("/dev/full", NULL, &w));
    OK(qf_tfrecord_writer_write(w, "lost", 4));
    qf_set_error(QF_OK, "nothing failed");
    qf_tfrecord_writer_free(w);
    cr_expect_eq(qf_last_code(), QF_OK);
    OK(qf_tfrecord_writer_open("/dev/full", NULL, &w));
    OK(qf_tfrecord_writer_write(w, "lost", 4));
    REFUSED(qf_tfrecord_writer_close(w), QF_RESOURCE_EXHAUSTED, "No space left on device");
}

/* =========================================== issue 24: random access */

Test(tfrecord, random_reader_reads_every_record_by_offset_in_any_order)
{
    recs want = expected_records();
    const char *p = fixture("py_plain.tfrecord");
    qf_tfrecord_random_reader *rr = NULL;
    OK(qf_tfrecord_random_reader_open(p, NULL, &rr));
    uint64_t offs[NREC + 1];
    offs[0] = 0;
    for (int i = 0; i < NREC; i++) {
        const char *data = NULL;
        size_t n = 0;
        OK(qf_tfrecord_random_reader_read(rr, offs[i], &data, &n, &offs[i + 1]));
        cr_assert(n == want.len[i] && memcmp(data, want.data[i], n) == 0, "record %d", i);
        cr_expect_eq(data[n], '\0');
        cr_expect_eq(offs[i + 1], offs[i] + 16 + n);
    }
    size_t size;
    free(slurp_file(p, &size));
    cr_expect_eq(offs[NREC], size, "the last next offset is the file's end");
    /* Backwards, and the large record (over the first read) in between. */
    for (int i = NREC - 1; i >= 0; i--) {
        const char *data = NULL;
        size_t n = 0;
        uint64_t next = 0;
        OK(qf_tfrecord_random_reader_read(rr, offs[i], &data, &n, i % 2 ? NULL : &next));
        cr_assert(n == want.len[i] && memcmp(data, want.data[i], n) == 0, "record %d", i);
        if (i % 2 == 0)
            cr_expect_eq(next, offs[i + 1]);
        if (i == 3) {
            OK(qf_tfrecord_random_reader_read(rr, offs[11], &data, &n, NULL));
            cr_assert_eq(n, 70000);
        }
    }
    /* The offsets are the TFRecordReader's keys. */
    expect_read(p, QF_COMPRESSION_NONE, NULL, 0, &want);
    qf_tfrecord_random_reader_free(rr);
    recs_free(&want);
}

Test(tfrecord, random_reader_bad_offsets_are_clear_errors_and_the_reader_stays_usable)
{
    tdir d;
    tdir_make(&d);
    const char *p = tpath(&d, "f");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(p, NULL, &w));
    OK(qf_tfrecord_writer_write(w, "first", 5));
    OK(qf_tfrecord_writer_write(w, "second", 6));
    OK(qf_tfrecord_writer_close(w));
    qf_tfrecord_random_reader *rr = NULL;
    OK(qf_tfrecord_random_reader_open(p, NULL, &rr));
    const char *data = NULL;
    size_t n = 77;
    uint64_t next = 99;
    REFUSED(qf_tfrecord_random_reader_read(rr, 43, &data, &n, &next), QF_OUT_OF_RANGE,
            "no record at offset 43 in '");
    EXPECT_MSG("it ends at 43");
    REFUSED(qf_tfrecord_random_reader_read(rr, 1000, &data, &n, &next), QF_OUT_OF_RANGE,
            "no record at offset 1000");
    REFUSED(qf_tfrecord_random_reader_read(rr, UINT64_MAX, &data, &n, &next), QF_OUT_OF_RANGE,
            "no record at offset 18446744073709551615");
    /* Inside a record: the length's CRC does not match. */
    for (uint64_t off = 1; off < 43; off++) {
        if (off == 21)
            continue;
        qf_code rc = qf_tfrecord_random_reader_read(rr, off, &data, &n, &next);
        cr_assert_eq(rc, QF_DATA_LOSS, "offset %llu: %s", (unsigned long long)off,
                     qf_last_message());
        cr_expect(has(qf_last_message(), "corrupted record at") ||
                      has(qf_last_message(), "truncated record at"),
                  "%s", qf_last_message());
    }
    REFUSED(qf_tfrecord_random_reader_read(rr, 5, &data, &n, &next), QF_DATA_LOSS,
            "corrupted record at 5 in '");
    EXPECT_MSG("5 is not the start of a record");
    REFUSED(qf_tfrecord_random_reader_read(rr, 35, &data, &n, &next), QF_DATA_LOSS,
            "truncated record at 35"); /* 8 bytes left: no header */
    cr_expect_null(data);
    cr_expect_eq(n, 77);
    cr_expect_eq(next, 99, "outputs untouched on failure");
    OK(qf_tfrecord_random_reader_read(rr, 21, &data, &n, &next));
    cr_expect_str_eq(data, "second");
    cr_expect_eq(next, 43);
    /* Damaged data; a cut record; a huge CRC-valid length. */
    size_t fn;
    char *b = slurp_file(p, &fn);
    b[21 + 12 + 2] ^= 1;
    write_bytes(&d, "f", b, fn);
    REFUSED(qf_tfrecord_random_reader_read(rr, 21, &data, &n, &next), QF_DATA_LOSS,
            "corrupted record at 21 in '");
    EXPECT_MSG("data checksum mismatch");
    b[21 + 12 + 2] ^= 1;
    write_bytes(&d, "f", b, fn - 1);
    REFUSED(qf_tfrecord_random_reader_read(rr, 21, &data, &n, &next), QF_DATA_LOSS,
            "truncated record at 21");
    /* The file grows back: the same reader sees it. */
    write_bytes(&d, "f", b, fn);
    OK(qf_tfrecord_random_reader_read(rr, 21, &data, &n, &next));
    cr_expect_str_eq(data, "second");
    qf_tfrecord_random_reader_free(rr);
    unsigned char h[12 + 20000];
    memset(h, 0, sizeof(h));
    huge_header(h, (uint64_t)16 << 30);
    p = write_bytes(&d, "huge", h, sizeof(h));
    OK(qf_tfrecord_random_reader_open(p, NULL, &rr));
    REFUSED(qf_tfrecord_random_reader_read(rr, 0, &data, &n, &next), QF_DATA_LOSS,
            "over max_record_bytes");
    qf_tfrecord_random_reader_free(rr);
    qf_tfrecord_options o = {.max_record_bytes = (uint64_t)1 << 40};
    OK(qf_tfrecord_random_reader_open(p, &o, &rr));
    REFUSED(qf_tfrecord_random_reader_read(rr, 0, &data, &n, &next), QF_DATA_LOSS,
            "truncated record at 0"); /* beyond the file: never allocated */
    qf_tfrecord_random_reader_free(rr);
    free(b);
    tdir_remove(&d);
}

Test(tfrecord, random_reader_refuses_compressed_files_pipes_and_directories)
{
    tdir d;
    tdir_make(&d);
    qf_tfrecord_random_reader *rr = NULL;
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_GZIP};
    REFUSED(qf_tfrecord_random_reader_open(fixture("py_gzip.tfrecord"), &o, &rr),
            QF_INVALID_ARGUMENT, "random access needs an uncompressed file: a GZIP stream");
    o.compression = QF_COMPRESSION_ZLIB;
    REFUSED(qf_tfrecord_random_reader_open(fixture("py_zlib.tfrecord"), &o, &rr),
            QF_INVALID_ARGUMENT, "a ZLIB stream");
    o.compression = QF_COMPRESSION_ZSTD;
    REFUSED(qf_tfrecord_random_reader_open(fixture("py_zstd.tfrecord"), &o, &rr),
            QF_INVALID_ARGUMENT, "a ZSTD stream");
    o.compression = (qf_compression)5;
    REFUSED(qf_tfrecord_random_reader_open(fixture("py_plain.tfrecord"), &o, &rr),
            QF_INVALID_ARGUMENT, "unknown compression 5");
    const char *fifo = tpath(&d, "fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    REFUSED(qf_tfrecord_random_reader_open(fifo, NULL, &rr), QF_FAILED_PRECONDITION,
            "is not a regular file");
    REFUSED(qf_tfrecord_random_reader_open(d.path, NULL, &rr), QF_FAILED_PRECONDITION,
            "is not a regular file");
    REFUSED(qf_tfrecord_random_reader_open(tpath(&d, "none"), NULL, &rr), QF_NOT_FOUND,
            "No such file or directory");
    cr_expect_null(rr);
    tdir_remove(&d);
}

/* Item 11 (c): TensorFlow's TFRecordOptions takes "", "ZLIB", "GZIP" and
 * "ZSTD" (testReadZstdFiles); anything else is refused, naming the types. */
Test(tfrecord, other_compression_types_are_refused_naming_the_tfrecord_compression_types)
{
    qf_compression c = QF_COMPRESSION_NONE;
    const char *bad[] = {"zstd", "SNAPPY", "LZ4", "gzip", " GZIP", "ZSTD "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[32];
        snprintf(want, sizeof(want), "unknown compression type '%s'", bad[i]);
        REFUSED(qf_compression_parse(bad[i], &c), QF_INVALID_ARGUMENT, want);
        EXPECT_MSG("\"ZLIB\", \"GZIP\" and \"ZSTD\"");
        cr_expect_eq(c, QF_COMPRESSION_NONE);
    }
}

/* ========================================================== ZSTD frames */

/* Damage inside a zstd(1) file: DATA_LOSS naming the file (zstd's own
 * check, or a record's CRC), then the reader goes on with the next file. */
Test(tfrecord, corrupt_zstd_frame_is_data_loss_with_file_then_next_file)
{
    expect_damage_then_next_file("py_zstd.tfrecord", QF_COMPRESSION_ZSTD, 1, 3, 8);
}

Test(tfrecord, not_zstd_at_all_is_corrupt_at_compressed_offset_0)
{
    expect_not_compressed_at_all(QF_COMPRESSION_ZSTD, "ZSTD", "at compressed offset 0");
}

Test(tfrecord, every_truncation_of_a_zstd_file_is_data_loss_or_a_clean_prefix)
{
    expect_every_truncation("py_zstd.tfrecord", QF_COMPRESSION_ZSTD, 1);
}

/* Frames one after another read as one stream, as zstd(1) reads them: a
 * frame of qflow's writer, one of libzstd's one-shot compressor, and a
 * skippable frame between them. */
Test(tfrecord, concatenated_zstd_frames_read_as_one_stream)
{
    tdir d;
    tdir_make(&d);
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_ZSTD};
    const char *a = tpath(&d, "a.zst"), *plain = tpath(&d, "b.tfrecord");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(a, &o, &w));
    OK(qf_tfrecord_writer_write(w, "one", 3));
    OK(qf_tfrecord_writer_close(w));
    OK(qf_tfrecord_writer_open(plain, NULL, &w));
    OK(qf_tfrecord_writer_write(w, "two", 3));
    OK(qf_tfrecord_writer_write(w, "three", 5));
    OK(qf_tfrecord_writer_close(w));
    size_t an, pn;
    char *ab = slurp_file(a, &an);
    char *pb = slurp_file(plain, &pn);
    /* A skippable frame: magic 0x184D2A50, a 4-byte size, that many bytes. */
    const unsigned char skip[] = {0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'x', 'y', 'z'};
    size_t bound = ZSTD_compressBound(pn);
    char *all = malloc(an + sizeof(skip) + bound);
    memcpy(all, ab, an);
    memcpy(all + an, skip, sizeof(skip));
    size_t bn = ZSTD_compress(all + an + sizeof(skip), bound, pb, pn, 3);
    cr_assert(!ZSTD_isError(bn), "%s", ZSTD_getErrorName(bn));
    const char *cat = write_bytes(&d, "cat.zst", all, an + sizeof(skip) + bn);
    qf_tfrecord_iterator *it = NULL;
    OK(qf_tfrecord_iterator_open(cat, &o, &it));
    const char *data;
    size_t n;
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "one");
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "two");
    OK(qf_tfrecord_iterator_next(it, &data, &n));
    cr_expect_str_eq(data, "three");
    cr_expect_eq(qf_tfrecord_iterator_offset(it), 3 * 16 + 11);
    REFUSED(qf_tfrecord_iterator_next(it, &data, &n), QF_OUT_OF_RANGE, "end of");
    qf_tfrecord_iterator_free(it);
    free(all);
    free(ab);
    free(pb);
    tdir_remove(&d);
}

/* The writer's file is a zstd frame any zstd decoder takes: libzstd's
 * one-shot decompressor gives back the plain writer's bytes. */
Test(tfrecord, zstd_writer_output_decompresses_to_the_plain_file)
{
    tdir d;
    tdir_make(&d);
    recs want = expected_records();
    const char *z = tpath(&d, "w.zst");
    qf_tfrecord_options o = {.compression = QF_COMPRESSION_ZSTD};
    write_all_recs(z, &o, &want);
    size_t zn, pn;
    char *zb = slurp_file(z, &zn);
    char *pb = slurp_file(fixture("py_plain.tfrecord"), &pn);
    char *out = malloc(pn + 1);
    size_t got = ZSTD_decompress(out, pn + 1, zb, zn);
    cr_assert(!ZSTD_isError(got), "%s", ZSTD_getErrorName(got));
    cr_assert_eq(got, pn);
    cr_expect(memcmp(out, pb, pn) == 0, "the decompressed file differs from the plain one");
    cr_expect_lt(zn, pn / 4, "ZSTD compressed %zu bytes to %zu", pn, zn);
    free(out);
    free(zb);
    free(pb);
    recs_free(&want);
    tdir_remove(&d);
}
