/* qf_reader_tfrecord.c - TFRecordReader: TensorFlow's record files.
 *
 * A file is a sequence of records, each
 *
 *     uint64  length                      little-endian
 *     uint32  masked CRC-32C of length    (of those 8 bytes)
 *     byte    data[length]
 *     uint32  masked CRC-32C of data
 *
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (qf_reader-impl.h).
 * The end of the file exactly at a record boundary ends the work unit; any
 * other end (inside the 12-byte header, the data or the data CRC) is
 * QF_DATA_LOSS "truncated record at <offset>", a checksum that does not
 * match is QF_DATA_LOSS "corrupted record at <offset>" (TensorFlow's
 * io::RecordReader texts), both naming the file. <offset> is the byte
 * offset of the record's start, which is also its key, as in TensorFlow's
 * TFRecordReader: "<file>:<offset>".
 *
 * The length is checked against its CRC before it is believed, then
 * against options.max_record_bytes (QF_DATA_LOSS "corrupted record at N
 * ... over max_record_bytes") and, for an uncompressed regular file, the
 * file's size (reported as truncation), so a damaged but CRC-valid length
 * never makes the reader allocate for it. The data goes straight into the
 * caller's record (large records are read into it directly, bypassing the
 * read buffer) and is checksummed there; from a pipe it goes through the
 * reader's carry so that a pause mid-record (QF_PENDING) loses nothing.
 *
 * compression_type ZLIB / GZIP: the framing is read from the inflated
 * stream (qf_zstream.c); offsets and keys count decompressed bytes, as
 * TensorFlow's RecordReader counts them.
 */
#include <inttypes.h>
#include <string.h>

#include "qf_reader-impl.h"

#define HEADER_BYTES 12
#define FOOTER_BYTES 4

static qf_code tfrecord_start(qf_reader *r)
{
    return qf__rbuf_open(&r->rb, r->work);
}

static qf_code truncated(qf_reader *r, uint64_t off)
{
    return qf_set_error(QF_DATA_LOSS, "truncated record at %" PRIu64 " in '%s'", off, r->work);
}

static qf_code corrupted(qf_reader *r, uint64_t off, const char *what)
{
    return qf_set_error(QF_DATA_LOSS, "corrupted record at %" PRIu64 " in '%s' (%s)", off, r->work,
                        what);
}

static qf_code too_long(qf_reader *r, uint64_t off, uint64_t len)
{
    return qf_set_error(QF_DATA_LOSS,
                        "corrupted record at %" PRIu64 " in '%s' (length %" PRIu64
                        " is over max_record_bytes %" PRIu64 ")",
                        off, r->work, len, r->max_record_bytes);
}

/* The data and its CRC are in data[0..len+4): check and hand over. */
static qf_code finish_record(qf_reader *r, qf_record *rec, const char *data, uint64_t len,
                             uint64_t off, bool *produced)
{
    if (qf__crc32c_unmask(qf__load_le32((const unsigned char *)data + len)) !=
        qf__crc32c(data, (size_t)len))
        return corrupted(r, off, "data checksum mismatch");
    if (data != rec->value) {
        qf_code rc = qf__record_reserve_value(rec, (size_t)len);
        if (rc != QF_OK)
            return rc;
        memcpy(rec->value, data, (size_t)len);
    }
    rec->value[len] = '\0';
    rec->value_len = (size_t)len;
    qf_code rc = qf__record_set_key_num(r, rec, off);
    if (rc != QF_OK)
        return rc;
    *produced = true;
    return QF_OK;
}

static qf_code tfrecord_next(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    qf__rbuf *rb = &r->rb;
    qf_code rc;
    size_t got = 0;
    if (r->tf_stage == 1)
        goto data;
    uint64_t off = qf__rbuf_offset(rb);
    bool ok = false;
    rc = qf__rbuf_ensure(rb, HEADER_BYTES, &ok);
    if (rc != QF_OK)
        return rc;
    if (!ok) {
        if (rb->lim == rb->pos) {
            *at_end = true; /* a clean end, at a record boundary */
            return QF_OK;
        }
        return truncated(r, off);
    }
    const unsigned char *h = (const unsigned char *)rb->buf + rb->pos;
    uint64_t len = qf__load_le64(h);
    if (qf__crc32c_unmask(qf__load_le32(h + 8)) != qf__crc32c(h, 8))
        return corrupted(r, off, "length checksum mismatch");
    /* A length is believed only within the bound and, for an uncompressed
     * regular file, within what the file holds: never allocated for. */
    uint64_t need = (uint64_t)HEADER_BYTES + FOOTER_BYTES;
    if (rb->size >= 0 && (len > (uint64_t)rb->size || off + need + len > (uint64_t)rb->size))
        return truncated(r, off);
    if (len > r->max_record_bytes)
        return too_long(r, off, len);
    rb->pos += HEADER_BYTES;
    if (!rb->nonblock) {
        /* A regular file never makes us wait: the data goes straight into
         * the caller's record (large records bypass the read buffer). */
        rc = qf__record_reserve_value(rec, (size_t)len + FOOTER_BYTES);
        if (rc != QF_OK)
            return rc;
        rc = qf__rbuf_read(rb, rec->value, (size_t)len + FOOTER_BYTES, &got);
        if (rc != QF_OK)
            return rc;
        if (got < len + FOOTER_BYTES)
            return truncated(r, off);
        return finish_record(r, rec, rec->value, len, off, produced);
    }
    /* A pipe may pause anywhere in the record: read it into the reader's
     * carry, which keeps it across QF_PENDING. */
    rc = qf__reserve(&r->carry, &r->carry_cap, (size_t)len + FOOTER_BYTES);
    if (rc != QF_OK)
        return rc;
    r->tf_stage = 1;
    r->tf_len = len;
    r->tf_off = off;
    r->carry_len = 0;
data:
    rc = qf__rbuf_read(rb, r->carry, (size_t)r->tf_len + FOOTER_BYTES, &r->carry_len);
    if (rc != QF_OK)
        return rc;
    r->tf_stage = 0;
    if (r->carry_len < r->tf_len + FOOTER_BYTES)
        return truncated(r, r->tf_off);
    r->carry_len = 0;
    return finish_record(r, rec, r->carry, r->tf_len, r->tf_off, produced);
}

