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

/* TFRecord's little-endian length and CRC fields. */
static inline uint64_t qf__load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint32_t qf__load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
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

/* ------------------------------------------------------------ fd waits */

/* Waiting for a non-regular file (a pipe, a terminal) without blocking a
 * worker (qf_fdwait.c). A task's poll registers its waker on the watch's
 * wait list and arms the fd with one process-wide epoll instance; one
 * watcher thread, started at the first such wait, wakes the list when the
 * fd is readable (or hung up). io/ cannot see the scheduler, so this is
 * the waker protocol of coord/ and nothing more: the task is woken like a
 * queue wakes it, and a Coordinator stop or a cancel withdraws its waker
 * from the list (qf_waker_withdraw) as from any other. */
typedef struct qf__fdwatch {
    uint64_t id; /* 0: not known to the watcher */
    int fd;      /* the fd armed, -1 when none */
    qf_waitlist wl;
    struct qf__fdwatch *prev, *next; /* the watcher's list of live watches */
} qf__fdwatch;

void qf__fdwatch_init(qf__fdwatch *w);
/* Register `waker` on the watch and arm `fd` (one-shot, level-triggered:
 * an fd that is already readable fires at once, so no wake is lost between
 * the failed read and this call). QF_RESOURCE_EXHAUSTED when the watcher
 * cannot start (then the waker is not registered). */
qf_code qf__fdwatch_arm(qf__fdwatch *w, int fd, qf_waker *waker);
/* Forget the fd (before it is closed): after return the watcher never
 * touches `w`; wakers still registered are woken (a spurious wake is
 * harmless: their poll runs again). Idempotent. */
void qf__fdwatch_disarm(qf__fdwatch *w);
/* Block the calling thread until `fd` is readable or hung up, or
 * `deadline` (QF_DEADLINE_EXCEEDED). */
qf_code qf__fd_wait_readable(int fd, qf_deadline deadline);

/* ------------------------------------------------------ compressed input */

/* A decompressing source between the file and the read buffer
 * (qf_zstream.c): ZLIB or GZIP streams or ZSTD frames, several concatenated
 * streams read as one (as gzip(1) and zstd(1) do). */
typedef struct qf__zin qf__zin;
struct qf__rbuf;

qf_code qf__zin_new(qf_compression c, const qf_zlib_options *o, qf__zin **ret);
void qf__zin_free(qf__zin *z);
/* Start a new file. */
void qf__zin_reset(qf__zin *z);
/* True when the stream stopped only for want of input (a clean end, or a
 * member cut short with no damage seen): qf__zin_resume() then lets it take
 * bytes appended to the file since. */
bool qf__zin_resumable(const qf__zin *z);
void qf__zin_resume(qf__zin *z);
/* Up to n decompressed bytes into dst; *ret_got 0 means the end of the
 * stream (a clean end: a corrupt or truncated stream is QF_DATA_LOSS
 * naming rb->path and the compressed offset). QF_PENDING when the file has
 * nothing to read yet (non-blocking files). */
qf_code qf__zin_read(qf__zin *z, struct qf__rbuf *rb, char *dst, size_t n, size_t *ret_got);
/* The window_bits handed to zlib for an option value (0: 15; 8: 9, for
 * the writer and the reader alike). */
int qf__zlib_window_bits(int window_bits);
/* Validate options (INVALID_ARGUMENT naming the field). */
qf_code qf__zlib_options_check(qf_compression c, const qf_zlib_options *o, bool writing);

/* --------------------------------------------------------- buffered file */

/* Smallest read buffer: a TFRecord header (12 bytes) must fit. */
#define QF__RBUF_MIN 16

/* One open file and the reader's read buffer: buf[pos..lim) are the bytes
 * at stream offsets base+pos .. base+lim not consumed yet. The stream is
 * the file, or what inflating it gives when z is set: offsets, sizes and
 * records are all of the decompressed stream, as in TensorFlow. */
typedef struct qf__rbuf {
    int fd;                  /* -1 when no file is open */
    char *buf;               /* the reader's buffer, kept across files */
    qf__strblock *blk;       /* NULL, or the run buf belongs to (TextLineReader) */
    qf__strblock_pool *pool; /* where blk and its successors come from */
    size_t cap;              /* its size */
    size_t pos;              /* next unconsumed byte */
    size_t lim;              /* end of valid bytes */
    uint64_t base;           /* stream offset of buf[0] */
    int64_t size;            /* stream size when known (regular, uncompressed), else -1 */
    int64_t file_size;       /* size at open for regular files, else -1 */
    uint64_t raw_off;        /* bytes read from the file itself */
    uint64_t advised;        /* WILLNEED issued up to this offset */
    bool eof;                /* the stream has no bytes after buf[lim) */
    bool nonblock;           /* not a regular file: opened O_NONBLOCK, fill may pend */
    bool fifo;               /* a named pipe (read 0 before any writer is not the end) */
    bool shrank_warned;      /* the truncation warning was given for this file */
    qf__zin *z;              /* NULL: the file is the stream */
    qf__fdwatch watch;       /* for QF_PENDING: where a task waits */
    const char *path;        /* for messages: the reader's current work item */
    qf_reader *owner;        /* for warnings */
} qf__rbuf;

