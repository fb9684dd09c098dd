/* qf_tfrecord.h - TensorFlow record files without a pipeline: a writer
 * (TFRecordWriter / tf.io.TFRecordWriter) and an iterator
 * (tf.compat.v1.io.tf_record_iterator).
 *
 * The format, shared with qf_reader.h's TFRecordReader: each record is
 *
 *     uint64  length                     little-endian
 *     uint32  masked CRC-32C of length   (of those 8 bytes)
 *     byte    data[length]
 *     uint32  masked CRC-32C of data
 *
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, optionally inside a
 * ZLIB or GZIP stream (qf_compression, qf_zlib_options: TensorFlow's
 * TFRecordOptions). A file written here reads back byte-identical through
 * the reader and the iterator, and through TensorFlow.
 *
 * Synchronization table
 *   writer calls          one thread at a time per writer (no internal lock)
 *   iterator calls        one thread at a time per iterator
 *   several of either     independent
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
 *              *ret_writer (qf_tfrecord_writer_close()).
 * Blocking:    opens the file (file system latency).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL path / ret_writer or a
 *              bad option (naming it: "zlib compression_level must be ..."),
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
 *              with len > 0; QF_FAILED_PRECONDITION after an earlier write
 *              error (the writer is then only good for close); the write's
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
 * Blocking:    write(2). Returns: QF_OK; QF_INVALID_ARGUMENT for NULL; the
 *              write's error (then as write).
 */
QF_API qf_code qf_tfrecord_writer_flush(qf_tfrecord_writer *w);

/**
 * qf_tfrecord_writer_close() - finish the stream (zlib Z_FINISH for a
 * compressed file), write what is buffered, close the file and free the
 * writer, also when something fails on the way. NULL-safe (QF_OK).
 *
 * Returns:     QF_OK; the first error of the final writes or close(2) (the
 *              writer is freed anyway), or the error an earlier write left.
 */
QF_API qf_code qf_tfrecord_writer_close(qf_tfrecord_writer *w);

/** qf_tfrecord_writer_bytes() - bytes handed to the file so far
 *  (compressed bytes for a compressed file). Same thread as writes. 0 and
 *  QF_INVALID_ARGUMENT recorded for a NULL writer. */
QF_API uint64_t qf_tfrecord_writer_bytes(const qf_tfrecord_writer *w);

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
 * Ownership:   on QF_OK *ret_data points at the record (NUL-terminated
 *              after *ret_len bytes), owned by the iterator and valid until
 *              the next call or free.
 * Blocking:    reads the file; on a pipe waits for its bytes, as long as it
 *              takes (next) or until `deadline` (_until).
 * Returns:     QF_OK; QF_OUT_OF_RANGE "end of '<path>'" after the last
 *              record (and on every later call); QF_DATA_LOSS "truncated
 *              record at N in '<path>'" / "corrupted record at N ..." /
 *              "corrupt GZIP stream ..." (the iterator is then finished:
 *              later calls return QF_OUT_OF_RANGE, as Python's iterator
 *              stops after raising); QF_DEADLINE_EXCEEDED (_until, the
 *              iterator keeps its place); QF_INVALID_ARGUMENT for NULL.
 *              Outputs untouched on failure.
 */
QF_API qf_code qf_tfrecord_iterator_next(qf_tfrecord_iterator *it, const char **ret_data,
                                         size_t *ret_len);
QF_API qf_code qf_tfrecord_iterator_next_until(qf_tfrecord_iterator *it, qf_deadline deadline,
                                               const char **ret_data, size_t *ret_len);

/** qf_tfrecord_iterator_offset() - stream offset (decompressed) of the
 *  record the next call returns: the key a TFRecordReader gives it. 0 and
 *  QF_INVALID_ARGUMENT recorded for a NULL iterator. */
QF_API uint64_t qf_tfrecord_iterator_offset(const qf_tfrecord_iterator *it);

/** qf_tfrecord_iterator_free() - close the file and free. NULL-safe. */
QF_API void qf_tfrecord_iterator_free(qf_tfrecord_iterator *it);

QF_END_DECLS

#endif
