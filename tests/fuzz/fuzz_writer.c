/* fuzz_writer.c - the TFRecord writer fed random records, then read back:
 * the first 4 bytes pick compression, level, flush mode and buffers; the
 * rest is cut into records by its own length bytes. The file must read back
 * byte-identical through both the iterator and a TFRecordReader, with the
 * reader's keys the running offsets. */
#include "fuzz_common.h"

#define MAXREC 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    static const int levels[] = {0, 1, 6, 9, QF_ZLIB_LEVEL_STORED};
    qf_tfrecord_options o = {.compression = (qf_compression)(data[0] % 4)};
    o.zlib.compression_level = levels[(data[0] >> 2) % 5];
    o.zlib.flush_mode = data[1] % 4;
    o.zlib.output_buffer_size = 1 + data[2] % 64;
    o.zlib.input_buffer_size = 1 + data[3] % 64;
    o.zlib.window_bits = data[1] & 0x80 ? 8 + (data[1] >> 4) % 8 : 0; /* 8 too: issue 24 */
    if (o.compression == QF_COMPRESSION_ZSTD) {        /* the options a ZSTD stream takes */
        static const int zstd_levels[] = {0, 1, 2, 3}; /* 19 would make each run slow */
        static const int zstd_flush[] = {0, 2, 3, 0};
        o.zlib.compression_level = zstd_levels[(data[0] >> 2) % 4];
        o.zlib.flush_mode = zstd_flush[data[1] % 4];
        o.zlib.window_bits = 0;
    }
    /* Records: a length byte then that many bytes, until the input ends. */
    const uint8_t *rec[MAXREC];
    size_t len[MAXREC];
    int n = 0;
    size_t i = 4;
    while (i < size && n < MAXREC) {
        size_t l = data[i++];
        if (l > size - i)
            l = size - i;
        rec[n] = data + i;
        len[n] = l;
        n++;
        i += l;
    }
    char path[] = "/tmp/qf_fuzz_writer_XXXXXX";
    int fd = mkstemp(path);
    check(fd >= 0);
    close(fd);
    qf_tfrecord_writer *w = NULL;
    qf_code rc = qf_tfrecord_writer_open(path, &o, &w);
    if (rc != QF_OK) {
        check(rc == QF_INVALID_ARGUMENT); /* a window zlib refuses */
        unlink(path);
        return 0;
    }
    for (int k = 0; k < n; k++) {
        check(qf_tfrecord_writer_write(w, rec[k], len[k]) == QF_OK);
        if (data[2] & 0x80 && k % 3 == 1)
            check(qf_tfrecord_writer_flush(w) == QF_OK);
    }
    check(qf_tfrecord_writer_close(w) == QF_OK);

    qf_tfrecord_iterator *it = NULL;
    check(qf_tfrecord_iterator_open(path, &o, &it) == QF_OK);
    for (int k = 0; k < n; k++) {
        const char *d;
        size_t dn;
        check(qf_tfrecord_iterator_next(it, &d, &dn) == QF_OK);
        check(dn == len[k] && (dn == 0 || memcmp(d, rec[k], dn) == 0));
    }
    const char *d;
    size_t dn;
    check(qf_tfrecord_iterator_next(it, &d, &dn) == QF_OUT_OF_RANGE);
    qf_tfrecord_iterator_free(it);

    qf_reader_options ro = {.kind = QF_READER_TFRECORD,
                            .compression = o.compression,
                            .zlib = o.zlib,
                            .buffer_bytes = 16 + data[3] % 32};
    qf_reader *r = NULL;
    check(qf_reader_new(&ro, &r) == QF_OK);
    qf_queue *q = fuzz_work(path, 1);
    qf_record out = QF_RECORD_INIT;
    uint64_t off = 0;
    for (int k = 0; k < n; k++) {
        check(qf_reader_read(r, q, &out) == QF_OK);
        check(out.value_len == len[k] && (len[k] == 0 || !memcmp(out.value, rec[k], len[k])));
        char key[400];
        snprintf(key, sizeof(key), "%s:%llu", path, (unsigned long long)off);
        check(strcmp(out.key, key) == 0);
        off += 16 + len[k];
    }
    check(qf_reader_read(r, q, &out) == QF_OUT_OF_RANGE);
    qf_record_clear(&out);
    qf_reader_free(r);
    qf_queue_unref(q);
    unlink(path);
    return 0;
}
