/* qf_tfrecord_writer.c - TensorFlow's RecordWriter: framing, masked
 * CRC-32C, optional ZLIB / GZIP stream or ZSTD frame.
 *
 * Uncompressed records go through one output buffer (output_buffer_size,
 * 256 KiB by default) and a record larger than it is written straight from
 * the caller's bytes. Compressed records are deflated piece by piece
 * (header, data, footer) straight from the caller's bytes into the output
 * buffer, with Z_NO_FLUSH unless options.zlib.flush_mode asks for a flush
 * after every record; flush() adds a Z_SYNC_FLUSH so that what was written
 * can be inflated by a reader of the file as it stands, close() Z_FINISH.
 * A ZSTD file is one frame, made the same way with libzstd's streaming
 * compressor: ZSTD_e_continue for the pieces, ZSTD_e_flush where zlib
 * would flush, ZSTD_e_end at close (TensorFlow's ZstdOutputBuffer).
 *
 * A write error is sticky: the writer refuses further records (the stream
 * would have a hole) and finish() / close() report it. finish() ends the
 * stream and closes the file but keeps the writer, so that a late write or
 * flush is a clear FAILED_PRECONDITION instead of a use after free;
 * close() is finish() then free(), as it always was.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "qf_reader-impl.h"
#include "qf_status-impl.h"
#include "qf_tfrecord.h"

struct qf_tfrecord_writer {
    int fd;
    char *path;
    qf_compression c;
    int flush_mode;
    bool zinit;
    z_stream zs;
    ZSTD_CCtx *zc; /* QF_COMPRESSION_ZSTD */
    unsigned char *out;
    size_t out_cap;
    size_t out_len;
    uint64_t bytes;
    qf_status *err; /* sticky: the first write error */
    bool closed;    /* finished: the file is closed, the writer kept */
};

static qf_code refuse_closed(const qf_tfrecord_writer *w, const char *what)
{
    return qf_set_error(QF_FAILED_PRECONDITION, "TFRecord writer for '%s' is closed: cannot %s",
                        w->path, what);
}

static qf_code fail(qf_tfrecord_writer *w, qf_code code)
{
    if (!w->err)
        w->err = qf_last_status();
    return code;
}

static qf_code write_all(qf_tfrecord_writer *w, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t r = write(w->fd, p, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return fail(w, qf__io_error(w->path, errno));
        }
        p += r;
        n -= (size_t)r;
        w->bytes += (size_t)r;
    }
    return QF_OK;
}

static qf_code drain(qf_tfrecord_writer *w)
{
    qf_code rc = write_all(w, w->out, w->out_len);
    w->out_len = 0;
    return rc;
}

/* Uncompressed: append through the buffer. */
static qf_code put_plain(qf_tfrecord_writer *w, const void *data, size_t n)
{
    if (n > w->out_cap - w->out_len) {
        qf_code rc = drain(w);
        if (rc != QF_OK)
            return rc;
        if (n >= w->out_cap)
            return write_all(w, data, n);
    }
    memcpy(w->out + w->out_len, data, n);
    w->out_len += n;
    return QF_OK;
}

/* Compressed: deflate `n` bytes (maybe 0) with `flush`, writing the output
 * buffer whenever it fills. */
static qf_code put_z(qf_tfrecord_writer *w, const void *data, size_t n, int flush)
{
    const unsigned char *p = data;
    do {
        uInt chunk = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
        w->zs.next_in = (Bytef *)(uintptr_t)p;
        w->zs.avail_in = chunk;
        for (;;) {
            /* zlib: a flush needs more than 6 bytes of room, or it emits
             * a new flush marker on every call and never finishes. */
            if (w->out_cap - w->out_len < 8) {
                qf_code rc = drain(w);
                if (rc != QF_OK)
                    return rc;
            }
            w->zs.next_out = w->out + w->out_len;
            w->zs.avail_out = (uInt)(w->out_cap - w->out_len);
            int zr = deflate(&w->zs, n > chunk ? Z_NO_FLUSH : flush);
            w->out_len = w->out_cap - w->zs.avail_out;
            if (zr == Z_STREAM_ERROR)
                return fail(w, qf_set_error(QF_INTERNAL, "deflate failed on '%s'", w->path));
            /* Done when the input is taken and deflate had room to spare
             * (it stops early only when out of output space). */
            if (w->zs.avail_in == 0 && w->zs.avail_out != 0)
                break;
            if (zr == Z_STREAM_END)
                break;
        }
        if (chunk) /* p may be NULL for a bare flush */
            p += chunk;
        n -= chunk;
    } while (n);
    return QF_OK;
}

