/* qf_zstream.c - decompressing ZLIB, GZIP and ZSTD record files as they
 * are read.
 *
 * TensorFlow's ZlibInputStream (and ZstdInputStream): compressed bytes come
 * from the file in input_buffer_size reads, and each decompression call
 * makes at most output_buffer_size bytes. The reader's buffer (qf_rbuf.c)
 * sits on top, so every record format sees the decompressed stream and
 * nothing else.
 *
 * Ends. A stream that ends exactly after a complete member (a gzip member,
 * a zlib stream, a zstd frame; or a file with no bytes at all) is a clean
 * end. After a member, more input starts a new member (concatenated gzip
 * files read as one, as gzip(1) reads them; zstd frames likewise, as
 * zstd(1) reads them). An end inside a member is "truncated", bad data
 * "corrupt"; both are QF_DATA_LOSS naming the file and the compressed
 * offset, and the reader abandons the file like any error inside a file. A
 * QF_PENDING from a pipe leaves the decompressor's state as it is: the next
 * call goes on.
 *
 * The input cursor is zs.next_in / zs.avail_in for every kind: a zstd
 * call's ZSTD_inBuffer is made from it and moves it on, so offsets,
 * resumption and the end checks below are one code for all three.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "qf_reader-impl.h"

struct qf__zin {
    z_stream zs;     /* zlib's state (ZLIB, GZIP); the input cursor for all */
    ZSTD_DStream *d; /* ZSTD's state, else NULL */
    qf_compression c;
    unsigned char *in;
    size_t in_cap;
    size_t out_cap;
    bool in_eof;    /* the file has no more compressed bytes */
    bool in_member; /* inside a member: its end is not reached yet */
    bool broken;    /* inflate found damage: only a reset (a new start) helps */
    /* An error inflate found in a call that also made bytes: those bytes
     * go out first, the error with the next call, so what comes before the
     * damage does not depend on buffer sizes. */
    int held_ret;
    const char *held_msg;
    uint64_t held_off;
};

#define MAX_BUFFER ((size_t)1 << 30)

static const char *cname(qf_compression c)
{
    return c == QF_COMPRESSION_GZIP ? "GZIP" : c == QF_COMPRESSION_ZSTD ? "ZSTD" : "ZLIB";
}

/* The zlib options a ZSTD stream has no use for must be left 0. */
static qf_code zstd_options_check(const qf_zlib_options *o, bool writing)
{
    const char *field = o->window_bits ? "window_bits"
                        : o->mem_level ? "mem_level"
                        : o->strategy  ? "strategy"
                                       : NULL;
    if (field)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "zlib option %s does not apply to a ZSTD stream (leave it 0)", field);
    if (!writing)
        return QF_OK;
    if (o->compression_level < 0 || o->compression_level > ZSTD_maxCLevel())
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "ZSTD compression_level must be 1..%d (or 0: the default, %d) not %d",
                            ZSTD_maxCLevel(), ZSTD_CLEVEL_DEFAULT, o->compression_level);
    if (o->flush_mode != Z_NO_FLUSH && o->flush_mode != Z_SYNC_FLUSH &&
        o->flush_mode != Z_FULL_FLUSH)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "ZSTD flush_mode must be 0 (none), 2 or 3 (a flush after every "
                            "record) not %d",
                            o->flush_mode);
    return QF_OK;
}

