/* test_tfrecord_runs.c - TFRecordReader records handed to batch queues as
 * runs (issue 29).
 *
 * A TFRecordReader feeding qf_batch() cuts the records lying whole in its
 * read buffer out of it in place, both checksums checked there, as row
 * slots (queues/tensor/qf_strblock-impl.h); a record crossing the end of the
 * buffer is cut out of the next one, and a record longer than the buffer, or
 * a damaged one, goes through the single-record path. These tests write
 * files with the library's writer and compare what comes out of the batch,
 * record by record and in order, with what was written (the key, as
 * TensorFlow makes it: "<file>:<offset of the record>"):
 *
 *   - record ends at every offset of the read buffer (lengths 0, 1, 2, ...
 *     up past twice its size: buffers of 16, 17, 64 and 4096 bytes and the
 *     default), empty records, records longer than the buffer;
 *   - the same through GZIP and ZLIB streams (offsets of the inflated
 *     stream);
 *   - a damaged record after good ones in the same buffer: the good ones
 *     come out, then the pipeline reports DATA_LOSS at the damaged one's
 *     offset (spec 186's counters agree).
 *
 * Nothing sleeps: batches are taken until OUT_OF_RANGE, with a deadline
 * only a broken run reaches.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#define QFT_RT_NAME "tfr_runs"
#define QFT_SOON_S 60
#include "qf_test.h"
#include "qf_test_io.h"

#ifndef QF_TSAN_CRITERION_SHIM_H /* the in-process TSan runner has no timeouts */
TestSuite(tfrecord_runs, .timeout = 240);
#endif

/* What one file must yield, in order. */
typedef struct rec {
    char *v;
    size_t len;
    uint64_t off; /* of the record in the (inflated) stream */
} rec;

typedef struct tfr {
    const char *path;
    rec *r;
    size_t n, cap;
    uint64_t end; /* stream bytes so far */
} tfr;

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void tfr_add(tfr *f, qf_tfrecord_writer *w, const char *v, size_t len)
{
    OK(qf_tfrecord_writer_write(w, v, len));
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 256;
        f->r = realloc(f->r, f->cap * sizeof(*f->r));
        cr_assert_not_null(f->r);
    }
    char *c = malloc(len + 1);
    cr_assert_not_null(c);
    if (len)
        memcpy(c, v, len);
    f->r[f->n++] = (rec){c, len, f->end};
    f->end += 16 + len;
}

static void tfr_free(tfr *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->r[i].v);
    free(f->r);
    memset(f, 0, sizeof(*f));
}

/* Records of lengths 0 .. top, three rounds (so their ends fall on every
 * offset of a buffer of up to top / 2 bytes on both sides of a refill),
 * bytes of every value including NUL and '\n', then a few records longer
 * than any buffer tested but the default, and a last empty record. */
static void write_offsets(tfr *f, const char *path, qf_compression comp, size_t top)
{
    memset(f, 0, sizeof(*f));
    f->path = path;
    qf_tfrecord_writer *w = NULL;
    qf_tfrecord_options o = {.compression = comp};
    OK(qf_tfrecord_writer_open(path, &o, &w));
    uint64_t seed = 0x2545f4914f6cdd1dull + top;
    static char v[300000];
    for (int round = 0; round < 3; round++)
        for (size_t len = 0; len <= top; len++) {
            for (size_t i = 0; i < len; i++)
                v[i] = (char)rnd(&seed);
            tfr_add(f, w, v, len);
        }
    static const size_t longs[] = {5000, 70000, 262144 - 16, 262144, 300000};
    for (size_t k = 0; k < sizeof(longs) / sizeof(longs[0]); k++) {
        for (size_t i = 0; i < longs[k]; i++)
            v[i] = (char)rnd(&seed);
        tfr_add(f, w, v, longs[k]);
        tfr_add(f, w, v, 3); /* short ones right after a long one */
    }
    tfr_add(f, w, "", 0);
    OK(qf_tfrecord_writer_close(w));
}

