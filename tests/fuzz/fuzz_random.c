/* fuzz_random.c - the random-access TFRecord reader over arbitrary bytes
 * (uncompressed: the whole input is the file). Walking from offset 0 by
 * the next offsets gives exactly the records the iterator gives, and ends
 * the same way (OUT_OF_RANGE exactly at the file's end, DATA_LOSS at the
 * same offset); a read at any offset is OK with the next offset inside the
 * file, OUT_OF_RANGE exactly when the offset is at or past the end, or
 * DATA_LOSS; the first input byte picks max_record_bytes. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    qf_tfrecord_options o = {.max_record_bytes = data[0] & 1 ? 1 + data[0] : 0};
    const uint8_t *file = data + 1;
    size_t fsize = size - 1;
    const char *path = fuzz_file(file, fsize);
    qf_tfrecord_random_reader *rr = NULL;
    check(qf_tfrecord_random_reader_open(path, &o, &rr) == QF_OK);
    qf_tfrecord_iterator *it = NULL;
    check(qf_tfrecord_iterator_open(path, &o, &it) == QF_OK);
    uint64_t off = 0;
    for (;;) {
        const char *a = NULL, *b = NULL;
        size_t an = 0, bn = 0;
        uint64_t next = 0;
        qf_code ra = qf_tfrecord_random_reader_read(rr, off, &a, &an, &next);
        qf_code rb = qf_tfrecord_iterator_next(it, &b, &bn);
        check(ra == rb);
        if (ra != QF_OK) {
            check(ra == QF_DATA_LOSS || ra == QF_OUT_OF_RANGE);
            check((ra == QF_OUT_OF_RANGE) == (off == fsize));
            break;
        }
        check(an == bn && memcmp(a, b, an) == 0 && a[an] == '\0');
        check(next == off + 16 + an && next <= fsize);
        off = next;
    }
    /* Every offset of a short prefix, and a few past the end. */
    for (uint64_t at = 0; at < fsize + 3 && at < 80; at++) {
        const char *a = NULL;
        size_t an = 0;
        uint64_t next = 0;
        qf_code rc = qf_tfrecord_random_reader_read(rr, at, &a, &an, &next);
        if (rc == QF_OK)
            check(a[an] == '\0' && next == at + 16 + an && next <= fsize);
        else
            check((rc == QF_OUT_OF_RANGE) == (at >= fsize) &&
                  (rc == QF_OUT_OF_RANGE || rc == QF_DATA_LOSS));
    }
    qf_tfrecord_iterator_free(it);
    qf_tfrecord_random_reader_free(rr);
    return 0;
}
