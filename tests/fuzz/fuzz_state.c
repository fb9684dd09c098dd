/* fuzz_state.c - qf_reader_restore_state() on arbitrary bytes: a refusal is
 * INVALID_ARGUMENT and leaves the reader as it was; an accepted state must
 * serialize back to the same bytes and then read without crashing (its
 * work item names a file that may not exist: the open error is fine). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const qf_reader_kind kinds[] = {QF_READER_TEXT_LINE, QF_READER_FIXED_LENGTH_RECORD,
                                           QF_READER_IDENTITY, QF_READER_TFRECORD,
                                           QF_READER_WHOLE_FILE};
    qf_reader_options o = {.kind = kinds[data[0] % 5], .record_bytes = 3};
    qf_reader *r = NULL;
    check(qf_reader_new(&o, &r) == QF_OK);
    qf_code rc = qf_reader_restore_state(r, data + 1, size - 1);
    check(rc == QF_OK || rc == QF_INVALID_ARGUMENT);
    if (rc == QF_OK) {
        void *st = NULL;
        size_t n = 0;
        check(qf_reader_serialize_state(r, &st, &n) == QF_OK);
        check(n == size - 1 && memcmp(st, data + 1, n) == 0);
        free(st);
        qf_queue *q = fuzz_work("/nonexistent/qf_fuzz", 0);
        qf_record rec = QF_RECORD_INIT;
        for (int i = 0; i < 4; i++)
            (void)qf_reader_try_read(r, q, &rec);
        qf_record_clear(&rec);
        qf_queue_unref(q);
    } else {
        check(qf_reader_num_records_produced(r) == 0);
    }
    qf_reader_free(r);
    return 0;
}
