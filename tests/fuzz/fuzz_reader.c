/* fuzz_reader.c - one libFuzzer target per reader format, chosen at build
 * time with -DFUZZ_FORMAT=...: the input's first bytes pick the reader's
 * parameters (buffer size, sizes, zlib buffers), the rest is the file. The
 * reader is also saved and restored mid-way, and the restored reader must
 * produce exactly what the original does. */
#include "fuzz_common.h"

enum { F_TEXT, F_FIXED, F_TFRECORD, F_WHOLE };

#ifndef FUZZ_FORMAT
#error "build with -DFUZZ_FORMAT=F_TEXT / F_FIXED / F_TFRECORD / F_WHOLE"
#endif
#ifndef FUZZ_COMPRESSION
#define FUZZ_COMPRESSION QF_COMPRESSION_NONE
#endif

#define PARAM_BYTES 6

static void options_from(const uint8_t *p, qf_reader_options *o)
{
    memset(o, 0, sizeof(*o));
    o->buffer_bytes = 16 + p[0] % 64;
    o->compression = FUZZ_COMPRESSION;
    o->zlib.input_buffer_size = 1 + p[1] % 32;
    o->zlib.output_buffer_size = 1 + p[2] % 32;
    switch (FUZZ_FORMAT) {
    case F_TEXT:
        o->kind = QF_READER_TEXT_LINE;
        o->skip_header_lines = p[3] % 3;
        break;
    case F_FIXED:
        o->kind = QF_READER_FIXED_LENGTH_RECORD;
        o->record_bytes = 1 + p[3] % 16;
        o->header_bytes = p[4] % 8;
        o->footer_bytes = p[5] % 8;
        o->hop_bytes = (p[4] ^ p[5]) % 5;
        break;
    case F_TFRECORD:
        o->kind = QF_READER_TFRECORD;
        o->max_record_bytes = p[3] & 1 ? 1 + p[4] * 64u : 0;
        break;
    default:
        o->kind = QF_READER_WHOLE_FILE;
        o->max_record_bytes = p[3] & 1 ? 1 + p[4] * 16u : 0;
        o->compression = QF_COMPRESSION_NONE;
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PARAM_BYTES)
        return 0;
    qf_reader_options o;
    options_from(data, &o);
    const char *path = fuzz_file(data + PARAM_BYTES, size - PARAM_BYTES);

    qf_reader *r = NULL;
    check(qf_reader_new(&o, &r) == QF_OK);
    qf_queue *q = fuzz_work(path, 2);
    long all = fuzz_drain(r, q);
    qf_reader_free(r);
    qf_queue_unref(q);

    /* Read k records, save, restore on a fresh reader, read on: the same
     * number of records in all (the file is unchanged). */
    long k = data[0] % 4;
    r = NULL;
    check(qf_reader_new(&o, &r) == QF_OK);
    q = fuzz_work(path, 2);
    qf_record rec = QF_RECORD_INIT;
    long got = 0;
    bool failed = false;
    while (got < k) {
        qf_code rc = qf_reader_read(r, q, &rec);
        check(fuzz_code_ok(rc));
        if (rc == QF_OUT_OF_RANGE)
            break;
        if (rc == QF_OK)
            got++;
        else
            failed = true;
    }
    void *st = NULL;
    size_t st_len = 0;
    check(qf_reader_serialize_state(r, &st, &st_len) == QF_OK);
    qf_reader *r2 = NULL;
    check(qf_reader_new(&o, &r2) == QF_OK);
    check(qf_reader_restore_state(r2, st, st_len) == QF_OK);
    got += fuzz_drain(r2, q);
    if (!failed && o.kind != QF_READER_WHOLE_FILE && got != all) {
        fprintf(stderr, "resume after %ld records: %ld records in all, %ld without a restore\n", k,
                got, all);
        check(got == all);
    }
    free(st);
    qf_record_clear(&rec);
    qf_reader_free(r);
    qf_reader_free(r2);
    qf_queue_unref(q);
    return 0;
}
