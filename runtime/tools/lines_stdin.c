/* lines_stdin.c - qflow-lines' standard-input thread (see lines_stdin.h).
 *
 * The thread keeps one growing buffer: bytes after the last '\n' wait there
 * for the rest of their line. The lines a read(2) completed are enqueued
 * right after it (up to FEED_ROWS are collected first), so they travel as
 * soon as they are whole.
 */
#include "lines_stdin.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define READ_CHUNK ((size_t)256 * 1024)
#define FEED_ROWS 1024

/* The stop action: wake the thread wherever it waits. Never blocks. The
 * batch queue is closed as the runner's cancel op closes it, in case the
 * stop came before the runners started. */
static void stdin_stop(void *arg)
{
    lines_stdin *in = arg;
    uint64_t one = 1;
    ssize_t w = write(in->wake_fd, &one, sizeof(one));
    (void)w; /* a full eventfd counter is already a wake-up */
    qf_queue_close(in->q, true);
    qf_queue *t = atomic_load_explicit(&in->target, memory_order_acquire);
    if (t)
        qf_queue_close(t, true);
}

/* Lines waiting to be enqueued together. */
typedef struct pending {
    size_t n;
    const char *val[FEED_ROWS];
    size_t len[FEED_ROWS];
    uint64_t no[FEED_ROWS];
} pending;

/* Enqueue the pending lines as one batch (enqueue_many): one queue
 * operation, and one wake-up of a consumer waiting for a batch, per chunk
 * rather than per line. QF_CANCELLED after a stop. */
static qf_code flush(lines_stdin *in, pending *p)
{
    if (p->n == 0)
        return QF_OK;
    qf_shape sh = qf_shape_make(1, (const int64_t[]){(int64_t)p->n});
    qf_tensor *t[2] = {qf_tensor_new(QF_STRING, &sh), qf_tensor_new(QF_STRING, &sh)};
    qf_code rc = t[0] && t[1] ? QF_OK : qf_last_code();
    for (size_t i = 0; rc == QF_OK && i < p->n; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "-:%" PRIu64, p->no[i]);
        rc = qf_tensor_set_string(t[0], (int64_t)i, key, (size_t)kl);
        if (rc == QF_OK)
            rc = qf_tensor_set_string(t[1], (int64_t)i, p->val[i], p->len[i]);
    }
    if (rc != QF_OK) {
        qf_tensor_unref(t[0]);
        qf_tensor_unref(t[1]);
        return rc;
    }
    qf_element *b = qf_element_of(2, t);
    if (!b)
        return qf_last_code();
    rc = qf_queue_enqueue_many(in->target, b, NULL);
    if (rc != QF_OK)
        qf_element_free(b); /* the rows that did not go in */
    p->n = 0;
    return rc;
}

/* One line [s, s+len) without its '\n': drop one '\r' at its end; count
 * it; hand it on unless it is a header line. `last`: an unterminated last
 * line, which is no line at all when nothing is left of it (spec 192-193). */
static qf_code line(lines_stdin *in, pending *p, uint64_t *no, const char *s, size_t len, bool last)
{
    if (len > 0 && s[len - 1] == '\r')
        len--;
    if (last && len == 0)
        return QF_OK;
    if (++*no <= (uint64_t)in->skip)
        return QF_OK;
    p->val[p->n] = s;
    p->len[p->n] = len;
    p->no[p->n] = *no;
    return ++p->n == FEED_ROWS ? flush(in, p) : QF_OK;
}

/* Wait until fd 0 has data (true) or the stop action fired (false). */
static bool wait_readable(lines_stdin *in)
{
    struct pollfd fds[2] = {{.fd = in->fd, .events = POLLIN},
                            {.fd = in->wake_fd, .events = POLLIN}};
    for (;;) {
        int r = poll(fds, 2, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || fds[1].revents)
            return false;
        if (fds[0].revents)
            return true; /* data, end of file, or an error read() will report */
    }
}

/* Stop the pipeline with "<what>: <strerror(err)>" (join reports it). */
static void report(lines_stdin *in, const char *what, int err)
{
    qf_status *st = qf_status_new(QF_UNKNOWN, "%s: %s", what, strerror(err));
    qf_coord_request_stop(in->coord, st); /* takes st */
}