qf_code qf__zlib_options_check(qf_compression c, const qf_zlib_options *o, bool writing)
{
    if (c != QF_COMPRESSION_NONE && c != QF_COMPRESSION_ZLIB && c != QF_COMPRESSION_GZIP &&
        c != QF_COMPRESSION_ZSTD)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "unknown compression %d (QF_COMPRESSION_NONE, _ZLIB, _GZIP or _ZSTD)",
                            (int)c);
    if (o->input_buffer_size > MAX_BUFFER)
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib input_buffer_size %zu is over 1 GiB",
                            o->input_buffer_size);
    if (o->output_buffer_size > MAX_BUFFER)
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib output_buffer_size %zu is over 1 GiB",
                            o->output_buffer_size);
    if (o->window_bits != 0 && (o->window_bits < 8 || o->window_bits > 15))
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib window_bits must be 8..15 (or 0) not %d",
                            o->window_bits);
    if (c == QF_COMPRESSION_ZSTD)
        return zstd_options_check(o, writing);
    if (!writing)
        return QF_OK;
    if (o->compression_level != QF_ZLIB_LEVEL_STORED &&
        (o->compression_level < 0 || o->compression_level > 9))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "zlib compression_level must be 0..9 or QF_ZLIB_LEVEL_STORED not %d",
                            o->compression_level);
    if (o->mem_level < 0 || o->mem_level > 9)
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib mem_level must be 1..9 (or 0) not %d",
                            o->mem_level);
    if (o->strategy < 0 || o->strategy > Z_FIXED)
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib strategy must be 0..%d not %d", Z_FIXED,
                            o->strategy);
    if (o->flush_mode < 0 || o->flush_mode > Z_FULL_FLUSH)
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib flush_mode must be 0..%d not %d",
                            Z_FULL_FLUSH, o->flush_mode);
    return QF_OK;
}

int qf__zlib_window_bits(int window_bits)
{
    if (window_bits == 0)
        return MAX_WBITS;
    /* zlib's deflate has no 256-byte window: asked for 8 it uses 9 (and
     * says 9 in a ZLIB header), or refuses 8 outright for a GZIP stream.
     * So 8 means 9 on both sides: the writer asks for what it gets, and a
     * reader given 8 takes the streams a writer given 8 makes (its window
     * is 512 bytes but no match reaches back more than 250). */
    return window_bits == 8 ? 9 : window_bits;
}

qf_code qf__zin_new(qf_compression c, const qf_zlib_options *o, qf__zin **ret)
{
    qf__zin *z = calloc(1, sizeof(*z));
    if (!z)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a %s stream", cname(c));
    z->c = c;
    z->in_cap = o->input_buffer_size ? o->input_buffer_size : QF_ZLIB_DEFAULT_BUFFER;
    z->out_cap = o->output_buffer_size ? o->output_buffer_size : QF_ZLIB_DEFAULT_BUFFER;
    z->in = malloc(z->in_cap);
    if (c == QF_COMPRESSION_ZSTD) {
        z->d = ZSTD_createDStream();
        if (!z->in || !z->d) {
            ZSTD_freeDStream(z->d);
            free(z->in);
            free(z);
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a %s stream", cname(c));
        }
        z->zs.next_in = z->in;
        *ret = z;
        return QF_OK;
    }
    int wbits = qf__zlib_window_bits(o->window_bits);
    if (c == QF_COMPRESSION_GZIP)
        wbits += 16; /* zlib: a gzip wrapper instead of a zlib one */
    if (!z->in || inflateInit2(&z->zs, wbits) != Z_OK) {
        free(z->in);
        free(z);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory for a %s stream", cname(c));
    }
    *ret = z;
    return QF_OK;
}

void qf__zin_free(qf__zin *z)
{
    if (!z)
        return;
    if (z->d)
        ZSTD_freeDStream(z->d);
    else
        inflateEnd(&z->zs);
    free(z->in);
    free(z);
}

/* A new member from its first byte. */
static void member_reset(qf__zin *z)
{
    if (z->d)
        ZSTD_DCtx_reset(z->d, ZSTD_reset_session_only);
    else
        inflateReset(&z->zs);
}

void qf__zin_reset(qf__zin *z)
{
    member_reset(z);
    z->zs.avail_in = 0;
    z->zs.next_in = z->in;
    z->in_eof = false;
    z->in_member = false;
    z->broken = false;
    z->held_ret = Z_OK;
}

bool qf__zin_resumable(const qf__zin *z)
{
    return z->in_eof && !z->broken && z->held_ret == Z_OK && z->zs.avail_in == 0;
}

void qf__zin_resume(qf__zin *z)
{
    z->in_eof = false;
}

/* inflate's error `ret` as a status. zlib's messages are static strings. */
static qf_code fail(qf__zin *z, qf__rbuf *rb, int ret, const char *msg, uint64_t off)
{
    z->broken = true;
    if (ret == Z_MEM_ERROR)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory inflating '%s'", rb->path);
    return qf_set_error(QF_DATA_LOSS,
                        "corrupt %s stream in '%s' at compressed offset %" PRIu64 " (%s)",
                        cname(z->c), rb->path, off, msg);
}

