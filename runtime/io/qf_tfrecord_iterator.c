/* qf_tfrecord_iterator.c - tf_record_iterator: the records of one file,
 * read by a TFRecordReader's machinery (same framing checks, compression,
 * length bound, pipes) with the file as its only work item: no queue.
 *
 * As today's TensorFlow iterator does, it keeps its place after the end of
 * the file or a failure: the file stays open, `good` is the offset after
 * the last record returned, and the next call reads again from there, so
 * records appended later come out and a record that was cut short is
 * returned once it is whole. A pipe cannot be gone back on: there the
 * first end or failure is final.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "qf_reader-impl.h"
#include "qf_status-impl.h"
#include "qf_tfrecord.h"

struct qf_tfrecord_iterator {
    qf_reader *r;
    qf_record rec;
    uint64_t good; /* stream offset after the last record returned */
    bool stopped;  /* the last call ended or failed: go back to `good` first */
};

qf_code qf_tfrecord_iterator_open(const char *path, const qf_tfrecord_options *opts,
                                  qf_tfrecord_iterator **ret_it)
{
    if (!path || !ret_it)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", path ? "ret_it" : "path");
    qf_reader_options ro = {.kind = QF_READER_TFRECORD, .name = "tf_record_iterator"};
    if (opts) {
        ro.compression = opts->compression;
        ro.zlib = opts->zlib;
        ro.max_record_bytes = opts->max_record_bytes;
    }
    qf_tfrecord_iterator *it = calloc(1, sizeof(*it));
    if (!it)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a TFRecord iterator");
    qf_code rc = qf_reader_new(&ro, &it->r);
    if (rc == QF_OK)
        rc = qf__reader_begin(it->r, path);
    if (rc != QF_OK) {
        qf_reader_free(it->r);
        free(it);
        return rc;
    }
    *ret_it = it;
    return QF_OK;
}

static qf_code end_of(const qf_tfrecord_iterator *it)
{
    return qf_set_error(QF_OUT_OF_RANGE, "end of '%s'", it->r->work);
}

qf_code qf_tfrecord_iterator_next_until(qf_tfrecord_iterator *it, qf_deadline deadline,
                                        const char **ret_data, size_t *ret_len)
{
    if (!it || !ret_data || !ret_len)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !it         ? "iterator"
                            : !ret_data ? "ret_data"
                                        : "ret_len");
    qf_reader *r = it->r;
    if (it->stopped) {
        if (r->rb.nonblock)
            return end_of(it); /* a pipe: what was read is gone */
        bool ok = false;
        qf_code rc = qf__reader_rewind_item(r, it->good, &ok);
        if (rc != QF_OK)
            return rc;
        if (!ok)
            return qf_set_error(QF_OUT_OF_RANGE,
                                "end of '%s' (it is now shorter than the %" PRIu64
                                " bytes already read)",
                                r->work, it->good);
        it->stopped = false;
    }
    bool at_end = false;
    qf_code rc = qf__reader_next_in_item(r, deadline, &it->rec, &at_end);
    if (rc == QF_DEADLINE_EXCEEDED)
        return rc; /* mid-record on a pipe: the reader keeps what it has */
    if (rc != QF_OK) {
        it->stopped = true;
        return rc;
    }
    if (at_end) {
        it->stopped = true;
        return end_of(it);
    }
    it->good = qf__rbuf_offset(&r->rb);
    *ret_data = it->rec.value;
    *ret_len = it->rec.value_len;
    return QF_OK;
}

qf_code qf_tfrecord_iterator_next(qf_tfrecord_iterator *it, const char **ret_data, size_t *ret_len)
{
    return qf_tfrecord_iterator_next_until(it, QF_FOREVER, ret_data, ret_len);
}

uint64_t qf_tfrecord_iterator_offset(const qf_tfrecord_iterator *it)
{
    if (!it) {
        qf__set_error_static(QF_INVALID_ARGUMENT,
                             "qf_tfrecord_iterator_offset: iterator (it) is NULL");
        return 0;
    }
    return it->good;
}

void qf_tfrecord_iterator_free(qf_tfrecord_iterator *it)
{
    if (!it)
        return;
    qf_reader_free(it->r);
    qf_record_clear(&it->rec);
    free(it);
}