typedef struct run_opts {
    size_t buffer; /* 0: the default */
    int threads;   /* reader tasks */
    int64_t batch;
    qf_compression comp;
} run_opts;

typedef struct run_result {
    size_t next;      /* records of f matched, in order */
    qf_code join_rc;  /* the Coordinator's */
    char msg[256];    /* its message */
    int64_t produced; /* spec 186, one reader only */
} run_result;

/* One file through string_input_producer -> TFRecordReader(s) -> batch;
 * every record must match f's next one (one reader, FIFO: in order). */
static run_result run_file(const tfr *f, const run_opts *o)
{
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    qf_queue *files = NULL;
    qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
    OK(qf_string_input_producer(s, &f->path, 1, &po, &files));
    qf_reader_options ro = {
        .kind = QF_READER_TFRECORD, .buffer_bytes = o->buffer, .compression = o->comp};
    qf_reader *reader = NULL;
    qf_batch_source *src = NULL;
    if (o->threads == 0) {
        OK(qf_reader_new(&ro, &reader));
        OK(qf_batch_source_reader(reader, files, &src));
    } else {
        OK(qf_batch_source_reader_options(&ro, files, &src));
    }
    qf_batcher *b = NULL;
    qf_batch_options bo = {.num_threads = o->threads ? o->threads : 1,
                           .capacity = 4 * o->batch,
                           .allow_smaller_final_batch = true};
    OK(qf_batch(s, src, o->batch, &bo, &b));
    started st = start(rt, c, s);
    run_result res = {0};
    size_t plen = strlen(f->path);
    long errors = 0;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
        const qf_tensor *k = qf_element_get(e, 0), *v = qf_element_get(e, 1);
        int64_t n = qf_tensor_num_elements(v);
        cr_assert_eq(qf_tensor_num_elements(k), n);
        for (int64_t i = 0; i < n; i++) {
            size_t kl = 0, vl = 0;
            const char *ks = qf_tensor_string(k, i, &kl);
            const char *vs = qf_tensor_string(v, i, &vl);
            if (res.next >= f->n) {
                if (errors++ < 5)
                    cr_expect(0, "a record after the last one written");
                continue;
            }
            const rec *want = &f->r[res.next++];
            char key[512];
            int wk = snprintf(key, sizeof(key), "%s:%" PRIu64, f->path, want->off);
            bool ok = kl == (size_t)wk && memcmp(ks, key, kl) == 0 && ks[kl] == '\0' &&
                      vl == want->len && (vl == 0 || memcmp(vs, want->v, vl) == 0) &&
                      (vl == 0 || vs[vl] == '\0');
            if (!ok && errors++ < 5)
                cr_expect(
                    0, "record %zu (offset %" PRIu64 ", %zu bytes): got key \"%.*s\" and %zu bytes",
                    res.next - 1, want->off, want->len, (int)(kl < 200 ? kl : 200), ks, vl);
        }
        qf_element_free(e);
    }
    cr_expect_eq(errors, 0, "%ld records wrong", errors);
    qf_coord_request_stop(c, NULL);
    res.join_rc = qf_coord_join(c, NULL, 0, 10.0, false, NULL);
    snprintf(res.msg, sizeof(res.msg), "%s", qf_last_message());
    join_all(&st);
    if (reader)
        res.produced = qf_reader_num_records_produced(reader);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(files);
    (void)plen;
    return res;
}

static void expect_all(const tfr *f, const run_opts *o)
{
    run_result res = run_file(f, o);
    cr_expect_eq(res.join_rc, QF_OK, "join: %s", res.msg);
    cr_expect_eq(res.next, f->n, "%zu of %zu records (buffer %zu, batch %" PRId64 ")", res.next,
                 f->n, o->buffer, o->batch);
    if (o->threads == 0)
        cr_expect_eq(res.produced, (int64_t)f->n);
}

