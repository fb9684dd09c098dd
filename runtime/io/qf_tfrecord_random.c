/* qf_tfrecord_random.c - the record at a byte offset of an uncompressed
 * TFRecord file (tf_record_random_reader).
 *
 * Every read is pread(2) at the offset, so reads share no file position
 * and see the file as it is now. The first pread takes up to the buffer's
 * size (16 KiB at first): a small record, header and footer come in one
 * call. A longer record's length is believed only once its CRC matches,
 * it is within max_record_bytes and the file (fstat) holds all of it: a
 * wrong offset that happens to look like a header never makes us allocate
 * for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qf_reader-impl.h"
#include "qf_tfrecord.h"

#define HEADER_BYTES 12
#define FOOTER_BYTES 4
#define FIRST_READ ((size_t)16 * 1024)

struct qf_tfrecord_random_reader {
    int fd;
    char *path;
    uint64_t max_record_bytes;
    char *buf; /* header, data, footer of the last record read */
    size_t cap;
};

qf_code qf_tfrecord_random_reader_open(const char *path, const qf_tfrecord_options *opts,
                                       qf_tfrecord_random_reader **ret_rr)
{
    if (!path || !ret_rr)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", path ? "ret_rr" : "path");
    qf_tfrecord_options o = {0};
    if (opts)
        o = *opts;
    if (o.compression == QF_COMPRESSION_ZLIB || o.compression == QF_COMPRESSION_GZIP ||
        o.compression == QF_COMPRESSION_ZSTD)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "random access needs an uncompressed file: a %s stream can only be "
                            "read from its start (qf_tfrecord_iterator)",
                            o.compression == QF_COMPRESSION_ZLIB   ? "ZLIB"
                            : o.compression == QF_COMPRESSION_GZIP ? "GZIP"
                                                                   : "ZSTD");
    if (o.compression != QF_COMPRESSION_NONE)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "unknown compression %d (QF_COMPRESSION_NONE, _ZLIB, _GZIP or _ZSTD)",
                            (int)o.compression);
    qf_tfrecord_random_reader *rr = calloc(1, sizeof(*rr));
    if (!rr)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a TFRecord random reader");
    rr->fd = -1;
    rr->max_record_bytes = o.max_record_bytes ? o.max_record_bytes : QF_READER_DEFAULT_MAX_RECORD;
    rr->path = strdup(path);
    if (!rr->path) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a TFRecord random reader");
        goto fail;
    }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer before we can
     * see it is one and refuse it. */
    do
        rr->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    while (rr->fd < 0 && errno == EINTR);
    if (rr->fd < 0) {
        qf__io_error(path, errno);
        goto fail;
    }
    struct stat st;
    if (fstat(rr->fd, &st) != 0) {
        qf__io_error(path, errno);
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        qf_set_error(QF_FAILED_PRECONDITION,
                     "'%s' is not a regular file: random access needs one (a pipe or device "
                     "can be read in order with qf_tfrecord_iterator)",
                     path);
        goto fail;
    }
    *ret_rr = rr;
    return QF_OK;
fail:;
    qf_code code = qf_last_code();
    if (rr->fd >= 0)
        close(rr->fd);
    free(rr->path);
    free(rr);
    return code;
}

/* pread until n bytes or the end of the file. */
static qf_code pread_full(qf_tfrecord_random_reader *rr, char *dst, size_t n, uint64_t off,
                          size_t *ret_got)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(rr->fd, dst + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return qf__io_error(rr->path, errno);
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    *ret_got = got;
    return QF_OK;
}

static qf_code file_size(qf_tfrecord_random_reader *rr, uint64_t *ret)
{
    struct stat st;
    if (fstat(rr->fd, &st) != 0)
        return qf__io_error(rr->path, errno);
    *ret = (uint64_t)st.st_size;
    return QF_OK;
}

static qf_code grow(qf_tfrecord_random_reader *rr, size_t n)
{
    if (n <= rr->cap)
        return QF_OK;
    char *b = realloc(rr->buf, n);
    if (!b)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte record of '%s'", n,
                            rr->path);
    rr->buf = b;
    rr->cap = n;
    return QF_OK;
}

static qf_code truncated(const qf_tfrecord_random_reader *rr, uint64_t off)
{
    return qf_set_error(QF_DATA_LOSS, "truncated record at %" PRIu64 " in '%s'", off, rr->path);
}

