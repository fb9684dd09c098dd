/* qf_reader_fixed.c - FixedLengthRecordReader (spec 197-201).
 *
 * Record r of a file starts at header_bytes + r * hop (hop_bytes, or
 * record_bytes when hop_bytes is 0) and is produced only when
 * record_bytes + footer_bytes bytes remain from its start (spec 199), which
 * is the same as TensorFlow's look-ahead cache: the footer is never
 * returned, overlapping records (hop < record_bytes, spec 200) share bytes,
 * and a tail too short for a record plus the footer is dropped silently.
 *
 * The read buffer is at least record_bytes + footer_bytes long (see
 * qf_reader_new), so the window of one record is always contiguous in it.
 * A file shorter than header_bytes gives no records (a documented
 * difference from the 1.x OutOfRange, see qf_reader.h).
 *
 * encoding ZLIB / GZIP (options.compression): the file is inflated as it is
 * read (qf_zstream.c) and header, records, hops and footer are all counted
 * in the decompressed stream, as TensorFlow's reader does.
 */
#include <string.h>

#include "qf_reader-impl.h"

static qf_code fixed_start(qf_reader *r)
{
    qf_code rc = qf__rbuf_open(&r->rb, r->work);
    if (rc != QF_OK)
        return rc;
    r->index = 0;
    r->skip_left = r->header_bytes;
    return QF_OK;
}

static qf_code fixed_next(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    qf__rbuf *rb = &r->rb;
    if (r->file_done) {
        *at_end = true;
        return QF_OK;
    }
    size_t rec_bytes = (size_t)r->record_bytes;
    size_t window = rec_bytes + (size_t)r->footer_bytes;
    bool ok = false;
    qf_code rc;
    if (r->skip_left > 0) {
        /* The header before record 0, the hop from the previous record's
         * start to this one's after it. Skipped here, not after producing
         * the previous record, so an I/O error cannot cost a record already
         * made; counted down, so a QF_PENDING resumes. A skip past the end
         * of the file just means there is no record. */
        rc = qf__rbuf_skip(rb, &r->skip_left, &ok);
        if (rc != QF_OK)
            return rc;
        if (!ok) {
            r->file_done = true;
            *at_end = true;
            return QF_OK;
        }
    }
    rc = qf__rbuf_ensure(rb, window, &ok);
    if (rc != QF_OK)
        return rc;
    if (!ok) {
        r->file_done = true;
        *at_end = true;
        return QF_OK;
    }
    rc = qf__record_reserve_value(rec, rec_bytes);
    if (rc != QF_OK)
        return rc;
    memcpy(rec->value, rb->buf + rb->pos, rec_bytes);
    rec->value[rec_bytes] = '\0';
    rec->value_len = rec_bytes;
    rc = qf__record_set_key_num(r, rec, r->index);
    if (rc != QF_OK)
        return rc;
    r->index++;
    r->skip_left = r->hop_bytes;
    *produced = true;
    return QF_OK;
}

static void fixed_finish(qf_reader *r)
{
    qf__rbuf_close(&r->rb);
}

const qf__reader_ops qf__fixed_length_reader_ops = {
    .kind = QF_READER_FIXED_LENGTH_RECORD,
    .kind_name = "FixedLengthRecordReader",
    .reads_files = true,
    .start = fixed_start,
    .next = fixed_next,
    .finish = fixed_finish,
};