/* Open `path` (NUL-terminated) for sequential reading. Non-regular files
 * are opened O_NONBLOCK (a FIFO's open then never waits for a writer).
 * Maps errno to a code with the message "<path>; <strerror>". */
qf_code qf__rbuf_open(qf__rbuf *rb, const char *path);
/* Close the file (keeps the buffer). Idempotent. */
void qf__rbuf_close(qf__rbuf *rb);
/* Position a freshly opened stream at `off` (state restore): lseek for a
 * regular uncompressed file, else read and drop. *ret_ok false when the
 * stream is shorter. May pend (non-regular files). */
qf_code qf__rbuf_seek(qf__rbuf *rb, uint64_t off, bool *ret_ok);
/* Reposition an open regular file's stream at `off` for reading it again
 * after its end or a failure: the size is taken afresh (the file may have
 * grown); an uncompressed file seeks; a compressed one goes on where it
 * stopped when that was `off` and the inflater only ran out of input, and
 * otherwise inflates again from the start up to `off`. *ret_ok false when
 * the stream now ends before `off`. */
qf_code qf__rbuf_rewind(qf__rbuf *rb, uint64_t off, bool *ret_ok);
/* Read more bytes after buf[lim): one read, restarting on EINTR; when
 * pos == lim it first rewinds the buffer, when lim == cap it first moves
 * buf[pos..lim) to the front. On return either new bytes arrived or eof is
 * set, or QF_PENDING (no error set) when a non-regular file has nothing
 * yet: nothing consumed, call again after waiting (qf__rbuf_wait_fd). */
qf_code qf__rbuf_fill(qf__rbuf *rb);
/* Move to a fresh run (rb->blk set) carrying buf[pos..lim) along, and let
 * the old one go; its rows stay valid. The new run has no key prefix.
 * qf__rbuf_fill() does this itself before overwriting a run with rows out. */
qf_code qf__rbuf_renew(qf__rbuf *rb);
/* Make n <= cap bytes available at buf[pos]; *ret_ok false when the file
 * ends first (lim - pos then says how many there are). Consumes nothing,
 * so a QF_PENDING can be retried. */
qf_code qf__rbuf_ensure(qf__rbuf *rb, size_t n, bool *ret_ok);
/* Consume up to *n bytes, counting *n down (so a QF_PENDING can resume);
 * *ret_ok false when the stream ends first. */
qf_code qf__rbuf_skip(qf__rbuf *rb, uint64_t *n, bool *ret_ok);
/* Copy the next n bytes to dst, counting *got up from where it is (so a
 * QF_PENDING can resume), reading large remainders straight into dst;
 * on return *got < n only at the end of the stream. */
qf_code qf__rbuf_read(qf__rbuf *rb, char *dst, size_t n, size_t *got);
/* The stream's next raw read (file or inflater) into dst: *ret_got 0 at
 * the end; QF_PENDING without an error when nothing is there yet. */
qf_code qf__rbuf_raw_read(qf__rbuf *rb, char *dst, size_t n, size_t *ret_got);
/* read(2) from the file itself, with the FIFO and shrinking-file rules. */
qf_code qf__rbuf_file_read(qf__rbuf *rb, char *dst, size_t n, size_t *ret_got);

/* For next_rows(): make the reader's run ready for rows of the current
 * file: its key prefix is the file name and ':' (a run whose rows are out
 * keeps its own: the reader moves to a fresh one, carrying buf[pos..lim)),
 * and its table has room for at least one row. RESOURCE_EXHAUSTED on OOM. */
qf_code qf__reader_rows_ready(qf_reader *r);

static inline uint64_t qf__rbuf_offset(const qf__rbuf *rb)
{
    return rb->base + rb->pos;
}

/* Record a warning on the reader (counted, last message kept, the
 * options' callback called). */