/* QF_OUT_OF_RANGE: no record starts at offset (at or past the end). */
static qf_code no_record_at(qf_tfrecord_random_reader *rr, uint64_t offset)
{
    uint64_t size = 0;
    qf_code rc = file_size(rr, &size);
    if (rc != QF_OK)
        return rc;
    return qf_set_error(QF_OUT_OF_RANGE,
                        "no record at offset %" PRIu64 " in '%s': it ends at %" PRIu64, offset,
                        rr->path, size);
}

/* The record's header, the first got bytes read at offset: its length,
 * checked against its checksum and max_record_bytes. */
static qf_code check_header(const qf_tfrecord_random_reader *rr, uint64_t offset, size_t got,
                            uint64_t *ret_len)
{
    if (got < HEADER_BYTES)
        return truncated(rr, offset);
    const unsigned char *h = (const unsigned char *)rr->buf;
    uint64_t len = qf__load_le64(h);
    if (qf__crc32c_unmask(qf__load_le32(h + 8)) != qf__crc32c(h, 8))
        return qf_set_error(QF_DATA_LOSS,
                            "corrupted record at %" PRIu64
                            " in '%s' (length checksum mismatch: %" PRIu64
                            " is not the start of a record, or the record is damaged)",
                            offset, rr->path, offset);
    if (len > rr->max_record_bytes || len > SIZE_MAX - HEADER_BYTES - FOOTER_BYTES - 1)
        return qf_set_error(QF_DATA_LOSS,
                            "corrupted record at %" PRIu64 " in '%s' (length %" PRIu64
                            " is over max_record_bytes %" PRIu64 ")",
                            offset, rr->path, len, rr->max_record_bytes);
    *ret_len = len;
    return QF_OK;
}

/* The rest of a record of `total` bytes at offset whose first `got` bytes
 * are in the buffer. */
static qf_code read_rest(qf_tfrecord_random_reader *rr, uint64_t offset, size_t got, size_t total)
{
    if (got < FIRST_READ)
        return truncated(rr, offset); /* the file ended inside it */
    uint64_t size = 0;
    qf_code rc = file_size(rr, &size);
    if (rc != QF_OK)
        return rc;
    if (size < offset || size - offset < total)
        return truncated(rr, offset);
    if ((rc = grow(rr, total + 1)) != QF_OK)
        return rc;
    size_t more = 0;
    if ((rc = pread_full(rr, rr->buf + got, total - got, offset + got, &more)) != QF_OK)
        return rc;
    if (got + more < total)
        return truncated(rr, offset); /* shrank between fstat and pread */
    return QF_OK;
}

qf_code qf_tfrecord_random_reader_read(qf_tfrecord_random_reader *rr, uint64_t offset,
                                       const char **ret_data, size_t *ret_len,
                                       uint64_t *ret_next_offset)
{
    if (!rr || !ret_data || !ret_len)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !rr         ? "reader"
                            : !ret_data ? "ret_data"
                                        : "ret_len");
    if (offset > (uint64_t)INT64_MAX - FIRST_READ)
        return no_record_at(rr, offset);
    qf_code rc = grow(rr, FIRST_READ);
    if (rc != QF_OK)
        return rc;
    /* Not the whole buffer: one large record read earlier must not make
     * every later read of a small one large too. */
    size_t got = 0;
    if ((rc = pread_full(rr, rr->buf, FIRST_READ, offset, &got)) != QF_OK)
        return rc;
    if (got == 0)
        return no_record_at(rr, offset);
    uint64_t len = 0;
    if ((rc = check_header(rr, offset, got, &len)) != QF_OK)
        return rc;
    size_t total = HEADER_BYTES + (size_t)len + FOOTER_BYTES;
    if (total > got && (rc = read_rest(rr, offset, got, total)) != QF_OK)
        return rc;
    char *data = rr->buf + HEADER_BYTES;
    if (qf__crc32c_unmask(qf__load_le32((const unsigned char *)data + len)) !=
        qf__crc32c(data, (size_t)len))
        return qf_set_error(QF_DATA_LOSS,
                            "corrupted record at %" PRIu64 " in '%s' (data checksum mismatch)",
                            offset, rr->path);
    data[len] = '\0'; /* over the footer, checked already */
    *ret_data = data;
    *ret_len = (size_t)len;
    if (ret_next_offset)
        *ret_next_offset = offset + total;
    return QF_OK;
}

void qf_tfrecord_random_reader_free(qf_tfrecord_random_reader *rr)
{
    if (!rr)
        return;
    if (rr->fd >= 0)
        close(rr->fd);
    free(rr->buf);
    free(rr->path);
    free(rr);
}