static void offsets_case(qf_compression comp)
{
    static const size_t bufs[] = {16, 17, 64, 4096, 0};
    for (size_t b = 0; b < sizeof(bufs) / sizeof(bufs[0]); b++) {
        tdir d;
        tdir_make(&d);
        tfr f;
        size_t top = bufs[b] && 2 * bufs[b] + 3 < 300 ? 2 * bufs[b] + 3 : 300;
        write_offsets(&f, tpath(&d, "offsets.tfrecord"), comp, top);
        expect_all(&f, &(run_opts){.buffer = bufs[b], .threads = 0, .batch = 64, .comp = comp});
        expect_all(&f, &(run_opts){.buffer = bufs[b], .threads = 1, .batch = 1000, .comp = comp});
        tfr_free(&f);
        tdir_remove(&d);
    }
}

Test(tfrecord_runs, a_record_ends_at_every_offset_of_a_read_block)
{
    offsets_case(QF_COMPRESSION_NONE);
}

Test(tfrecord_runs, gzip_and_zlib_records_at_every_offset_of_a_read_block)
{
    offsets_case(QF_COMPRESSION_GZIP);
    offsets_case(QF_COMPRESSION_ZLIB);
}

Test(tfrecord_runs, many_files_four_readers_every_record_once)
{
    /* Four readers over eight files of 256-byte records (the bench's
     * shape, smaller): every record exactly once, keys naming its file. */
    tdir d;
    tdir_make(&d);
    enum { FILES = 8, PER = 3000 };
    tfr f[FILES];
    const char *paths[FILES];
    uint64_t seed = 7;
    char v[256];
    for (int i = 0; i < FILES; i++) {
        char name[32];
        snprintf(name, sizeof(name), "part-%d.tfrecord", i);
        memset(&f[i], 0, sizeof(f[i]));
        f[i].path = paths[i] = strdup(tpath(&d, name));
        qf_tfrecord_writer *w = NULL;
        OK(qf_tfrecord_writer_open(paths[i], NULL, &w));
        for (int r = 0; r < PER; r++) {
            for (size_t k = 0; k < sizeof(v); k++)
                v[k] = (char)rnd(&seed);
            tfr_add(&f[i], w, v, sizeof(v));
        }
        OK(qf_tfrecord_writer_close(w));
    }
    qf_runtime *rt = mkrt(2);
    qf_scope *s = mkscope();
    qf_coord *c = mkcoord();
    qf_queue *files = NULL;
    qf_input_producer_options po = {.num_epochs = 1, .shuffle = QF_SHUFFLE_OFF};
    OK(qf_string_input_producer(s, paths, FILES, &po, &files));
    qf_reader_options ro = {.kind = QF_READER_TFRECORD};
    qf_batch_source *src = NULL;
    OK(qf_batch_source_reader_options(&ro, files, &src));
    qf_batcher *b = NULL;
    OK(qf_batch(
        s, src, 1024,
        &(qf_batch_options){.num_threads = 4, .capacity = 4096, .allow_smaller_final_batch = true},
        &b));
    started st = start(rt, c, s);
    unsigned char *seen[FILES];
    for (int i = 0; i < FILES; i++)
        seen[i] = calloc(PER, 1);
    long total = 0, bad = 0;
    for (;;) {
        qf_element *e = NULL;
        qf_code rc = qf_batcher_next_until(b, soon(), &e);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "%s: %s", qf_code_name(rc), qf_last_message());
        const qf_tensor *k = qf_element_get(e, 0), *vt = qf_element_get(e, 1);
        for (int64_t i = 0; i < qf_tensor_num_elements(vt); i++) {
            size_t kl = 0, vl = 0;
            const char *ks = qf_tensor_string(k, i, &kl);
            const char *vs = qf_tensor_string(vt, i, &vl);
            const char *colon = memrchr(ks, ':', kl);
            int fi = -1;
            for (int j = 0; colon && j < FILES; j++)
                if (strlen(paths[j]) == (size_t)(colon - ks) &&
                    memcmp(paths[j], ks, kl - strlen(colon)) == 0)
                    fi = j;
            uint64_t off = colon ? strtoull(colon + 1, NULL, 10) : 0;
            size_t idx = (size_t)(off / (16 + 256));
            if (fi < 0 || off % (16 + 256) || idx >= PER || vl != 256 ||
                memcmp(vs, f[fi].r[idx].v, 256) != 0) {
                if (bad++ < 5)
                    cr_expect(0, "a wrong record: key \"%.*s\"", (int)kl, ks);
                continue;
            }
            seen[fi][idx]++;
            total++;
        }
        qf_element_free(e);
    }
    cr_expect_eq(bad, 0);
    cr_expect_eq(total, (long)FILES * PER);
    for (int i = 0; i < FILES; i++) {
        for (int r = 0; r < PER; r++)
            if (seen[i][r] != 1 && bad++ < 5)
                cr_expect(0, "%s record %d seen %d times", paths[i], r, seen[i][r]);
        free(seen[i]);
    }
    qf_coord_request_stop(c, NULL);
    cr_expect_eq(qf_coord_join(c, NULL, 0, 10.0, false, NULL), QF_OK, "%s", qf_last_message());
    join_all(&st);
    qf_batcher_free(b);
    qf_runtime_free(rt);
    qf_coord_free(c);
    qf_scope_free(s);
    qf_queue_unref(files);
    for (int i = 0; i < FILES; i++) {
        free((char *)paths[i]);
        f[i].path = NULL;
        tfr_free(&f[i]);
    }
    tdir_remove(&d);
}