/* ZSTD: compress `n` bytes (maybe 0) ending with zlib's `flush` as its
 * zstd directive, writing the output buffer whenever it fills. */
static qf_code put_zstd(qf_tfrecord_writer *w, const void *data, size_t n, int flush)
{
    ZSTD_EndDirective how = flush == Z_FINISH     ? ZSTD_e_end
                            : flush == Z_NO_FLUSH ? ZSTD_e_continue
                                                  : ZSTD_e_flush;
    ZSTD_inBuffer in = {data, n, 0};
    for (;;) {
        if (w->out_len == w->out_cap) {
            qf_code rc = drain(w);
            if (rc != QF_OK)
                return rc;
        }
        ZSTD_outBuffer out = {w->out, w->out_cap, w->out_len};
        size_t left = ZSTD_compressStream2(w->zc, &out, &in, how);
        w->out_len = out.pos;
        if (ZSTD_isError(left))
            return fail(w, qf_set_error(QF_INTERNAL, "ZSTD compression failed on '%s': %s", w->path,
                                        ZSTD_getErrorName(left)));
        /* continue: done when the input is taken; flush and end: when
         * nothing is left in the compressor either. */
        if (in.pos == in.size && (how == ZSTD_e_continue || left == 0))
            return QF_OK;
    }
}

static qf_code put(qf_tfrecord_writer *w, const void *data, size_t n, int flush)
{
    switch (w->c) {
    case QF_COMPRESSION_NONE:
        return put_plain(w, data, n);
    case QF_COMPRESSION_ZSTD:
        return put_zstd(w, data, n, flush);
    default:
        return put_z(w, data, n, flush);
    }
}

/* The compressor of a ZSTD writer at `level` (0: libzstd's default). */
static qf_code zstd_start(qf_tfrecord_writer *w, int level)
{
    w->zc = ZSTD_createCCtx();
    if (!w->zc)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a ZSTD stream");
    size_t r =
        ZSTD_CCtx_setParameter(w->zc, ZSTD_c_compressionLevel, level ? level : ZSTD_CLEVEL_DEFAULT);
    if (ZSTD_isError(r))
        return qf_set_error(QF_INVALID_ARGUMENT, "libzstd refuses compression_level %d: %s", level,
                            ZSTD_getErrorName(r));
    return QF_OK;
}

static void store_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

qf_code qf_tfrecord_writer_open(const char *path, const qf_tfrecord_options *opts,
                                qf_tfrecord_writer **ret_writer)
{
    if (!path || !ret_writer)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", path ? "ret_writer" : "path");
    qf_tfrecord_options o = {0};
    if (opts)
        o = *opts;
    if (qf__zlib_options_check(o.compression, &o.zlib, true) != QF_OK)
        return QF_INVALID_ARGUMENT;
    qf_tfrecord_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a TFRecord writer");
    w->fd = -1;
    w->c = o.compression;
    w->flush_mode = o.zlib.flush_mode;
    w->out_cap = o.zlib.output_buffer_size ? o.zlib.output_buffer_size : QF_ZLIB_DEFAULT_BUFFER;
    if (w->out_cap < 64)
        w->out_cap = 64; /* room for zlib's flush markers (see put_z) */
    w->path = strdup(path);
    w->out = malloc(w->out_cap);
    if (!w->path || !w->out) {
        qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a TFRecord writer");
        goto fail;
    }
    if (w->c == QF_COMPRESSION_ZSTD && zstd_start(w, o.zlib.compression_level) != QF_OK)
        goto fail;
    if (w->c == QF_COMPRESSION_ZLIB || w->c == QF_COMPRESSION_GZIP) {
        int level = o.zlib.compression_level == 0                      ? Z_DEFAULT_COMPRESSION
                    : o.zlib.compression_level == QF_ZLIB_LEVEL_STORED ? 0
                                                                       : o.zlib.compression_level;
        int wbits = qf__zlib_window_bits(o.zlib.window_bits);
        if (w->c == QF_COMPRESSION_GZIP)
            wbits += 16;
        int mem = o.zlib.mem_level ? o.zlib.mem_level : 9;
        int zr = deflateInit2(&w->zs, level, Z_DEFLATED, wbits, mem, o.zlib.strategy);
        if (zr != Z_OK) {
            qf_set_error(zr == Z_MEM_ERROR ? QF_RESOURCE_EXHAUSTED : QF_INVALID_ARGUMENT,
                         "zlib refuses these options (window_bits %d, mem_level %d): %s",
                         o.zlib.window_bits, mem, zError(zr));
            goto fail;
        }
        w->zinit = true;
    }
    do
        w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    while (w->fd < 0 && errno == EINTR);
    if (w->fd < 0) {
        qf__io_error(path, errno);
        goto fail;
    }
    *ret_writer = w;
    return QF_OK;
fail:;
    qf_code code = qf_last_code();
    if (w->zinit)
        deflateEnd(&w->zs);
    ZSTD_freeCCtx(w->zc);
    free(w->out);
    free(w->path);
    free(w);
    return code;
}