/* One zstd call on the input at the cursor into dst[0, n), answered in
 * inflate's terms: Z_STREAM_END when a frame ended with all its bytes out
 * (*ret_made of them in this call), Z_OK when it goes on, Z_DATA_ERROR
 * (Z_MEM_ERROR) with zstd's words in *ret_msg when it is damaged. */
static int zstd_step(qf__zin *z, char *dst, size_t n, size_t *ret_made, const char **ret_msg)
{
    ZSTD_inBuffer in = {z->zs.next_in, z->zs.avail_in, 0};
    ZSTD_outBuffer out = {dst, n, 0};
    size_t r = ZSTD_decompressStream(z->d, &out, &in);
    z->zs.next_in += in.pos;
    z->zs.avail_in -= (uInt)in.pos;
    *ret_made = out.pos;
    if (ZSTD_isError(r)) {
        *ret_msg = ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge
                       ? "its window is larger than the 128 MiB a reader takes, as zstd(1) "
                         "without --long=N refuses it"
                       : ZSTD_getErrorName(r);
        return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? Z_MEM_ERROR : Z_DATA_ERROR;
    }
    return r == 0 ? Z_STREAM_END : Z_OK;
}

/* The compressed offset of the next byte inflate would take. */
static uint64_t zoff(const qf__zin *z, const qf__rbuf *rb)
{
    return rb->raw_off - z->zs.avail_in;
}

qf_code qf__zin_read(qf__zin *z, qf__rbuf *rb, char *dst, size_t n, size_t *ret_got)
{
    if (z->held_ret != Z_OK)
        return fail(z, rb, z->held_ret, z->held_msg, z->held_off);
    if (n > z->out_cap)
        n = z->out_cap;
    if (n > UINT32_MAX)
        n = UINT32_MAX; /* zlib counts in uInt */
    for (;;) {
        if (z->zs.avail_in == 0 && !z->in_eof) {
            size_t r = 0;
            size_t want = z->in_cap > UINT32_MAX ? UINT32_MAX : z->in_cap;
            qf_code rc = qf__rbuf_file_read(rb, (char *)z->in, want, &r);
            if (rc != QF_OK)
                return rc; /* QF_PENDING included: the inflate state waits */
            if (r == 0)
                z->in_eof = true;
            z->zs.next_in = z->in;
            z->zs.avail_in = (uInt)r;
        }
        bool drained = z->zs.avail_in == 0 && z->in_eof;
        if (drained && !z->in_member) {
            *ret_got = 0; /* a clean end between members */
            return QF_OK;
        }
        if (!z->in_member) {
            /* A new member after a complete one (or the first). */
            member_reset(z);
            z->in_member = true;
        }
        int ret;
        size_t made;
        const char *msg = NULL;
        if (z->d) {
            ret = zstd_step(z, dst, n, &made, &msg);
        } else {
            z->zs.next_out = (Bytef *)dst;
            z->zs.avail_out = (uInt)n;
            ret = inflate(&z->zs, Z_NO_FLUSH);
            made = n - z->zs.avail_out;
            msg = z->zs.msg;
        }
        if (ret == Z_STREAM_END) {
            z->in_member = false;
        } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
            msg = msg ? msg : "bad data";
            if (!made)
                return fail(z, rb, ret, msg, zoff(z, rb));
            z->held_ret = ret; /* the bytes before the damage first */
            z->held_msg = msg;
            z->held_off = zoff(z, rb);
        }
        if (made) {
            *ret_got = made;
            return QF_OK;
        }
        /* Nothing out. With all the input taken, a member that has not
         * ended is cut short. (inflate is still called once the input is
         * gone: it may hold output that did not fit last time, a long
         * match say.) Otherwise inflate needs more input, or a member just
         * ended. */
        if (drained && z->in_member)
            return qf_set_error(QF_DATA_LOSS,
                                "truncated %s stream in '%s' at compressed offset %" PRIu64,
                                cname(z->c), rb->path, zoff(z, rb));
    }
}