void qf__reader_warn(qf_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- readers */

typedef struct qf__reader_ops {
    qf_reader_kind kind;
    const char *kind_name;
    bool reads_files; /* needs the buffer and a file name */
    qf_code (*start)(qf_reader *r);
    /* May return QF_PENDING (no error set) when a non-regular file has no
     * bytes yet: everything consumed so far is kept in the reader (rb,
     * carry, kind state), so the same call resumes after the wait. */
    qf_code (*next)(qf_reader *r, qf_record *rec, bool *produced, bool *at_end);
    void (*finish)(qf_reader *r);
    /* Optional, for pipelines (qf__reader_poll_read_slots()): like next,
     * but up to max records at once, as the row slots of one run
     * (queues/tensor/qf_strblock-impl.h); *made may be 0 without *at_end when no
     * record is whole in the buffer, and next() then assembles one. */
    qf_code (*next_rows)(qf_reader *r, void **out, size_t max, size_t *made, bool *at_end);
    /* Optional: position a started item at the saved state (r->pos_*);
     * NULL: the stream is skipped to r->resume_off. */
    qf_code (*resume)(qf_reader *r);
} qf__reader_ops;

extern const qf__reader_ops qf__text_line_reader_ops;
extern const qf__reader_ops qf__fixed_length_reader_ops;
extern const qf__reader_ops qf__identity_reader_ops;
extern const qf__reader_ops qf__tfrecord_reader_ops;
extern const qf__reader_ops qf__whole_file_reader_ops;
extern const qf__reader_ops qf__lmdb_reader_ops; /* NULL-like stub when built without LMDB */
extern const bool qf__have_lmdb;

#define QF__WARNING_MAX 256

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
    QF_ATOMIC(int64_t) warnings;
    qf__rbuf rb;
    /* Kind parameters. */
    int64_t skip_header_lines;
    uint64_t record_bytes, header_bytes, footer_bytes, hop_bytes;
    uint64_t max_record_bytes; /* TFRecord, WholeFile */
    qf_compression compression;
    qf_zlib_options zlib;
    void (*on_warning)(void *arg, const qf_reader *r, const char *message);
    void *warning_arg;
    char last_warning[QF__WARNING_MAX];
    /* Kind state for the current file: TextLine: lines read; FixedLength:
     * next record index; TFRecord: unused (the offset is the key). */
    uint64_t index;
    /* Stream bytes still to skip before the next record: TextLine: header
     * lines left (count, not bytes); FixedLength: header or hop bytes. */
    uint64_t skip_left;
    /* Bytes of the current record consumed from the stream and kept here
     * across a QF_PENDING (a line longer than the buffer, a TFRecord read
     * from a pipe, a whole non-regular file). */
    char *carry;
    size_t carry_len;
    size_t carry_cap;
    /* TFRecord: 0 before the header, 1 reading the data into carry. */
    int tf_stage;
    uint64_t tf_len;
    uint64_t tf_off; /* stream offset of the record being read */
    /* LMDB: the environment, transaction and cursor of the current item. */
    void *lmdb;
    /* State restored and not yet applied: the next read reopens `work` and
     * moves to resume_off (qf_reader_restore_state). */
    bool resume_pending;
    bool resume_seek; /* started, position not applied yet */
    uint64_t resume_off;
    uint64_t resume_index;
    uint64_t resume_skip;
    char *resume_key; /* LMDB: the last key produced */
    size_t resume_key_len;
    /* next_rows() may wait for input (no record in hand yet this call). */
    bool rows_may_wait;
    /* next_rows() may leave each value's source end in place of its NUL
     * (qf__queue_rows_by_length(); a kind may still write the NULs). */
    bool rows_bare;
    bool file_done; /* the kind found the end while starting (headers) */
};

/* errno -> canonical code; "<path>; <strerror>" with it (qf_rbuf.c). */
qf_code qf__errno_code(int err);
qf_code qf__io_error(const char *path, int err);
/* LMDB: the key of the last record produced from the current item (NULL,
 * 0 when none). */
qf_code qf__lmdb_current_key(const qf_reader *r, const void **ret_key, size_t *ret_len);

/* Grow *buf (capacity *cap) to hold n bytes plus a NUL. */
qf_code qf__reserve(char **buf, size_t *cap, size_t n);
/* Start `path` as the current work item of r without a work queue (the
 * TFRecord iterator). */
qf_code qf__reader_begin(qf_reader *r, const char *path);
/* One record of the current item (thread form: waits for a non-regular
 * file until `deadline`). *ret_at_end at its end. An error or the end
 * leaves the item open (in_progress): qf__reader_rewind_item() may go on
 * from a known record boundary. */
qf_code qf__reader_next_in_item(qf_reader *r, qf_deadline deadline, qf_record *rec,
                                bool *ret_at_end);
/* Go back to stream offset `off` of the current item, a record boundary
 * the kind reached before, and look at the file afresh (it may have grown
 * or shrunk): a regular file only (FAILED_PRECONDITION otherwise).
 * *ret_ok false when the stream now ends before `off`. */
qf_code qf__reader_rewind_item(qf_reader *r, uint64_t off, bool *ret_ok);
/* The stream offset where the current record starts (state). */
uint64_t qf__reader_stream_pos(const qf_reader *r);

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
