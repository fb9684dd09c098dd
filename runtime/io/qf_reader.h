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
 *   QF_READER_WHOLE_FILE           the whole file, one record    key "<file>"
 *   QF_READER_LMDB                 an LMDB environment's pairs   key = the LMDB key
 *                                  in key order (optional: built when liblmdb is found)
 *
 * TFRecordReader (compression_type) and FixedLengthRecordReader (encoding)
 * read ZLIB and GZIP streams and ZSTD frames (options.compression,
 * options.zlib): the stream is decompressed as it is read and everything else (headers, footers,
 * hops, TFRecord framing, offsets in keys and messages) applies to the
 * decompressed bytes, as in TensorFlow. A damaged or truncated compressed
 * stream is QF_DATA_LOSS "corrupt GZIP stream in '<file>' at compressed
 * offset N (<zlib's reason>)" / "truncated GZIP stream ...", handled like
 * any error inside a file (below). Several concatenated members read as
 * one stream, as gzip(1) reads them (zstd frames likewise, as zstd(1)).
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
 * workers. No thread is created for regular files, no io_uring needed.
 *
 * Named pipes, terminals and other non-regular files never block a worker.
 * They are opened O_NONBLOCK (a FIFO's open does not wait for a writer) and
 * read without waiting; when nothing is there yet (or a FIFO has no writer
 * yet) the poll form registers its waker with an fd watch and returns
 * QF_PENDING, and the reader keeps every byte of a half-read record for the
 * next poll. The watch is one epoll instance served by one thread, started
 * the first time a task waits on such a file (the only thread qflow's
 * readers ever start). A Coordinator stop or a task cancel withdraws the
 * waker like any other (qf_waker_withdraw). The thread forms wait in
 * poll(2) until their deadline; try returns QF_UNAVAILABLE. A FIFO ends
 * when its writers have come and gone.
 *
 * A regular file that shrinks while it is read (truncated under the reader)
 * ends where its data ends, and the reader records a warning: counted
 * (qf_reader_num_warnings), kept (qf_reader_last_warning) and passed to
 * options.on_warning: "'<file>' shrank while being read: N bytes at open,
 * M read; its last record may be torn". Nothing is silent.
 *
 * Reader state. qf_reader_serialize_state() captures the counters, the
 * current work item and the position in it (stream offset, record index,
 * LMDB key); qf_reader_restore_state() puts them back on a reader of the
 * same kind and parameters, and its next read reopens that file and goes
 * on from the record after the last one produced. The format is versioned
 * and checksummed (see qf_reader_serialize_state).
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
 *   - TFRecord lengths are bounded (options.max_record_bytes, 256 MiB by
 *     default, and the file's size for an uncompressed regular file): a
 *     larger length is QF_DATA_LOSS, where TensorFlow tries to allocate it;
 *   - state: TensorFlow's readers other than IdentityReader refuse
 *     SerializeState (UNIMPLEMENTED); every qflow reader supports it, in a
 *     format of its own (not TensorFlow's ReaderBaseState proto).
 *
 * Synchronization table
 *   read forms, reset, free           one thread (or task) at a time per
 *                                     reader; a reader may move between
 *                                     threads between calls (the caller
 *                                     provides the happens-before, as the
 *                                     runtime does for tasks).
 *   counters, name, kind              any thread, any time (relaxed
 *                                     snapshots).
 *   serialize / restore, last warning like a read: one at a time with the
 *                                     reads of that reader.
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
    QF_READER_WHOLE_FILE = 4,
    QF_READER_LMDB = 5,
} qf_reader_kind;

/* Compression of a record file: TensorFlow's compression_type ""/"ZLIB"/
 * "GZIP"/"ZSTD" (TFRecordReader, the TFRecord writer and iterator) and
 * FixedLengthRecordReader's encoding. */
typedef enum qf_compression {
    QF_COMPRESSION_NONE = 0,
    QF_COMPRESSION_ZLIB = 1, /* RFC 1950 streams */
    QF_COMPRESSION_GZIP = 2, /* RFC 1952 members */
    QF_COMPRESSION_ZSTD = 3, /* RFC 8878 frames (libzstd) */
} qf_compression;

/* zlib level "0" (stored, no compression), since 0 means "default" here. */
#define QF_ZLIB_LEVEL_STORED (-1)
/* Default input and output buffer sizes, TensorFlow's 256 KiB. */
#define QF_ZLIB_DEFAULT_BUFFER ((size_t)256 * 1024)

/* TensorFlow's ZlibCompressionOptions. Zero-initialise for TensorFlow's
 * defaults; a field left 0 takes its default. With QF_COMPRESSION_ZSTD only
 * the buffer sizes, compression_level (1..22 as libzstd's, 0: its default,
 * 3) and flush_mode (0, or 2 / 3: each record ends a block a reader of the
 * file as it stands can decode) apply; window_bits, mem_level and strategy
 * must be 0 (QF_INVALID_ARGUMENT naming the field otherwise). */
typedef struct qf_zlib_options {
    /* Compressed bytes read (or written) per file system call; 0: 256 KiB. */
    size_t input_buffer_size;
    /* Decompressed bytes made per inflate call (reader), compressed bytes
     * buffered before a write(2) (writer, at least 64); 0: 256 KiB. */
    size_t output_buffer_size;
    /* log2 of the window, 8..15; 0: 15. GZIP adds zlib's +16 itself. A
     * reader's window must be at least the writer's. 8 is taken as 9 by
     * both (zlib's deflate has no 256-byte window and writes 9 into a ZLIB
     * header), so a file written with 8 reads back with 8. */
    int window_bits;
    /* Writer only: 1..9 as zlib, 0: zlib's default (6),
     * QF_ZLIB_LEVEL_STORED: no compression. */
    int compression_level;
    /* Writer only: 1..9; 0: 9 (TensorFlow's default). */
    int mem_level;
    /* Writer only: zlib's strategy (0 Z_DEFAULT_STRATEGY .. 4 Z_FIXED). */
    int strategy;
    /* Writer only: deflate's flush mode for every write, 0 Z_NO_FLUSH
     * (TensorFlow's default) .. 3 Z_FULL_FLUSH. */
    int flush_mode;
} qf_zlib_options;

/* Default bound of a TFRecord's length (256 MiB): a damaged length with a
 * valid CRC is reported as QF_DATA_LOSS, never allocated for. */
#define QF_READER_DEFAULT_MAX_RECORD ((uint64_t)256 * 1024 * 1024)

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
    /* TFRecordReader's compression_type, FixedLengthRecordReader's
     * encoding; the others refuse anything but QF_COMPRESSION_NONE. */
    qf_compression compression;
    /* The zlib buffer options when compression is set. */
    qf_zlib_options zlib;
    /* TFRecordReader: the largest record length believed; 0:
     * QF_READER_DEFAULT_MAX_RECORD. WholeFileReader: the largest file;
     * 0: no bound but memory (TensorFlow's). */
    uint64_t max_record_bytes;
    /* Called on the reading thread for every warning (a file that shrank
     * while it was read, so its last record may be torn), after it is
     * counted; NULL: only counted (qf_reader_num_warnings). Must not call
     * the reader. */
    void (*on_warning)(void *arg, const qf_reader *r, const char *message);
    void *warning_arg;
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
 *              "record_bytes must be > 0 not 0", "compression is only for
 *              TFRecordReader and FixedLengthRecordReader, not ...",
 *              "unknown compression N", a zlib option out of range ("zlib
 *              window_bits must be 8..15 (or 0) not 3", buffers over 1 GiB),
 *              "max_record_bytes N is too large",
 *              buffer_bytes from 1 to 15, NULL arguments; QF_UNIMPLEMENTED for
 *              QF_READER_LMDB without liblmdb; QF_RESOURCE_EXHAUSTED when
 *              memory runs out (a huge record_bytes). *ret_reader untouched
 *              on failure.
 */
QF_API qf_code qf_reader_new(const qf_reader_options *opts, qf_reader **ret_reader);

/** qf_text_line_reader_new() - TextLineReader(skip_header_lines) (spec
 *  190-196). Returns as qf_reader_new().
 *
 *  Environment: on x86-64 the reader finds line ends with AVX-512 (BW and
 *  VBMI2) or else AVX2 where the CPU has them (looked up once per process);
 *  QF_TEXT_SPLIT=avx2 goes no wider than AVX2, QF_TEXT_SPLIT=baseline keeps
 *  the SSE2 search every x86-64 has. The records are the same either way. */
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

/** qf_tfrecord_reader_new_compressed() - TFRecordReader(compression_type,
 *  options): `compression` QF_COMPRESSION_NONE / _ZLIB / _GZIP / _ZSTD with the zlib
 *  buffer options (NULL: defaults). Returns as qf_reader_new(), and
 *  QF_INVALID_ARGUMENT for a bad compression or zlib option. */
QF_API qf_code qf_tfrecord_reader_new_compressed(qf_compression compression,
                                                 const qf_zlib_options *zlib,
                                                 qf_reader **ret_reader);

/** qf_whole_file_reader_new() - WholeFileReader: one record per file, key
 *  = the file name, value = its whole contents; every read completes a
 *  work unit (an empty file gives one empty record, as in TensorFlow).
 *  Returns as qf_reader_new(). */
QF_API qf_code qf_whole_file_reader_new(qf_reader **ret_reader);

/** qf_lmdb_reader_new() - LMDBReader: the work item names an LMDB
 *  environment (a directory, or a data file opened with MDB_NOSUBDIR as
 *  TensorFlow does), opened read-only without locking; the records are its
 *  main database's (key, value) pairs in key order. Returns as
 *  qf_reader_new(), and QF_UNIMPLEMENTED "qflow was built without LMDB"
 *  when liblmdb was not found at build time. An environment that cannot be
 *  opened fails the read with the code of LMDB's error (NOT_FOUND for
 *  ENOENT ...) and "<path>; <mdb_strerror>"; a damaged database is
 *  QF_DATA_LOSS. */
QF_API qf_code qf_lmdb_reader_new(qf_reader **ret_reader);

/** qf_reader_have_lmdb() - true when qflow was built with liblmdb. */
QF_API bool qf_reader_have_lmdb(void);

/** qf_compression_parse() - TensorFlow's compression_type strings: "" (or
 *  NULL) -> QF_COMPRESSION_NONE, "ZLIB", "GZIP", "ZSTD", exactly these
 *  (upper case), as TFRecordOptions takes them. Returns QF_OK, or
 *  QF_INVALID_ARGUMENT "unknown compression type 'X' (TFRecord compression
 *  types are "" for none, "ZLIB", "GZIP" and "ZSTD")" (*ret untouched). */
QF_API qf_code qf_compression_parse(const char *s, qf_compression *ret);

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
 *                '<file>' ..." (a checksum, or a length over
 *                max_record_bytes) or "truncated record at <offset> in
 *                '<file>'"; (ZLIB / GZIP / ZSTD) "corrupt GZIP stream in '<file>'
 *                at compressed offset N (...)" or "truncated ..."; the file
 *                is abandoned;
 *              QF_RESOURCE_EXHAUSTED (WholeFileReader) for a file over
 *                max_record_bytes; the file is abandoned;
 *              QF_DEADLINE_EXCEEDED (_until), QF_UNAVAILABLE (try) when no
 *                work item came, or when a non-regular file (a pipe) has no
 *                bytes yet ("<reader>: nothing to read from '<file>' yet":
 *                the reader keeps its place, call again); QF_PENDING (poll
 *                only, not a status) for either wait; QF_CANCELLED
 *                "Dequeue operation was cancelled" (poll, in a task its
 *                runtime has cancelled, for a wait on the work queue);
 *              QF_FAILED_PRECONDITION from read / _until called inside a
 *                task when they would wait (a queue, or a pipe).
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

/**
 * qf_reader_num_warnings() - warnings recorded since creation (not reset by
 * qf_reader_reset: a warning is about the data, not the position).
 * Any thread; wait-free (relaxed load).
 *
 * qf_reader_last_warning() - the text of the last warning, "" when none.
 * The string lives in the reader and is overwritten by the next warning:
 * call it like a read (not concurrently with one).
 *
 * For a NULL reader both record QF_INVALID_ARGUMENT and return 0 or "".
 */
QF_API int64_t qf_reader_num_warnings(const qf_reader *r);
QF_API const char *qf_reader_last_warning(const qf_reader *r);

/* Version of the state format written by qf_reader_serialize_state(). */
#define QF_READER_STATE_VERSION 1

/**
 * qf_reader_serialize_state() - the reader's state as bytes: counters,
 * current work item, position in it, the reader's kind and parameters.
 *
 * Format (little-endian): "QFRS", u16 version (QF_READER_STATE_VERSION),
 * u16 kind, u32 flags (bit 0: a work item is in progress), i64 records
 * produced, i64 work units completed, u64 parameters fingerprint, u64
 * stream offset of the next record, u64 record index, u64 bytes or lines
 * still to skip, u32 + bytes work item, u32 + bytes LMDB key, and a u32
 * masked CRC-32C of everything before it.
 *
 * The position is that of the record after the last one produced: a
 * half-read record (a pipe that paused) is read again from its start after
 * a restore. An error held back by read_up_to is not part of the state.
 *
 * Ownership:   *ret_buf is malloc'd, the caller frees it (free()).
 * Blocking:    never. Concurrency: like a read.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments;
 *              QF_RESOURCE_EXHAUSTED. Outputs untouched on failure.
 */
QF_API qf_code qf_reader_serialize_state(const qf_reader *r, void **ret_buf, size_t *ret_len);

/**
 * qf_reader_restore_state() - make `r` continue where the reader whose
 * state `buf` holds stopped: counters and work item restored, the current
 * file (if any) closed; the next read reopens the work item, moves to the
 * saved position (lseek for an uncompressed regular file, else read and
 * drop; LMDB: the cursor goes past the saved key) and produces the next
 * record. A file that can no longer be opened then fails that read as any
 * open does; one shorter than the saved position simply ends.
 *
 * Blocking:    never (opens nothing). Concurrency: like a read.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments, and with
 *              nothing changed for a state that does not parse: "Could
 *              not parse state for <Kind> '<name>': " (TensorFlow's words)
 *              and then "not a reader state" (bad magic or too
 *              short), "reader state version N is not supported", "reader
 *              state is corrupt (checksum mismatch)" or inconsistent
 *              lengths, "reader state is from a TFRecordReader, not a
 *              TextLineReader", "reader state was made with other
 *              parameters (...)"; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_reader_restore_state(qf_reader *r, const void *buf, size_t len);

QF_END_DECLS

#endif
