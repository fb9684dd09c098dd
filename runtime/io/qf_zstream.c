/* qf_zstream.c - inflating ZLIB and GZIP record files as they are read.
 *
 * TensorFlow's ZlibInputStream: compressed bytes come from the file in
 * input_buffer_size reads, and each inflate call makes at most
 * output_buffer_size bytes. The reader's buffer (qf_rbuf.c) sits on top,
 * so every record format sees the decompressed stream and nothing else.
 *
 * Ends. A stream that ends exactly after a complete member (or a file with
 * no bytes at all) is a clean end. After a member, more input starts a new
 * member (concatenated gzip files read as one, as gzip(1) reads them). An
 * end inside a member is "truncated", bad data "corrupt"; both are
 * QF_DATA_LOSS naming the file and the compressed offset, and the reader
 * abandons the file like any error inside a file. A QF_PENDING from a pipe
 * leaves the inflate state as it is: the next call goes on.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "qf_reader-impl.h"

struct qf__zin {
    z_stream zs;
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
    return c == QF_COMPRESSION_GZIP ? "GZIP" : "ZLIB";
}

qf_code qf__zlib_options_check(qf_compression c, const qf_zlib_options *o, bool writing)
{
    if (c != QF_COMPRESSION_NONE && c != QF_COMPRESSION_ZLIB && c != QF_COMPRESSION_GZIP)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "unknown compression %d (QF_COMPRESSION_NONE, _ZLIB or _GZIP)", (int)c);
    if (o->input_buffer_size > MAX_BUFFER)
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib input_buffer_size %zu is over 1 GiB",
                            o->input_buffer_size);
    if (o->output_buffer_size > MAX_BUFFER)
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib output_buffer_size %zu is over 1 GiB",
                            o->output_buffer_size);
    if (o->window_bits != 0 && (o->window_bits < 8 || o->window_bits > 15))
        return qf_set_error(QF_INVALID_ARGUMENT, "zlib window_bits must be 8..15 (or 0) not %d",
                            o->window_bits);
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
    inflateEnd(&z->zs);
    free(z->in);
    free(z);
}

void qf__zin_reset(qf__zin *z)
{
    inflateReset(&z->zs);
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
            inflateReset(&z->zs);
            z->in_member = true;
        }
        z->zs.next_out = (Bytef *)dst;
        z->zs.avail_out = (uInt)n;
        int ret = inflate(&z->zs, Z_NO_FLUSH);
        size_t made = n - z->zs.avail_out;
        if (ret == Z_STREAM_END) {
            z->in_member = false;
        } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
            const char *msg = z->zs.msg ? z->zs.msg : "bad data";
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