/* Whether the record at buf[pos..lim) is whole in the buffer with both
 * checksums right: then *ret_len is its data length. Anything else (too
 * short, a bad length or checksum, over max_record_bytes) is false, and
 * next() reads it and reports what is wrong with the offset in the file. */
static bool whole_record(const qf_reader *r, const unsigned char *h, size_t avail,
                         uint64_t *ret_len)
{
    if (avail < HEADER_BYTES + FOOTER_BYTES)
        return false;
    uint64_t len = qf__load_le64(h);
    if (len > avail - HEADER_BYTES - FOOTER_BYTES || len > r->max_record_bytes ||
        qf__crc32c_unmask(qf__load_le32(h + 8)) != qf__crc32c(h, 8))
        return false;
    const unsigned char *d = h + HEADER_BYTES;
    if (qf__crc32c_unmask(qf__load_le32(d + len)) != qf__crc32c(d, (size_t)len))
        return false;
    *ret_len = len;
    return true;
}

/* The bytes the record at buf[pos..lim) needs in the buffer to be whole,
 * as far as its header tells (a header not all there yet: the least
 * record); 0 when the header is there and wrong, which next() reports. */
static size_t record_need(const qf_reader *r, const unsigned char *h, size_t avail)
{
    if (avail < HEADER_BYTES)
        return HEADER_BYTES + FOOTER_BYTES;
    uint64_t len = qf__load_le64(h);
    if (qf__crc32c_unmask(qf__load_le32(h + 8)) != qf__crc32c(h, 8) || len > r->max_record_bytes ||
        len > SIZE_MAX / 2)
        return 0;
    return (size_t)len + HEADER_BYTES + FOOTER_BYTES;
}

/* Pipelines (see qf_reader_text.c's text_next_rows): each record lying
 * whole in the buffer, both checksums checked there, becomes a row whose
 * value is its data in place; the NUL after the value overwrites the first
 * byte of the data checksum, already checked. Keys are "<file>:<offset of
 * the record>", as next() makes them. A record that is not whole goes to
 * next() (it copies), except when the call has no record yet: then the
 * buffer is refilled first (a record crossing the end of the buffer is
 * cut out of the next run), unless the record is longer than the buffer,
 * or damaged, which next() reads or reports. A record being read from a
 * pipe into the carry (tf_stage 1) is next()'s to finish. */
static qf_code tfrecord_next_rows(qf_reader *r, void **out, size_t max, size_t *made, bool *at_end)
{
    qf__rbuf *rb = &r->rb;
    (void)at_end; /* the end is next()'s to find: it tells a clean end from a torn one */
    *made = 0;
    if (!rb->blk || r->tf_stage != 0)
        return QF_OK;
    qf_code rc = qf__reader_rows_ready(r);
    if (rc != QF_OK)
        return rc;
    if (max > QF__ROWS_MAX)
        max = QF__ROWS_MAX;
    size_t n = 0;
    for (;;) {
        size_t left = qf__strblock_rows_left(rb->blk);
        size_t lim = max < left ? max : left;
        size_t pos = rb->pos;
        const unsigned char *b = (const unsigned char *)rb->buf;
        uint64_t len;
        qf__row_writer w = qf__row_writer_begin(rb->blk, true);
        while (n < lim && whole_record(r, b + pos, rb->lim - pos, &len)) {
            out[n++] = qf__row_writer_add(&w, pos + HEADER_BYTES, (size_t)len, rb->base + pos);
            pos += HEADER_BYTES + (size_t)len + FOOTER_BYTES;
        }
        qf__row_writer_end(&w);
        rb->pos = pos;
        if (n > 0 || !r->rows_may_wait || rb->eof)
            break;
        size_t avail = rb->lim - pos;
        size_t need = record_need(r, b + pos, avail);
        if (need == 0 || need <= avail || need > rb->cap)
            break; /* damaged, or longer than the buffer: next() */
        if ((rc = qf__rbuf_fill(rb)) != QF_OK)
            return rc;
        if ((rc = qf__reader_rows_ready(r)) != QF_OK)
            return rc;
    }
    *made = n;
    return QF_OK;
}

static void tfrecord_finish(qf_reader *r)
{
    qf__rbuf_close(&r->rb);
}

const qf__reader_ops qf__tfrecord_reader_ops = {
    .kind = QF_READER_TFRECORD,
    .kind_name = "TFRecordReader",
    .reads_files = true,
    .start = tfrecord_start,
    .next = tfrecord_next,
    .finish = tfrecord_finish,
    .next_rows = tfrecord_next_rows,
};
