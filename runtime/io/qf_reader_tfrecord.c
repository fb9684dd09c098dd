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
 * The length is checked against its CRC before it is believed; for a
 * regular file it is also checked against the file's size, so a damaged but
 * plausible length is reported as truncation instead of allocating for it.
 * The data goes straight into the caller's record (large records are read
 * into it directly, bypassing the read buffer) and is checksummed there.
 */
#include <inttypes.h>
#include <string.h>

#include "qf_reader-impl.h"

#define HEADER_BYTES 12
#define FOOTER_BYTES 4

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

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

static qf_code tfrecord_next(qf_reader *r, qf_record *rec, bool *produced, bool *at_end)
{
    qf__rbuf *rb = &r->rb;
    uint64_t off = qf__rbuf_offset(rb);
    bool ok = false;
    qf_code rc = qf__rbuf_ensure(rb, HEADER_BYTES, &ok);
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
    uint64_t len = load_le64(h);
    if (qf__crc32c_unmask(load_le32(h + 8)) != qf__crc32c(h, 8))
        return corrupted(r, off, "length checksum mismatch");
    rb->pos += HEADER_BYTES;
    uint64_t need = (uint64_t)HEADER_BYTES + FOOTER_BYTES;
    if (len > UINT64_MAX - need - off || (rb->size >= 0 && off + need + len > (uint64_t)rb->size))
        return truncated(r, off);
    if (len >= SIZE_MAX / 2)
        return qf_set_error(QF_RESOURCE_EXHAUSTED,
                            "record of %" PRIu64 " bytes at %" PRIu64 " in '%s' is too large", len,
                            off, r->work);
    rc = qf__record_reserve_value(rec, (size_t)len);
    if (rc != QF_OK)
        return rc;
    size_t got = 0;
    rc = qf__rbuf_read(rb, rec->value, (size_t)len, &got);
    if (rc != QF_OK)
        return rc;
    if (got < len)
        return truncated(r, off);
    unsigned char crc_bytes[FOOTER_BYTES];
    rc = qf__rbuf_read(rb, (char *)crc_bytes, FOOTER_BYTES, &got);
    if (rc != QF_OK)
        return rc;
    if (got < FOOTER_BYTES)
        return truncated(r, off);
    if (qf__crc32c_unmask(load_le32(crc_bytes)) != qf__crc32c(rec->value, (size_t)len))
        return corrupted(r, off, "data checksum mismatch");
    rec->value[len] = '\0';
    rec->value_len = (size_t)len;
    rc = qf__record_set_key_num(r, rec, off);
    if (rc != QF_OK)
        return rc;
    *produced = true;
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
};
