/* qf_rbuf.c - the buffered sequential stream every file reader reads
 * through: a file, or what inflating it gives (qf_zstream.c).
 *
 * Regular files are read with plain read(2) in buffer-sized chunks with
 * readahead advice (see qf_reader.h, "Disk I/O"). Anything else (a named
 * pipe, a terminal, a character device) is opened O_NONBLOCK and a read
 * that finds nothing returns QF_PENDING instead of waiting: the reader
 * decides how to wait (a task's waker on the fd watch, a thread in
 * poll(2)), and every function here leaves the buffer so that the same
 * call can simply be repeated afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qf_reader-impl.h"

/* errno -> canonical code, once for all readers (TensorFlow's mapping,
 * narrowed to what open/read can report). */
qf_code qf__errno_code(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ENXIO:
    case ENODEV:
        return QF_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
        return QF_PERMISSION_DENIED;
    case EISDIR:
    case EBADF:
    case EBUSY:
    case ETXTBSY:
        return QF_FAILED_PRECONDITION;
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case ENOSPC:
    case ENOBUFS:
        return QF_RESOURCE_EXHAUSTED;
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
        return QF_INVALID_ARGUMENT;
    case EAGAIN:
    case EINTR:
        return QF_UNAVAILABLE;
    default:
        return QF_UNKNOWN;
    }
}

/* "<path>; <strerror>", TensorFlow's IOError text. */
qf_code qf__io_error(const char *path, int err)
{
    char buf[128];
    const char *msg = strerror_r(err, buf, sizeof(buf)); /* GNU: returns the text */
    return qf_set_error(qf__errno_code(err), "%s; %s", path, msg);
}

static void advise(qf__rbuf *rb, uint64_t off, uint64_t len, int advice)
{
    if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX)
        return;
    /* Advice only: a failure (a pipe, a file system without readahead)
     * changes nothing we rely on. */
    (void)posix_fadvise(rb->fd, (off_t)off, (off_t)len, advice);
}

