/* qf_reader.h - readers: (key, value) records from files named by a queue.
 *
 * TensorFlow's ReaderBase and its four classic readers. A reader takes work
 * items (file names, or any strings for the IdentityReader) from a *work
 * queue*, a queue of one QF_STRING scalar component (what
 * string_input_producer fills), and turns each into records:
 *
 *   QF_READER_TEXT_LINE            one record per line           key "<file>:<line>", from 1
 *   QF_READER_FIXED_LENGTH_RECORD  record_bytes-sized slices     key "<file>:<index>", from 0
 *   QF_READER_TFRECORD             TensorFlow's record files     key "<file>:<byte offset>"
 *   QF_READER_IDENTITY             the work string itself        key = value = the string
 *
 * A read that needs a new work item dequeues one (spec 183); a read that
 * reaches the end of a file moves straight on to the next file name, so one
 * read may consume files that yield nothing (spec 185, 194). read_up_to(n)
 * returns 1..n records and stops early at the end of a file when it already
 * has some (spec 189).
 *
 * Output: caller-provided, reusable records. A qf_record is two growable
 * byte buffers owned by the caller; a read overwrites them and grows them
 * (realloc) only when a record is longer than anything read into that
 * qf_record before. A pipeline that reads into the same qf_record (or the
 * same array of them for read_up_to) therefore allocates nothing per record
 * in the steady state: a text line costs one memchr over its bytes, one
 * memcpy of the line and one of the file name, and formatting the line
 * number. qf_record_to_element() makes string tensors when a queue needs
 * them.
 *
 * Four forms of every read (STYLE: names say whether a call blocks):
 *     qf_reader_read(...)              waits for a file name as long as it takes
 *     qf_reader_read_until(..., dl)    waits at most until the absolute deadline
 *     qf_reader_try_read(...)          never waits for a file name (QF_UNAVAILABLE)
 *     qf_reader_poll_read(..., waker)  for tasks: QF_PENDING with the waker
 *                                      registered on the work queue
 * The waiting is only ever for the *work queue*; file reads happen inline in
 * every form (see "Disk I/O" below).
 *
 * Disk I/O, and why readers do not stall every worker of a pool.
 * A reader owns one read buffer (QF_READER_DEFAULT_BUFFER = 256 KiB unless
 * set; at least record_bytes + footer_bytes for fixed-length readers) that
 * it reuses for every file. Files are opened O_RDONLY|O_CLOEXEC and read
 * sequentially with plain read(2) in buffer-sized chunks. At open the
 * reader calls posix_fadvise(POSIX_FADV_SEQUENTIAL) (the kernel doubles its
 * readahead window) and after every chunk it issues
 * posix_fadvise(POSIX_FADV_WILLNEED) for the *next* chunk: the kernel starts
 * that I/O asynchronously while the records of the current chunk travel
 * down the pipeline, so in the steady state each synchronous read(2) is a
 * page-cache copy that does not wait for the disk. What remains:
 *   - the first chunk of a file not in the page cache is a real disk wait;
 *     it stalls the one worker running that reader for one chunk's latency,
 *     never the others (a reader is used by one task at a time, and a pool
 *     of W workers running R readers loses at most min(R, W) workers to
 *     cold reads at any instant);
 *   - one poll reads at most the chunks the records it returns need (plus
 *     the opens of files that turn out to be empty): the work per poll is
 *     bounded by n records, or one record for read.
 * Pipelines whose files live on slow storage should run the readers on a
 * runtime of their own (qf_runtime_new) so the batching tasks keep their
 * workers. No thread is created, no io_uring needed.
 *
 * Errors. Opening a file maps errno once: ENOENT -> QF_NOT_FOUND, EACCES /
 * EPERM -> QF_PERMISSION_DENIED, a directory -> QF_FAILED_PRECONDITION,
 * ENOMEM / EMFILE / ENFILE -> QF_RESOURCE_EXHAUSTED, anything else
 * QF_UNKNOWN; the message is TensorFlow's "<file>; <strerror>". A file that
 * fails to open is dropped (the next read takes the next file name), as in
 * TensorFlow. An error inside a file (a bad TFRecord checksum or truncated
 * record: QF_DATA_LOSS naming the file and byte offset; an I/O error) fails
 * the read and the reader abandons that file, which does not count as
 * completed: the next read goes on with the next file name.
 *
 * Differences from TensorFlow, deliberately:
 *   - after an error inside a file TensorFlow keeps the file and fails every
 *     following read the same way until reset(); qflow moves on;
 *   - a read_up_to that produced records before an error inside a file
 *     returns those records (QF_OK), and the next call on the reader
 *     reports the error; TensorFlow fails the call and loses the records;
 *   - FixedLengthRecordReader: a file shorter than header_bytes yields no
 *     records and the reader moves on (spec 201 notes that the 1.x source
 *     raises OutOfRange here; in qflow OUT_OF_RANGE is the end-of-data
 *     signal of a pipeline, and raising it for one short file would
 *     silently retire the runner and drop the files after it). record_bytes
 *     must be > 0 (TensorFlow accepts 0 and then produces empty records
 *     forever);
 *   - TFRecord compression (GZIP/ZLIB) is not supported: zlib is not a
 *     dependency of qflow.
 *
 * Synchronization table
 *   read forms, reset, free           one thread (or task) at a time per
 *                                     reader; a reader may move between
 *                                     threads between calls (the caller
 *                                     provides the happens-before, as the
 *                                     runtime does for tasks).
 *   counters, name, kind              any thread, any time (relaxed
 *                                     snapshots).
 *   several readers, one work queue   fine: each file name goes to one
 *                                     reader (the queue's dequeue).
 *
 * Bad input: NULL arguments are QF_INVALID_ARGUMENT naming them (the work
 * queue keeps its item, outputs are untouched); the accessors return NULL
 * or 0 for a NULL reader and record that error; free, reset and the
 * record clears accept NULL quietly.
 */