/* Damage one byte of record `victim` (its data, or its length's checksum)
 * in a file of 100 records of 50 bytes: the records before it come out, in
 * order, then the Coordinator reports DATA_LOSS "corrupted record at
 * <its offset>". The default buffer holds the whole file, so the damaged
 * record lies whole in the buffer right after good ones. */
static void damaged_case(size_t victim, bool header)
{
    tdir d;
    tdir_make(&d);
    tfr f = {0};
    f.path = tpath(&d, "damaged.tfrecord");
    qf_tfrecord_writer *w = NULL;
    OK(qf_tfrecord_writer_open(f.path, NULL, &w));
    char v[50];
    for (int i = 0; i < 100; i++) {
        memset(v, 'a' + i % 26, sizeof(v));
        tfr_add(&f, w, v, sizeof(v));
    }
    OK(qf_tfrecord_writer_close(w));
    FILE *fp = fopen(f.path, "r+b");
    cr_assert_not_null(fp);
    long at = (long)f.r[victim].off + (header ? 9 : 12 + 20);
    cr_assert_eq(fseek(fp, at, SEEK_SET), 0);
    int ch = fgetc(fp);
    cr_assert_eq(fseek(fp, at, SEEK_SET), 0);
    fputc(ch ^ 0x5a, fp);
    cr_assert_eq(fclose(fp), 0);
    tfr good = f;
    good.n = victim; /* only these may come out */
    run_result res = run_file(&good, &(run_opts){.threads = 0, .batch = 10});
    cr_expect_eq(res.next, victim, "%zu records before the damaged one, expected %zu", res.next,
                 victim);
    cr_expect_eq(res.join_rc, QF_DATA_LOSS, "join: %s (%s)", qf_code_name(res.join_rc), res.msg);
    char want[64];
    snprintf(want, sizeof(want), "corrupted record at %" PRIu64, f.r[victim].off);
    cr_expect(has(res.msg, want), "\"%s\" lacks \"%s\"", res.msg, want);
    tfr_free(&f);
    tdir_remove(&d);
}

Test(tfrecord_runs, a_damaged_record_after_good_ones_in_the_same_buffer)
{
    damaged_case(37, false);
    damaged_case(37, true);
    damaged_case(0, false);
    damaged_case(99, true);
}