qf_code qf__rbuf_open(qf__rbuf *rb, const char *path)
{
    qf__rbuf_close(rb);
    rb->path = path;
    int fd;
    /* O_NONBLOCK: a FIFO's open must not wait for a writer (it would hold
     * a worker); for a regular file the flag means nothing. */
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return qf__io_error(path, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return qf__io_error(path, err);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return qf__io_error(path, EISDIR);
    }
    rb->fd = fd;
    rb->pos = rb->lim = 0;
    rb->base = 0;
    rb->raw_off = 0;
    rb->eof = false;
    rb->shrank_warned = false;
    rb->nonblock = !S_ISREG(st.st_mode);
    rb->fifo = S_ISFIFO(st.st_mode);
    rb->file_size = S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
    rb->size = rb->z ? -1 : rb->file_size;
    rb->advised = 0;
    if (!rb->nonblock) {
        /* A regular file: reads never wait for a writer; keep the default
         * blocking mode so nothing downstream sees EAGAIN. */
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    if (rb->z)
        qf__zin_reset(rb->z);
    /* Sequential: the kernel doubles the readahead window and drops pages
     * behind us sooner. A file that fits in one chunk needs nothing more. */
    if (rb->file_size < 0 || (uint64_t)rb->file_size > rb->cap)
        advise(rb, 0, 0, POSIX_FADV_SEQUENTIAL);
    return QF_OK;
}

void qf__rbuf_close(qf__rbuf *rb)
{
    /* The watch forgets the fd before it is closed (and maybe reused). */
    qf__fdwatch_disarm(&rb->watch);
    if (rb->fd >= 0)
        close(rb->fd);
    rb->fd = -1;
    rb->pos = rb->lim = 0;
    rb->base = 0;
    rb->eof = true;
}

qf_code qf__rbuf_renew(qf__rbuf *rb)
{
    qf__strblock *nb = qf__strblock_pool_get(rb->pool);
    if (!nb)
        return qf_last_code();
    size_t keep = rb->lim - rb->pos;
    char *d = qf__strblock_data(nb);
    memcpy(d, rb->buf + rb->pos, keep);
    qf__strblock_drop(rb->blk);
    rb->blk = nb;
    rb->buf = d;
    rb->base += rb->pos;
    rb->pos = 0;
    rb->lim = keep;
    return QF_OK;
}

/* The buffer is about to be overwritten from its start: not while rows
 * handed out still point into it (a run's buffer). */
static qf_code writable(qf__rbuf *rb)
{
    if (!rb->blk)
        return QF_OK;
    if (!qf__strblock_in_use(rb->blk)) {
        qf__strblock_reuse(rb->blk);
        return QF_OK;
    }
    return qf__rbuf_renew(rb);
}

/* A regular file ended before the size it had at open: it was truncated
 * while being read. Say so once per file. */
static void check_shrank(qf__rbuf *rb)
{
    if (rb->shrank_warned || rb->file_size < 0 || rb->raw_off >= (uint64_t)rb->file_size)
        return;
    rb->shrank_warned = true;
    if (rb->owner)
        qf__reader_warn(rb->owner,
                        "'%s' shrank while being read: %" PRId64 " bytes at open, %" PRIu64
                        " read; its last record may be torn",
                        rb->path, rb->file_size, rb->raw_off);
}

/* One read(2) of rb's file, again when interrupted: QF_OK with *ret_got
 * (0 at the end, or from a FIFO before or after its writers),
 * QF_PENDING when a pipe or device has nothing yet, else the error. */
static qf_code read_fd(qf__rbuf *rb, char *dst, size_t n, ssize_t *ret_got)
{
    ssize_t got;
    do
        got = read(rb->fd, dst, n);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? QF_PENDING : qf__io_error(rb->path, errno);
    *ret_got = got;
    return QF_OK;
}

qf_code qf__rbuf_file_read(qf__rbuf *rb, char *dst, size_t n, size_t *ret_got)
{
    ssize_t got = 0;
    qf_code rc = read_fd(rb, dst, n, &got);
    if (rc != QF_OK)
        return rc;
    if (got == 0 && rb->fifo) {
        /* A FIFO reads 0 both when its writers have left (the end) and
         * before any writer came (not the end: the writer may be starting).
         * Linux reports POLLHUP only in the first case, for a reader that
         * opened before the writer left. */
        struct pollfd p = {.fd = rb->fd, .events = POLLIN};
        int pr;
        do
            pr = poll(&p, 1, 0);
        while (pr < 0 && errno == EINTR);
        if (pr == 0)
            return QF_PENDING;
        if (pr > 0 && (p.revents & POLLIN))
            return QF_PENDING; /* a writer came, wrote (and maybe left) since
                                * the read: the next read gets its bytes */
        /* POLLHUP alone is not proof yet: pipe_poll() tests the writer
         * count and the count of writers' opens without the pipe's lock,
         * and a writer's open bumps the second before the first, so a poll
         * in between tells a reader that has never seen a writer POLLHUP.
         * read(2) takes the lock: once a POLLHUP was seen, a writer's open
         * had begun (the count only grows) and is over when the read gets
         * the lock, so a second 0 means that writer has come and gone. A real
         * POLLHUP whose FIFO a new writer opens before this read is now
         * pending too: that writer's lines are read, not cut off. */
        rc = read_fd(rb, dst, n, &got); /* QF_PENDING: the writer is there now */
        if (rc != QF_OK)
            return rc;
    }
    rb->raw_off += (size_t)got;
    if (got == 0)
        check_shrank(rb);
    *ret_got = (size_t)got;
    return QF_OK;
}

qf_code qf__rbuf_raw_read(qf__rbuf *rb, char *dst, size_t n, size_t *ret_got)
{
    if (rb->z)
        return qf__zin_read(rb->z, rb, dst, n, ret_got);
    return qf__rbuf_file_read(rb, dst, n, ret_got);
}

qf_code qf__rbuf_fill(qf__rbuf *rb)
{
    if (rb->eof)
        return QF_OK;
    if (rb->pos == rb->lim || rb->lim == rb->cap) {
        qf_code rc = writable(rb);
        if (rc != QF_OK)
            return rc;
    }
    if (rb->pos == rb->lim) {
        rb->base += rb->lim;
        rb->pos = rb->lim = 0;
    } else if (rb->lim == rb->cap) {
        size_t keep = rb->lim - rb->pos;
        memmove(rb->buf, rb->buf + rb->pos, keep);
        rb->base += rb->pos;
        rb->pos = 0;
        rb->lim = keep;
    }
    size_t want = rb->cap - rb->lim;
    size_t got = 0;
    qf_code rc = qf__rbuf_raw_read(rb, rb->buf + rb->lim, want, &got);
    if (rc != QF_OK)
        return rc; /* QF_PENDING too: the buffer is consistent, retry later */
    rb->lim += got;
    uint64_t end = rb->base + rb->lim; /* the stream offset of the next read */
    /* A regular file ends where its size says; a short read there saves the
     * read(2) that would return 0. Anything else ends at a 0 read. */
    if (got == 0 || (rb->size >= 0 && got < want && end >= (uint64_t)rb->size)) {
        rb->eof = true;
        return QF_OK;
    }
    /* Start the kernel on the next chunk while this one is consumed, so the
     * next read(2) finds it in the page cache (see qf_reader.h). */
    if (!rb->z && !rb->nonblock && (rb->size < 0 || end < (uint64_t)rb->size) &&
        end >= rb->advised) {
        advise(rb, end, rb->cap, POSIX_FADV_WILLNEED);
        rb->advised = end + rb->cap;
    }
    return QF_OK;
}

qf_code qf__rbuf_ensure(qf__rbuf *rb, size_t n, bool *ret_ok)
{
    while (rb->lim - rb->pos < n && !rb->eof) {
        /* Make room at the back if n bytes from pos would not fit. */
        if (rb->cap - rb->pos < n && rb->pos > 0) {
            qf_code rc = writable(rb);
            if (rc != QF_OK)
                return rc;
            size_t keep = rb->lim - rb->pos;
            memmove(rb->buf, rb->buf + rb->pos, keep);
            rb->base += rb->pos;
            rb->pos = 0;
            rb->lim = keep;
        }
        qf_code rc = qf__rbuf_fill(rb);
        if (rc != QF_OK)
            return rc;
    }
    *ret_ok = rb->lim - rb->pos >= n;
    return QF_OK;
}

qf_code qf__rbuf_skip(qf__rbuf *rb, uint64_t *n, bool *ret_ok)
{
    for (;;) {
        size_t avail = rb->lim - rb->pos;
        if (avail >= *n) {
            rb->pos += (size_t)*n;
            *n = 0;
            *ret_ok = true;
            return QF_OK;
        }
        *n -= avail;
        rb->pos = rb->lim;
        if (rb->eof) {
            *ret_ok = false;
            return QF_OK;
        }
        qf_code rc = qf__rbuf_fill(rb);
        if (rc != QF_OK)
            return rc;
    }
}

qf_code qf__rbuf_read(qf__rbuf *rb, char *dst, size_t n, size_t *got)
{
    while (*got < n) {
        size_t avail = rb->lim - rb->pos;
        if (avail) {
            size_t c = avail < n - *got ? avail : n - *got;
            memcpy(dst + *got, rb->buf + rb->pos, c);
            rb->pos += c;
            *got += c;
            continue;
        }
        if (rb->eof)
            break;
        if (n - *got >= rb->cap) {
            /* A large remainder goes straight to its destination: no second
             * copy through the buffer. pos == lim here; keep base in step. */
            size_t r = 0;
            qf_code rc = qf__rbuf_raw_read(rb, dst + *got, n - *got, &r);
            if (rc != QF_OK)
                return rc;
            if (r == 0) {
                rb->eof = true;
                break;
            }
            rb->base += rb->lim + r;
            rb->pos = rb->lim = 0;
            *got += r;
            continue;
        }
        qf_code rc = qf__rbuf_fill(rb);
        if (rc != QF_OK)
            return rc;
    }
    return QF_OK;
}

qf_code qf__rbuf_seek(qf__rbuf *rb, uint64_t off, bool *ret_ok)
{
    if (!rb->z && !rb->nonblock && rb->base == 0 && rb->lim == 0 && off <= (uint64_t)INT64_MAX) {
        if (rb->file_size >= 0 && off > (uint64_t)rb->file_size) {
            rb->eof = true;
            *ret_ok = false;
            return QF_OK;
        }
        if (lseek(rb->fd, (off_t)off, SEEK_SET) < 0)
            return qf__io_error(rb->path, errno);
        rb->base = off;
        rb->raw_off = off;
        rb->advised = off;
        *ret_ok = true;
        return QF_OK;
    }
    uint64_t left = off - qf__rbuf_offset(rb);
    return qf__rbuf_skip(rb, &left, ret_ok);
}

qf_code qf__rbuf_rewind(qf__rbuf *rb, uint64_t off, bool *ret_ok)
{
    if (rb->z && qf__rbuf_offset(rb) == off && qf__zin_resumable(rb->z)) {
        /* Stopped at `off` for want of compressed bytes: the inflater's
         * state is whole, so it takes what was appended since. Going back
         * to the start would inflate the whole file again on every poll. */
        qf__zin_resume(rb->z);
        rb->eof = false;
        *ret_ok = true;
        return QF_OK;
    }
    struct stat st;
    if (fstat(rb->fd, &st) != 0)
        return qf__io_error(rb->path, errno);
    qf_code rc = writable(rb);
    if (rc != QF_OK)
        return rc;
    rb->file_size = (int64_t)st.st_size;
    rb->size = rb->z ? -1 : rb->file_size;
    rb->shrank_warned = false;
    rb->pos = rb->lim = 0;
    rb->eof = false;
    uint64_t start = rb->z ? 0 : off;
    if (!rb->z && off > (uint64_t)rb->file_size) {
        rb->base = off;
        rb->eof = true;
        *ret_ok = false;
        return QF_OK;
    }
    if (lseek(rb->fd, (off_t)start, SEEK_SET) < 0)
        return qf__io_error(rb->path, errno);
    rb->base = start;
    rb->raw_off = start;
    rb->advised = start;
    if (!rb->z) {
        *ret_ok = true;
        return QF_OK;
    }
    qf__zin_reset(rb->z);
    uint64_t left = off;
    return qf__rbuf_skip(rb, &left, ret_ok);
}

qf_code qf__reader_rows_ready(qf_reader *r)
{
    qf__rbuf *rb = &r->rb;
    bool prefix_ok = qf__strblock_has_prefix(rb->blk, r->work, r->work_len, ':');
    if (prefix_ok && qf__strblock_rows_left(rb->blk) > 0)
        return QF_OK;
    if (!qf__strblock_in_use(rb->blk)) {
        qf__strblock_reuse(rb->blk);
    } else {
        qf_code rc = qf__rbuf_renew(rb); /* the new run has no prefix */
        if (rc != QF_OK)
            return rc;
        prefix_ok = false;
    }
    return prefix_ok ? QF_OK : qf__strblock_set_prefix(rb->blk, r->work, r->work_len, ':');
}
