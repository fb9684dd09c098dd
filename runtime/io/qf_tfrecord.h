/* qf_tfrecord.h - TensorFlow record files without a pipeline: a writer
 * (TFRecordWriter / tf.io.TFRecordWriter), an iterator
 * (tf.compat.v1.io.tf_record_iterator) and a random-access reader (the
 * record at a byte offset: TensorFlow's tf_record_random_reader).
 *
 * The format, shared with qf_reader.h's TFRecordReader: each record is
 *
 *     uint64  length                     little-endian
 *     uint32  masked CRC-32C of length   (of those 8 bytes)
 *     byte    data[length]
 *     uint32  masked CRC-32C of data
 *
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, optionally inside a
 * ZLIB or GZIP stream or ZSTD frames (qf_compression, qf_zlib_options:
 * TensorFlow's TFRecordOptions). A file written here reads back
 * byte-identical through the reader and the iterator, and through
 * TensorFlow, for every option value (window_bits 8 included, see
 * qf_zlib_options); a ZSTD file is one frame, and a reader takes any number
 * of frames one after another (zstd(1)'s output, or files concatenated).
 * There is no SNAPPY TFRecord: TensorFlow's TFRecordOptions takes "",
 * "ZLIB", "GZIP" and (since after 1.x) "ZSTD" only, and so does
 * qf_compression_parse().
 *
 * Synchronization table
 *   writer calls          one thread at a time per writer (no internal lock)
 *   iterator calls        one thread at a time per iterator
 *   random reader calls   one thread at a time per reader
 *   qf_crc32c_extend      any thread, any number at once
 *   several of any        independent
 */
#ifndef QF_TFRECORD_H
#define QF_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_reader.h"
#include "qf_status.h"
#include "qf_time.h"

QF_BEGIN_DECLS

typedef struct qf_tfrecord_writer qf_tfrecord_writer;
typedef struct qf_tfrecord_iterator qf_tfrecord_iterator;
typedef struct qf_tfrecord_random_reader qf_tfrecord_random_reader;

/* TensorFlow's TFRecordOptions. Zero-initialise for an uncompressed file. */
typedef struct qf_tfrecord_options {
    qf_compression compression;
    /* zlib buffers, window, and (writer) level, mem_level, strategy,
     * flush_mode; zero fields take TensorFlow's defaults. */
    qf_zlib_options zlib;
    /* Iterator: the largest record length believed; 0:
     * QF_READER_DEFAULT_MAX_RECORD. Ignored by the writer. */
    uint64_t max_record_bytes;
} qf_tfrecord_options;

/**
 * qf_tfrecord_writer_open() - create (or truncate) `path` and write
 * records to it.
 *
 * Ownership:   path and opts are read during the call only; the caller owns
 *              *ret_writer (qf_tfrecord_writer_close(), or
 *              qf_tfrecord_writer_finish() then qf_tfrecord_writer_free()).
 * Blocking:    opens the file (file system latency).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL path / ret_writer or a
 *              bad option (naming it: "zlib compression_level must be ...",
 *              "unknown compression 7 (QF_COMPRESSION_NONE, _ZLIB,
 *              _GZIP or _ZSTD)"),
 *              NULL opts meaning an uncompressed file; the open's error
 *              mapped like a reader's ("<path>; <strerror>");
 *              QF_RESOURCE_EXHAUSTED. *ret_writer untouched on failure and
 *              no file created for a bad option.
 */
QF_API qf_code qf_tfrecord_writer_open(const char *path, const qf_tfrecord_options *opts,
                                       qf_tfrecord_writer **ret_writer);

/**
 * qf_tfrecord_writer_write() - append one record of `len` bytes (any bytes,
 * NULs included; len 0 is an empty record).
 *
 * Ownership:   data is read during the call only (NULL allowed when len 0).
 * Blocking:    may write(2) when the writer's buffer fills (file system
 *              latency, never indefinitely on a regular file).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL writer or NULL data
 *              with len > 0; QF_FAILED_PRECONDITION "TFRecord writer for
 *              '<path>' is closed: cannot write" after finish(), or after
 *              an earlier write error (the writer is then only good for
 *              finish / close / free); the write's
 *              error ("<path>; No space left on device": RESOURCE_EXHAUSTED
 *              ...). Nothing of a failed record is promised to be absent
 *              from the file.
 */
QF_API qf_code qf_tfrecord_writer_write(qf_tfrecord_writer *w, const void *data, size_t len);

/**
 * qf_tfrecord_writer_flush() - hand everything written so far to the file
 * (for a compressed file a zlib Z_SYNC_FLUSH first, so a reader of the file
 * as it is can inflate every record written so far). Not an fsync.
 *
 * Blocking:    write(2). Returns: QF_OK; QF_INVALID_ARGUMENT for NULL;
 *              QF_FAILED_PRECONDITION "... is closed: cannot flush" after
 *              finish(); the write's error (then as write).
 */
QF_API qf_code qf_tfrecord_writer_flush(qf_tfrecord_writer *w);

