/* fuzz_iterator.c - tf_record_iterator over arbitrary bytes: the first byte
 * picks the compression and the zlib buffers, the rest is the file. Every
 * record returned is NUL-terminated and moves the offset on; the end is
 * OUT_OF_RANGE, damage DATA_LOSS, and as the file does not change, every
 * later call gives the same answer again (the iterator goes back to its
 * last good record and finds the same thing: issue 24). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    qf_tfrecord_options o = {.compression = (qf_compression)(data[0] % 4),
                             .zlib = {.input_buffer_size = 1 + (data[0] >> 2) % 16,
                                      .output_buffer_size = 1 + (data[0] >> 4)}};
    const char *path = fuzz_file(data + 1, size - 1);
    qf_tfrecord_iterator *it = NULL;
    check(qf_tfrecord_iterator_open(path, &o, &it) == QF_OK);
    for (int i = 0; i < 100000; i++) {
        const char *d = NULL;
        size_t n = 0;
        uint64_t before = qf_tfrecord_iterator_offset(it);
        qf_code rc = qf_tfrecord_iterator_next(it, &d, &n);
        check(rc == QF_OK || rc == QF_OUT_OF_RANGE || rc == QF_DATA_LOSS);
        if (rc == QF_OK) {
            check(d && d[n] == '\0');
            check(qf_tfrecord_iterator_offset(it) == before + 16 + n);
            continue;
        }
        check(qf_tfrecord_iterator_offset(it) == before);
        for (int again = 0; again < 2; again++) {
            check(qf_tfrecord_iterator_next(it, &d, &n) == rc);
            check(qf_tfrecord_iterator_offset(it) == before);
        }
        break;
    }
    qf_tfrecord_iterator_free(it);
    return 0;
}