#ifndef QF_READER_H
#define QF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_queue.h"
#include "qf_status.h"
#include "qf_tensor.h"
#include "qf_time.h"
#include "qf_waker.h"

QF_BEGIN_DECLS

/* Default size of a reader's read buffer (256 KiB): large enough that one
 * read(2) amortises the syscall, small enough to stay in L2. */
#define QF_READER_DEFAULT_BUFFER ((size_t)256 * 1024)

typedef struct qf_reader qf_reader;

typedef enum qf_reader_kind {
    QF_READER_TEXT_LINE = 0,
    QF_READER_FIXED_LENGTH_RECORD = 1,
    QF_READER_IDENTITY = 2,
    QF_READER_TFRECORD = 3,
} qf_reader_kind;

/* Everything a reader is made from. Zero-initialise, then fill in. */
typedef struct qf_reader_options {
    qf_reader_kind kind;
    /* Used in messages. NULL: the kind name ("TextLineReader",
     * "FixedLengthRecordReader", "IdentityReader", "TFRecordReader").
     * Copied. */
    const char *name;
    /* TextLineReader: lines dropped at the start of every file (>= 0). */
    int64_t skip_header_lines;
    /* FixedLengthRecordReader (spec 197-201): record_bytes > 0; the others
     * >= 0; hop_bytes 0 means a hop of record_bytes. */
    int64_t record_bytes;
    int64_t header_bytes;
    int64_t footer_bytes;
    int64_t hop_bytes;
    /* Read buffer size; 0: QF_READER_DEFAULT_BUFFER; otherwise at least 16
     * bytes (less is QF_INVALID_ARGUMENT). Ignored by the IdentityReader,
     * which reads no files. */
    size_t buffer_bytes;
} qf_reader_options;

/* ----------------------------------------------------------------- records */

/* One (key, value) record in caller-owned, reusable storage. Both buffers
 * are malloc'd (or NULL with capacity 0), NUL-terminated after a successful
 * read (values may also contain NULs: use the lengths), and grow with
 * realloc. Zero-initialise (QF_RECORD_INIT or qf_record_init) before the
 * first read; pair with qf_record_clear(). A caller may take a buffer over
 * (keep the pointer, then set it to NULL and its capacity to 0). */
typedef struct qf_record {
    char *key;
    size_t key_len;
    size_t key_cap;
    char *value;
    size_t value_len;
    size_t value_cap;
} qf_record;

#define QF_RECORD_INIT                                                                             \
    {                                                                                              \
        NULL, 0, 0, NULL, 0, 0                                                                     \
    }

/** qf_record_init() - an empty record (no buffers). Never fails. */
QF_API void qf_record_init(qf_record *rec);

/** qf_record_clear() - free both buffers and make the record empty again.
 *  NULL-safe. */
QF_API void qf_record_clear(qf_record *rec);

/** qf_records_clear() - qf_record_clear() on recs[0..n). NULL-safe. */
QF_API void qf_records_clear(qf_record *recs, size_t n);

/**
 * qf_record_to_element() - a two-component element (key, value), both
 * scalar QF_STRING tensors holding copies of the record's bytes, in the
 * order TensorFlow's read returns them.
 *
 * Ownership:   the caller owns *ret_elem (qf_element_free()); rec is only
 *              read.
 * Blocking:    never (allocates). Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments;
 *              QF_RESOURCE_EXHAUSTED. *ret_elem untouched on failure.
 */