static void *stdin_main(void *arg)
{
    lines_stdin *in = arg;
    pending *p = calloc(1, sizeof(*p));
    size_t cap = READ_CHUNK, len = 0;
    char *buf = malloc(cap);
    uint64_t no = 0;
    bool eof = false;
    qf_code rc =
        p && buf ? QF_OK : qf_set_error(QF_RESOURCE_EXHAUSTED, "standard input: out of memory");
    while (rc == QF_OK && !eof) {
        if (cap - len < READ_CHUNK / 4) { /* a long line: room for more of it */
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = qf_set_error(QF_RESOURCE_EXHAUSTED,
                                  "standard input: out of memory for a line of %zu bytes", len);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        if (!wait_readable(in))
            break; /* stopped */
        ssize_t r = read(in->fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            report(in, "read error on standard input", errno);
            break;
        }
        eof = r == 0;
        /* Every whole line, then (at the end) what is left. The bytes kept
         * from before hold no '\n': the search starts at the new ones. */
        size_t start = 0, scan = len;
        len += (size_t)r;
        for (const char *nl; rc == QF_OK && (nl = memchr(buf + scan, '\n', len - scan));) {
            rc = line(in, p, &no, buf + start, (size_t)(nl - (buf + start)), false);
            start = scan = (size_t)(nl - buf) + 1;
        }
        if (rc == QF_OK && eof && start < len) {
            rc = line(in, p, &no, buf + start, len - start, true);
            start = len;
        }
        if (rc == QF_OK)
            rc = flush(in, p); /* before the bytes they point at move */
        memmove(buf, buf + start, len - start);
        len -= start;
    }
    if (rc == QF_OK && eof)
        qf_queue_close(in->q, false);           /* the end: the source drains and ends */
    else if (rc != QF_OK && rc != QF_CANCELLED) /* QF_CANCELLED: a stop */
        qf_coord_request_stop(in->coord, qf_last_status()); /* what failed, and why */
    free(buf);
    free(p);
    return NULL;
}

/* Write all of buf[0..n) to fd; false with errno on an error. */
static bool write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return false;
        }
        buf += w;
        n -= (size_t)w;
    }
    return true;
}

/* lines_stdin_spool()'s thread: the bytes, as they come, to spool_fd. */
static void *spool_main(void *arg)
{
    lines_stdin *in = arg;
    char *buf = malloc(READ_CHUNK);
    if (!buf) {
        report(in, "standard input: cannot keep it", ENOMEM);
        return NULL;
    }
    while (wait_readable(in)) {
        ssize_t r = read(in->fd, buf, READ_CHUNK);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0) {
            report(in, "read error on standard input", errno);
            break;
        }
        if (r == 0)
            break; /* the end */
        if (!write_all(in->spool_fd, buf, (size_t)r)) {
            report(in, "standard input: cannot keep it", errno);
            break;
        }
    }
    free(buf);
    return NULL;
}

qf_code lines_stdin_spool(lines_stdin *in, int out)
{
    in->spool_fd = out;
    if (pthread_create(&in->thread, NULL, spool_main, in) != 0)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "cannot start the standard input thread");
    in->started = true;
    return QF_OK;
}

qf_code lines_stdin_start(lines_stdin *in, int fd, qf_coord *coord, int64_t capacity,
                          int64_t skip_header_lines)
{
    memset(in, 0, sizeof(*in));
    in->made = true;
    in->fd = fd;
    in->spool_fd = -1;
    in->coord = coord;
    in->skip = skip_header_lines;
    atomic_init(&in->target, NULL);
    in->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (in->wake_fd < 0)
        return qf_set_error(QF_UNKNOWN, "eventfd: %s", strerror(errno));
    /* (key, value) as a reader's records: the batch's components. */
    qf_dtype dt[2] = {QF_STRING, QF_STRING};
    qf_shape sh[2] = {qf_shape_scalar(), qf_shape_scalar()};
    qf_queue_options qo = {.capacity = capacity ? capacity : 1,
                           .num_components = 2,
                           .dtypes = dt,
                           .shapes = sh,
                           .name = capacity ? "stdin_lines" : "stdin_open",
                           .flags = QF_QUEUE_SINGLE_PRODUCER};
    qf_code rc = qf_fifo_queue_new(&qo, &in->q);
    if (rc == QF_OK)
        rc = qf_coord_add_stop_action(coord, stdin_stop, in, &in->action);
    return rc;
}

qf_code lines_stdin_run(lines_stdin *in, qf_queue *target)
{
    atomic_store_explicit(&in->target, qf_queue_ref(target ? target : in->q), memory_order_release);
    if (pthread_create(&in->thread, NULL, stdin_main, in) != 0)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "cannot start the standard input thread");
    in->started = true;
    return QF_OK;
}

void lines_stdin_join(lines_stdin *in)
{
    if (in->started)
        pthread_join(in->thread, NULL);
    in->started = false;
}

void lines_stdin_free(lines_stdin *in)
{
    if (!in->made)
        return;
    if (in->action)
        qf_coord_remove_stop_action(in->coord, in->action);
    in->action = NULL;
    qf_queue_unref(in->q);
    in->q = NULL;
    qf_queue_unref(atomic_load(&in->target));
    atomic_store(&in->target, NULL);
    if (in->wake_fd >= 0)
        close(in->wake_fd);
    in->wake_fd = -1;
    in->made = false;
}