/**
 * qf_tfrecord_writer_finish() - TFRecordWriter.close(): finish the stream
 * (zlib Z_FINISH for a compressed file), write what is buffered and close
 * the file, but keep the writer: later writes and flushes are refused with
 * QF_FAILED_PRECONDITION "TFRecord writer for '<path>' is closed", and
 * qf_tfrecord_writer_bytes() still answers. Calling it again does nothing
 * more.
 *
 * Ownership:   the caller still owns w (qf_tfrecord_writer_free()).
 * Blocking:    write(2) and close(2).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL; the writer's first
 *              error (of an earlier write, or of these final writes or
 *              close(2)), on this and every later call: the file lacks
 *              what came after it. The file is closed in every case.
 */
QF_API qf_code qf_tfrecord_writer_finish(qf_tfrecord_writer *w);

/**
 * qf_tfrecord_writer_free() - release the writer, finishing it first if
 * that was not done (errors of that finish are not reported, and the
 * thread's last error is left as it was: call finish() to see them).
 * NULL-safe. The writer must not be used afterwards.
 */
QF_API void qf_tfrecord_writer_free(qf_tfrecord_writer *w);

/**
 * qf_tfrecord_writer_close() - qf_tfrecord_writer_finish() then
 * qf_tfrecord_writer_free(): the writer is freed also when something fails
 * on the way. NULL-safe (QF_OK). After it the writer is gone: use finish()
 * to keep a handle whose late writes fail cleanly.
 *
 * Returns:     QF_OK; finish()'s error (the writer is freed anyway).
 */
QF_API qf_code qf_tfrecord_writer_close(qf_tfrecord_writer *w);

/** qf_tfrecord_writer_bytes() - bytes handed to the file so far
 *  (compressed bytes for a compressed file), also after finish(). Same
 *  thread as writes. 0 and QF_INVALID_ARGUMENT recorded for a NULL
 *  writer. */
QF_API uint64_t qf_tfrecord_writer_bytes(const qf_tfrecord_writer *w);

/**
 * qf_crc32c_extend() - the CRC-32C (Castagnoli) of n more bytes at data,
 * continuing from crc, the value of the bytes before them (0 to start):
 * qf_crc32c_extend(qf_crc32c_extend(0, "1234", 4), "56789", 5) ==
 * qf_crc32c_extend(0, "123456789", 9) == 0xE3069283. The checksum a
 * record's framing carries (masked, see above), computed as the readers
 * compute it: on x86-64 with SSE4.2 (built with GCC or Clang) the crc32
 * instruction, three chains at once over 192 bytes and more; elsewhere
 * tables; for callers that frame or check records themselves.
 *
 * Ownership:   data is only read, during the call.
 * Blocking:    never, but for calls that race the process's first one:
 *              they wait while it builds the tables (about 8 KiB, tens of
 *              microseconds, once).
 * Concurrency: any thread, any number at once. No allocation.
 * Progress:    wait-free once the first call has returned.
 * Returns:     the CRC. data may be NULL only with n 0; NULL with n > 0
 *              returns crc and records QF_INVALID_ARGUMENT.
 */
QF_API uint32_t qf_crc32c_extend(uint32_t crc, const void *data, size_t n);

/**
 * qf_tfrecord_iterator_open() - read the records of one file in order, no
 * queue or pipeline involved (tf_record_iterator(path, options)).
 *
 * Ownership:   the caller owns *ret_it (qf_tfrecord_iterator_free()).
 * Blocking:    opens the file. A named pipe opens without waiting for its
 *              writer (reads then wait, see next).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments or bad
 *              options; the open's error (QF_NOT_FOUND "<path>; No such
 *              file or directory", ...); QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_tfrecord_iterator_open(const char *path, const qf_tfrecord_options *opts,
                                         qf_tfrecord_iterator **ret_it);

/**
 * qf_tfrecord_iterator_next() / _until() - the next record's bytes.
 *
 * Keeps its place, as today's TensorFlow iterator does: after an end or a
 * failure, the next call reads the file again from the end of the last
 * record returned (the file stays open; no reopen by name). So a file
 * being written can be followed: records appended after an OUT_OF_RANGE
 * come out on a later call, a record found cut short (DATA_LOSS
 * "truncated record") comes out once its writer has completed it, and a
 * damaged record (DATA_LOSS "corrupted record") is reported again on every
 * call (nothing is skipped: a caller that wants to go past damage must
 * stop). A tail shorter than a record's 12-byte header is also DATA_LOSS
 * "truncated record" (TensorFlow: OUT_OF_RANGE). The uncompressed file is simply read again from
 * that offset. A ZLIB / GZIP / ZSTD file goes on inflating where it stopped when it stopped at a
 * record boundary for want of input, which is the state of a file whose writer has flushed but not
 * finished it: qflow reports that state as DATA_LOSS "truncated ZLIB stream" (TensorFlow:
 * OUT_OF_RANGE), and records the writer flushes later come out on the next calls. After any other
 * stop in a compressed file the next call inflates the file again from its
 * start up to the last record returned (as TensorFlow does), a cost of
 * the file's size. A named pipe or other non-regular file cannot be read
 * again: there the first end or failure is final (QF_OUT_OF_RANGE "end of
 * '<path>'" on every later call).
 *
 * Ownership:   on QF_OK *ret_data points at the record (NUL-terminated
 *              after *ret_len bytes), owned by the iterator and valid until
 *              the next call or free.
 * Blocking:    reads the file; on a pipe waits for its bytes, as long as it
 *              takes (next) or until `deadline` (_until).
 * Returns:     QF_OK; QF_OUT_OF_RANGE "end of '<path>'" after the last
 *              record (again on later calls while nothing is appended;
 *              "... is now shorter than the N bytes already read" when the
 *              file shrank below the last record returned); QF_DATA_LOSS
 *              "truncated record at N in '<path>'" / "corrupted record at N
 *              ..." / "corrupt GZIP stream ..." / "truncated GZIP stream
 *              ..." (see above for later calls); QF_DEADLINE_EXCEEDED
 *              (_until, the iterator keeps its place); the read's error;
 *              QF_INVALID_ARGUMENT for NULL. Outputs untouched on failure.
 */