QF_API qf_code qf_record_to_element(const qf_record *rec, qf_element **ret_elem);

/* ------------------------------------------------------------------ readers */

/**
 * qf_reader_new() - create a reader.
 *
 * Ownership:   the caller owns *ret_reader (qf_reader_free()).
 * Blocking:    never (allocates the read buffer).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for an unknown kind or a bad
 *              size: "skip_header_lines must be >= 0 not -1" (spec 196),
 *              "header_bytes must be >= 0 not -1" and likewise for
 *              record_bytes, footer_bytes, hop_bytes (spec 201),
 *              "record_bytes must be > 0 not 0", buffer_bytes from 1 to
 *              15, NULL arguments; QF_RESOURCE_EXHAUSTED
 *              when memory runs out (a huge record_bytes). *ret_reader
 *              untouched on failure.
 */
QF_API qf_code qf_reader_new(const qf_reader_options *opts, qf_reader **ret_reader);

/** qf_text_line_reader_new() - TextLineReader(skip_header_lines) (spec
 *  190-196). Returns as qf_reader_new(). */
QF_API qf_code qf_text_line_reader_new(int64_t skip_header_lines, qf_reader **ret_reader);

/** qf_fixed_length_record_reader_new() - FixedLengthRecordReader(record_bytes,
 *  header_bytes, footer_bytes, hop_bytes) (spec 197-201). Record r of a file
 *  starts at header_bytes + r * hop (hop_bytes, or record_bytes when 0) and
 *  is produced only when record_bytes + footer_bytes bytes remain from its
 *  start; the footer and any leftover are never returned. Returns as
 *  qf_reader_new(). */
QF_API qf_code qf_fixed_length_record_reader_new(int64_t record_bytes, int64_t header_bytes,
                                                 int64_t footer_bytes, int64_t hop_bytes,
                                                 qf_reader **ret_reader);

/** qf_identity_reader_new() - IdentityReader: key = value = the work string;
 *  every read completes a work unit (spec 188). Returns as qf_reader_new(). */
QF_API qf_code qf_identity_reader_new(qf_reader **ret_reader);

/** qf_tfrecord_reader_new() - TFRecordReader, uncompressed. A record is
 *  uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32
 *  masked CRC-32C of the data (all little-endian). The key is
 *  "<file>:<byte offset of the record>", as TensorFlow's TFRecordReader
 *  makes it (its offset_, not a record index). Returns as qf_reader_new(). */
QF_API qf_code qf_tfrecord_reader_new(qf_reader **ret_reader);

/** qf_reader_free() - close the current file and free the reader. Needs
 *  quiescence: no call on the reader in progress (a poll form that returned
 *  QF_PENDING left its waker with the *queue*, not the reader: cancel it
 *  there with qf_queue_cancel_poll()). NULL-safe. */
QF_API void qf_reader_free(qf_reader *r);

/** The reader's name (options.name or the kind name). Valid while the
 *  reader lives. Any thread. */
QF_API const char *qf_reader_name(const qf_reader *r);
QF_API qf_reader_kind qf_reader_get_kind(const qf_reader *r);
/** "TextLineReader", "FixedLengthRecordReader", "IdentityReader",
 *  "TFRecordReader". Static string. */
QF_API const char *qf_reader_kind_name(const qf_reader *r);

