/* qf_reader-impl.h - internals of the readers (never installed).
 *
 * qf_reader.c holds ReaderBase: the loop over work items, the work-queue
 * checks, counters, reset, and the buffered file (qf__rbuf). Each kind
 * (qf_reader_text.c, _fixed.c, _tfrecord.c, _identity.c) supplies the three
 * hooks of TensorFlow's ReaderBase subclasses:
 *
 *   start(r)   OnWorkStartedLocked: r->work names the new work item; open
 *              the file, skip headers. An error drops the item.
 *   next(r, rec, &produced, &at_end)
 *              ReadLocked: produce one record into rec (*produced), or say
 *              the item is exhausted (*at_end), or both (IdentityReader),
 *              or fail (the item is then abandoned).
 *   finish(r)  OnWorkFinishedLocked / reset: close what start opened.
 *              Idempotent.
 */
#ifndef QF_READER_IMPL_H
#define QF_READER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_reader.h"
#include "qf_strblock-impl.h"

/* --------------------------------------------------------------- CRC-32C */

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TensorFlow's
 * crc32c::Extend: `crc` is the value of the bytes so far (0 to start), the
 * result the value including data[0..n). Uses the SSE4.2 crc32 instruction
 * when the CPU has it, else slicing-by-8 tables. Any thread. */
uint32_t qf__crc32c_extend(uint32_t crc, const void *data, size_t n);
/* The table-driven path alone (for tests comparing the two). */
uint32_t qf__crc32c_extend_portable(uint32_t crc, const void *data, size_t n);
/* True when qf__crc32c_extend uses the CPU instruction. */
bool qf__crc32c_hw(void);

static inline uint32_t qf__crc32c(const void *data, size_t n)
{
    return qf__crc32c_extend(0, data, n);
}

/* TFRecord's masking: a CRC stored next to data that may itself contain
 * CRCs is rotated and offset so that CRCs of CRCs do not degenerate. */
#define QF__CRC_MASK_DELTA 0xa282ead8u

static inline uint32_t qf__crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + QF__CRC_MASK_DELTA;
}

static inline uint32_t qf__crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - QF__CRC_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}

/* --------------------------------------------------------- buffered file */

/* Smallest read buffer: a TFRecord header (12 bytes) must fit. */
#define QF__RBUF_MIN 16

/* One open file and the reader's read buffer: buf[pos..lim) are the bytes
 * at file offsets base+pos .. base+lim not consumed yet. */
typedef struct qf__rbuf {
    int fd;                  /* -1 when no file is open */
    char *buf;               /* the reader's buffer, kept across files */
    qf__strblock *blk;       /* NULL, or the run buf belongs to (TextLineReader) */
    qf__strblock_pool *pool; /* where blk and its successors come from */
    size_t cap;              /* its size */
    size_t pos;              /* next unconsumed byte */
    size_t lim;              /* end of valid bytes */
    uint64_t base;           /* file offset of buf[0] */
    int64_t size;            /* size at open for regular files, else -1 */
    uint64_t advised;        /* WILLNEED issued up to this offset */
    bool eof;                /* the file has no bytes after buf[lim) */
    const char *path;        /* for messages: the reader's current work item */
} qf__rbuf;

/* Open `path` (NUL-terminated) for sequential reading. Maps errno to a code
 * with the message "<path>; <strerror>". */
qf_code qf__rbuf_open(qf__rbuf *rb, const char *path);
/* Close the file (keeps the buffer). Idempotent. */
void qf__rbuf_close(qf__rbuf *rb);
/* Read more bytes after buf[lim): one read(2), restarting on EINTR; when
 * pos == lim it first rewinds the buffer, when lim == cap it first moves
 * buf[pos..lim) to the front. On return either new bytes arrived or eof is
 * set. */
qf_code qf__rbuf_fill(qf__rbuf *rb);
/* Move to a fresh run (rb->blk set) carrying buf[pos..lim) along, and let
 * the old one go; its rows stay valid. The new run has no key prefix.
 * qf__rbuf_fill() does this itself before overwriting a run with rows out. */