QF_API qf_code qf_tfrecord_iterator_next(qf_tfrecord_iterator *it, const char **ret_data,
                                         size_t *ret_len);
QF_API qf_code qf_tfrecord_iterator_next_until(qf_tfrecord_iterator *it, qf_deadline deadline,
                                               const char **ret_data, size_t *ret_len);

/** qf_tfrecord_iterator_offset() - stream offset (decompressed) after the
 *  last record returned (0 before the first): where the next call reads,
 *  the key a TFRecordReader gives the record it finds there. 0 and
 *  QF_INVALID_ARGUMENT recorded for a NULL iterator. */
QF_API uint64_t qf_tfrecord_iterator_offset(const qf_tfrecord_iterator *it);

/** qf_tfrecord_iterator_free() - close the file and free. NULL-safe. */
QF_API void qf_tfrecord_iterator_free(qf_tfrecord_iterator *it);

/**
 * qf_tfrecord_random_reader_open() - read records of an uncompressed
 * TFRecord file by byte offset (TensorFlow's tf_record_random_reader /
 * io::RecordReader::ReadRecord(offset)).
 *
 * opts: NULL or compression QF_COMPRESSION_NONE (and max_record_bytes, 0:
 * QF_READER_DEFAULT_MAX_RECORD); the zlib fields are ignored. A ZLIB,
 * GZIP or ZSTD stream has no offsets to jump to (TensorFlow's random reader takes
 * uncompressed files only): use the iterator.
 *
 * Ownership:   path and opts are read during the call only; the caller owns
 *              *ret_rr (qf_tfrecord_random_reader_free()).
 * Blocking:    opens the file.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL path / ret_rr, an
 *              unknown compression, or ZLIB / GZIP / ZSTD ("random access needs an
 *              uncompressed file ..."); QF_FAILED_PRECONDITION "'<path>' is
 *              not a regular file ..." for a pipe, device or directory; the
 *              open's error (QF_NOT_FOUND "<path>; No such file or
 *              directory", ...); QF_RESOURCE_EXHAUSTED. *ret_rr untouched
 *              on failure.
 */
QF_API qf_code qf_tfrecord_random_reader_open(const char *path, const qf_tfrecord_options *opts,
                                              qf_tfrecord_random_reader **ret_rr);

/**
 * qf_tfrecord_random_reader_read() - the record that starts at byte
 * `offset`, and the offset of the one after it (offset + 16 + length), with
 * both checksums checked. Offsets come from an earlier read's
 * *ret_next_offset (0 is the first record), a TFRecordReader's key or
 * qf_tfrecord_iterator_offset(). Reads the file as it is at the call
 * (pread(2): a file that grew shows its new records).
 *
 * Ownership:   on QF_OK *ret_data points at the record (NUL-terminated
 *              after *ret_len bytes), owned by the reader and valid until
 *              its next read or free. ret_next_offset may be NULL.
 * Blocking:    pread(2) (file system latency).
 * Returns:     QF_OK; QF_OUT_OF_RANGE "no record at offset N in '<path>':
 *              it ends at S" for an offset at or past the end (TensorFlow:
 *              OutOfRange, IndexError in Python); QF_DATA_LOSS "corrupted
 *              record at N in '<path>' (length checksum mismatch: N is not
 *              the start of a record, or the record is damaged)" (what an
 *              offset inside a record gives), "(data checksum mismatch)",
 *              "(length L is over max_record_bytes M)", "truncated record at
 *              N in '<path>'" when the file ends inside the record (its
 *              length is believed only within the file's size: never
 *              allocated for); the read's error; QF_INVALID_ARGUMENT for a
 *              NULL reader, ret_data or ret_len. Outputs untouched on
 *              failure; the reader stays usable.
 */
QF_API qf_code qf_tfrecord_random_reader_read(qf_tfrecord_random_reader *rr, uint64_t offset,
                                              const char **ret_data, size_t *ret_len,
                                              uint64_t *ret_next_offset);

/** qf_tfrecord_random_reader_free() - close the file and free. NULL-safe. */
QF_API void qf_tfrecord_random_reader_free(qf_tfrecord_random_reader *rr);

QF_END_DECLS

#endif