/**
 * qf_reader_read() / _until() / qf_reader_try_read() / qf_reader_poll_read()
 * - the next record (spec 183-185).
 *
 * When the reader has no current work item it dequeues one from `work`
 * (which must have one QF_STRING component, spec 184), opens it and reads;
 * at the end of a file it completes the work unit and takes the next name,
 * until one record is produced.
 *
 * Ownership:   `work` is borrowed for the call. On QF_OK *ret_rec holds the
 *              record (key_len/value_len set, both NUL-terminated); its
 *              buffers stay the caller's. On failure *ret_rec holds no
 *              record: its lengths and bytes are unspecified (a line may
 *              have been partly assembled there) and its buffers may have
 *              grown, but they are still valid and still the caller's.
 * Blocking:    read waits for a work item as long as it takes, _until until
 *              `deadline` (qf_time.h); try never waits; poll never waits:
 *              it registers `waker` with the work queue and returns
 *              QF_PENDING (poll again when woken). All forms read files
 *              inline (see "Disk I/O" above). The thread forms called from
 *              inside a task fail with the queue's QF_FAILED_PRECONDITION
 *              instead of blocking a worker when they would wait.
 * Concurrency: one call per reader at a time; any number of readers on one
 *              work queue.
 * Ordering:    records of one file come in file order; the work queue's
 *              acquire makes the enqueuer's writes visible.
 * Returns:     QF_OK;
 *              QF_OUT_OF_RANGE from the work queue when it is closed and
 *                empty ("FIFOQueue 'q' is closed and has insufficient
 *                elements (requested 1, current size 0)", spec 183);
 *              QF_INVALID_ARGUMENT for NULL arguments or a wrong work queue
 *                or item: "Expected single component queue", "Expected
 *                queue with single string component", "Expected to dequeue
 *                a one-element string tensor" (spec 184);
 *              QF_NOT_FOUND, QF_PERMISSION_DENIED, ... for a file that
 *                cannot be opened, "<file>; No such file or directory"
 *                (spec 188); the file is dropped;
 *              QF_DATA_LOSS (TFRecord): "corrupted record at <offset> in
 *                '<file>' ..." or "truncated record at <offset> in
 *                '<file>'"; the file is abandoned;
 *              QF_DEADLINE_EXCEEDED (_until), QF_UNAVAILABLE (try) when no
 *                work item came; QF_PENDING (poll only, not a status).
 *              A failure leaves the counters as they were, except that work
 *              units finished before it (empty files) stay counted.
 */
QF_API qf_code qf_reader_read(qf_reader *r, qf_queue *work, qf_record *ret_rec);
QF_API qf_code qf_reader_read_until(qf_reader *r, qf_queue *work, qf_deadline deadline,
                                    qf_record *ret_rec);
QF_API qf_code qf_reader_try_read(qf_reader *r, qf_queue *work, qf_record *ret_rec);
QF_API qf_code qf_reader_poll_read(qf_reader *r, qf_queue *work, qf_waker *waker,
                                   qf_record *ret_rec);

/**
 * qf_reader_read_up_to() / _until() / qf_reader_try_read_up_to() /
 * qf_reader_poll_read_up_to() - between 1 and n records into
 * ret_recs[0..*ret_n) (spec 189).
 *
 * Like read, but keeps reading the current file until n records are
 * produced or the file ends; at the end of a file it returns what it has if
 * that is at least one record, and otherwise moves on to the next file
 * name. So a call never waits for a work item once it has a record, and
 * QF_PENDING always means *ret_n = 0 records were produced. n == 0 returns
 * QF_OK with *ret_n = 0 at once.
 *
 * Ownership:   ret_recs[0..n) are the caller's reusable records (see
 *              qf_reader_read); records at and after *ret_n are unspecified.
 * Returns:     as qf_reader_read(). If an error inside a file happens after
 *              records were produced by this call, the call returns QF_OK
 *              with those records and the next call on the reader returns
 *              the error (see the differences from TensorFlow above).
 *              *ret_n is untouched on failure.
 */
QF_API qf_code qf_reader_read_up_to(qf_reader *r, qf_queue *work, size_t n, qf_record *ret_recs,
                                    size_t *ret_n);
QF_API qf_code qf_reader_read_up_to_until(qf_reader *r, qf_queue *work, size_t n,
                                          qf_deadline deadline, qf_record *ret_recs, size_t *ret_n);
QF_API qf_code qf_reader_try_read_up_to(qf_reader *r, qf_queue *work, size_t n, qf_record *ret_recs,
                                        size_t *ret_n);
QF_API qf_code qf_reader_poll_read_up_to(qf_reader *r, qf_queue *work, size_t n, qf_waker *waker,
                                         qf_record *ret_recs, size_t *ret_n);

/**
 * qf_reader_num_records_produced() - records returned since creation or the
 * last reset (spec 186). qf_reader_num_work_units_completed() - work items
 * finished (files read to their end; every IdentityReader read) since then.
 *
 * Concurrency: any thread, also during a read. Progress: wait-free (one
 * relaxed load). A snapshot: a read in progress adds its records when it
 * returns.
 */
QF_API int64_t qf_reader_num_records_produced(const qf_reader *r);
QF_API int64_t qf_reader_num_work_units_completed(const qf_reader *r);

/**
 * qf_reader_reset() - zero both counters, close the current file and drop
 * the current work item without putting it back on the queue (spec 187);
 * also forgets an error held back by read_up_to. The next read dequeues a
 * new work item.
 *
 * Blocking:    never. Concurrency: not concurrently with a read on the same
 *              reader (counter readers are fine). NULL-safe.
 */
QF_API void qf_reader_reset(qf_reader *r);

QF_END_DECLS

#endif