qf_code qf__rbuf_renew(qf__rbuf *rb);
/* Make n <= cap bytes available at buf[pos]; *ret_ok false when the file
 * ends first (lim - pos then says how many there are). */
qf_code qf__rbuf_ensure(qf__rbuf *rb, size_t n, bool *ret_ok);
/* Consume n bytes; *ret_ok false when the file ends first. */
qf_code qf__rbuf_skip(qf__rbuf *rb, uint64_t n, bool *ret_ok);
/* Copy the next n bytes (any n) to dst, reading large remainders straight
 * into dst; *ret_got < n when the file ends first. */
qf_code qf__rbuf_read(qf__rbuf *rb, char *dst, size_t n, size_t *ret_got);

static inline uint64_t qf__rbuf_offset(const qf__rbuf *rb)
{
    return rb->base + rb->pos;
}

/* ---------------------------------------------------------------- readers */

typedef struct qf__reader_ops {
    qf_reader_kind kind;
    const char *kind_name;
    bool reads_files; /* needs the buffer and a file name */
    qf_code (*start)(qf_reader *r);
    qf_code (*next)(qf_reader *r, qf_record *rec, bool *produced, bool *at_end);
    void (*finish)(qf_reader *r);
    /* Optional, for pipelines (qf__reader_poll_read_slots()): like next,
     * but up to max records at once, as the row slots of one run
     * (queues/qf_strblock-impl.h); *made may be 0 without *at_end when no
     * record is whole in the buffer, and next() then assembles one. */
    qf_code (*next_rows)(qf_reader *r, void **out, size_t max, size_t *made, bool *at_end);
} qf__reader_ops;

extern const qf__reader_ops qf__text_line_reader_ops;
extern const qf__reader_ops qf__fixed_length_reader_ops;
extern const qf__reader_ops qf__identity_reader_ops;
extern const qf__reader_ops qf__tfrecord_reader_ops;

struct qf_reader {
    const qf__reader_ops *ops;
    char *name;
    /* The current work item (a file name), NUL-terminated; reused. */
    char *work;
    size_t work_len;
    size_t work_cap;
    bool in_progress; /* a work item is started and not finished */
    /* An error inside a file that read_up_to held back because it had
     * records to return; reported by the next call. */
    qf_status *deferred;
    /* Counters: written by the one reading thread (plain load + store),
     * read by anyone; relaxed, they order nothing. */
    QF_ATOMIC(int64_t) produced;
    QF_ATOMIC(int64_t) completed;
    qf__rbuf rb;
    /* Kind parameters. */
    int64_t skip_header_lines;
    uint64_t record_bytes, header_bytes, footer_bytes, hop_bytes;
    /* Kind state for the current file: TextLine: lines read; FixedLength:
     * next record index; TFRecord: unused (the offset is the key). */
    uint64_t index;
    /* next_rows() may wait for input (no record in hand yet this call). */
    bool rows_may_wait;
    bool file_done; /* the kind found the end while starting (headers) */
};

/* qf_reader_poll_read_up_to() into queue slots instead of records: up to n
 * (key, value) records in ret_slots[0..*ret_n), owned by the caller (free
 * with qf__slots_free()). A kind with next_rows makes them rows of one run
 * (one allocation for them all); any other makes elements, as
 * qf_record_to_element() does, through `scratch` (a record the caller
 * keeps between calls). Only for queues of two scalar string components
 * (see qf_strblock-impl.h). The errors, the spec 189 rule and the held-back
 * error are read_up_to's. */
qf_code qf__reader_poll_read_slots(qf_reader *r, qf_queue *work, qf_waker *waker, size_t n,
                                   qf_record *scratch, void **ret_slots, size_t *ret_n);

/* Record helpers for the kinds. */
qf_code qf__record_reserve_value(qf_record *rec, size_t n);
/* Copy n bytes (NUL-terminated) into the record's value / key. */
qf_code qf__record_set_value(qf_record *rec, const char *s, size_t n);
qf_code qf__record_set_key(qf_record *rec, const char *s, size_t n);
/* key = "<work>:<n>". */
qf_code qf__record_set_key_num(qf_reader *r, qf_record *rec, uint64_t n);

#endif
