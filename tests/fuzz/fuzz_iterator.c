/* fuzz_iterator.c - tf_record_iterator over arbitrary bytes: the first byte
 * picks the compression and the zlib buffers, the rest is the file. Every
 * record returned is NUL-terminated; the end is OUT_OF_RANGE, damage
 * DATA_LOSS (then OUT_OF_RANGE for ever). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    qf_tfrecord_options o = {.compression = (qf_compression)(data[0] % 3),
                             .zlib = {.input_buffer_size = 1 + (data[0] >> 2) % 16,
                                      .output_buffer_size = 1 + (data[0] >> 4)}};
    const char *path = fuzz_file(data + 1, size - 1);
    qf_tfrecord_iterator *it = NULL;
    check(qf_tfrecord_iterator_open(path, &o, &it) == QF_OK);
    bool ended = false;
    for (int i = 0; i < 100000; i++) {
        const char *d = NULL;
        size_t n = 0;
        qf_code rc = qf_tfrecord_iterator_next(it, &d, &n);
        if (ended) {
            check(rc == QF_OUT_OF_RANGE);
            break;
        }
        check(rc == QF_OK || rc == QF_OUT_OF_RANGE || rc == QF_DATA_LOSS);
        if (rc == QF_OK)
            check(d && d[n] == '\0');
        else
            ended = true;
    }
    qf_tfrecord_iterator_free(it);
    return 0;
}