qf_code qf_tfrecord_writer_write(qf_tfrecord_writer *w, const void *data, size_t len)
{
    if (!w || (!data && len))
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", w ? "data" : "writer");
    if (w->closed)
        return refuse_closed(w, "write");
    if (w->err)
        return qf_set_error(QF_FAILED_PRECONDITION, "TFRecord writer for '%s' failed earlier: %s",
                            w->path, qf_status_message(w->err));
    unsigned char header[12], footer[4];
    uint64_t n = len;
    for (int i = 0; i < 8; i++)
        header[i] = (unsigned char)(n >> (8 * i));
    store_le32(header + 8, qf__crc32c_mask(qf__crc32c(header, 8)));
    store_le32(footer, qf__crc32c_mask(len ? qf__crc32c(data, len) : 0));
    qf_code rc = put(w, header, sizeof(header), Z_NO_FLUSH);
    if (rc == QF_OK && len)
        rc = put(w, data, len, Z_NO_FLUSH);
    if (rc == QF_OK)
        rc = put(w, footer, sizeof(footer), w->flush_mode);
    return rc;
}

qf_code qf_tfrecord_writer_flush(qf_tfrecord_writer *w)
{
    if (!w)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL writer");
    if (w->closed)
        return refuse_closed(w, "flush");
    if (w->err)
        return qf_set_error(QF_FAILED_PRECONDITION, "TFRecord writer for '%s' failed earlier: %s",
                            w->path, qf_status_message(w->err));
    qf_code rc = QF_OK;
    if (w->c != QF_COMPRESSION_NONE)
        rc = put(w, NULL, 0, Z_SYNC_FLUSH);
    if (rc == QF_OK)
        rc = drain(w);
    return rc;
}

qf_code qf_tfrecord_writer_finish(qf_tfrecord_writer *w)
{
    if (!w)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL writer");
    if (!w->closed) {
        w->closed = true;
        qf_code rc = QF_OK;
        if (!w->err) {
            if (w->c != QF_COMPRESSION_NONE)
                rc = put(w, NULL, 0, Z_FINISH);
            if (rc == QF_OK)
                rc = drain(w);
        }
        if (w->fd >= 0 && close(w->fd) != 0 && rc == QF_OK && !w->err)
            fail(w, qf__io_error(w->path, errno));
        w->fd = -1;
        if (w->zinit)
            deflateEnd(&w->zs);
        w->zinit = false;
        ZSTD_freeCCtx(w->zc);
        w->zc = NULL;
        free(w->out);
        w->out = NULL;
        w->out_cap = w->out_len = 0;
    }
    /* The writer's first error, on every call: it is what the file lacks. */
    if (w->err)
        return qf_set_error(qf_status_code(w->err), "%s", qf_status_message(w->err));
    return QF_OK;
}

void qf_tfrecord_writer_free(qf_tfrecord_writer *w)
{
    if (!w)
        return;
    if (!w->closed) {
        /* Errors are for finish/close; free only releases, and leaves the
         * thread's last error as it found it. */
        qf_status *saved = qf_last_status();
        if (qf_tfrecord_writer_finish(w) != QF_OK && saved)
            qf_set_error(qf_status_code(saved), "%s", qf_status_message(saved));
        qf_status_free(saved);
    }
    qf_status_free(w->err);
    free(w->path);
    free(w);
}

qf_code qf_tfrecord_writer_close(qf_tfrecord_writer *w)
{
    if (!w)
        return QF_OK;
    qf_code rc = qf_tfrecord_writer_finish(w);
    qf_status *st = rc == QF_OK ? NULL : qf_last_status();
    qf_tfrecord_writer_free(w);
    if (st) {
        qf_set_error(qf_status_code(st), "%s", qf_status_message(st));
        qf_status_free(st);
    }
    return rc;
}

uint64_t qf_tfrecord_writer_bytes(const qf_tfrecord_writer *w)
{
    if (!w) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_tfrecord_writer_bytes: writer (w) is NULL");
        return 0;
    }
    return w->bytes;
}
