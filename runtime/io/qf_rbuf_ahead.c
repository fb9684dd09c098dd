/* qf_rbuf_ahead.c - read-ahead for a TextLineReader on a large regular
 * file: a helper thread reads the next block while the reader splits this
 * one.
 *
 * Why. Reading a file from the page cache, a reader thread spends about
 * half its time in read(2)'s copy and the other half splitting and queueing
 * what it read (perf, qflow-lines on 200 MB of text: 32% of all samples in
 * the kernel's copy on the reader's thread, 21% in the splitter, 36% on
 * the thread that writes the output). One thread doing both is the whole
 * pipeline's limit; with the copy on a thread of its own, the two halves
 * overlap on two cores.
 *
 * Where the bytes go. The helper reads into a run fresh from the reader's
 * pool (qf_strblock-impl.h), `head` bytes into its buffer. When the reader
 * needs the next bytes (qf__rbuf_fill()), the partial line at the end of
 * its buffer (buf[pos..lim), `keep` bytes) is copied in front of the bytes
 * read ahead and the run is shifted to start there, so the buffer is again
 * one piece, buf[0..keep + got), exactly as a read(2) after moving the
 * partial line to the front would have left it; only no byte of the file
 * was copied on the reader's thread. The old run is let go (rows out keep
 * it alive). A partial line longer than `head` (cap / 8, a line of over
 * 32 KiB in a 256 KiB buffer) does not fit: that fill gives the block
 * back and reads as usual, with pread(2) at raw_off.
 *
 * Positions. While read-ahead runs, every read of the file is a pread(2)
 * at an explicit offset: the block being read ahead starts at raw_off, the
 * count of bytes the buffer has taken from the file, and raw_off moves only
 * when a fill takes them. qf__ahead_stop() puts the file position back at
 * raw_off, so whatever reads the file next (a seek, a rewind, a skip, the
 * next file) finds it where a reader without read-ahead would have left it.
 *
 * Protocol (helper and filler, under `mu`):
 *   IDLE     nothing asked: the filler may hand a block, off and want,
 *            then set READING and signal
 *   READING  the helper owns the bytes of blk from head on; it reads
 *            without the lock, then stores got and err and sets READY
 *   READY    the filler takes the block back (-> IDLE)
 *   QUIT     set by the filler (qf__ahead_stop()); the helper leaves after
 *            the read it is in, and the filler joins it before touching
 *            the block again
 * The mutex orders the helper's writes of the block before the filler's
 * reads of it; the rows the filler then hands out carry that order on
 * (their queue's release and acquire).
 *
 * Only for regular uncompressed files of at least QF_READ_AHEAD_MIN bytes
 * (default: 4 buffers and at least 1 MiB); the environment variable QF_READ_AHEAD=0 turns it
 * off (a baseline to measure against; tests run the readers both ways).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_reader-impl.h"

/* Buffers smaller than this never read ahead. */
#define AHEAD_MIN_CAP 16
/* Files smaller than this (and than 4 buffers) never read ahead. */
#define AHEAD_MIN_FILE ((uint64_t)1 << 20)
/* The helper's stack. */
#define AHEAD_STACK ((size_t)64 * 1024)
/* The room for a partial line in front of the bytes read ahead. */
#define AHEAD_HEAD_MAX ((size_t)64 * 1024)

enum { A_IDLE, A_READING, A_READY, A_QUIT };

typedef struct qf__ahead {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    int phase;         /* A_*, under mu */
    qf__strblock *blk; /* the block asked for (NULL in IDLE) */
    size_t head;       /* bytes of blk's buffer left free in front */
    uint64_t off;      /* the file offset its read starts at */
    size_t want, got;  /* asked, and read (READY) */
    int err;           /* errno of a read that got nothing (READY), else 0 */
    bool asked;        /* the filler's own: a block is with the helper */
    pid_t pid;         /* the process that started the helper */
} qf__ahead;

/* ----------------------------------------------------------- settings */

/* QF_READ_AHEAD=0 turns read-ahead off; QF_READ_AHEAD_MIN=BYTES sets the
 * least file size (0: every file). Read once. */
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static bool setting_off;
static long long setting_min = -1;

static void read_settings_once(void)
{
    const char *off = getenv("QF_READ_AHEAD");
    const char *min = getenv("QF_READ_AHEAD_MIN");
    bool is_off = off && strcmp(off, "0") == 0;
    long long m = -1;
    if (min && *min) {
        char *end;
        errno = 0;
        long long v = strtoll(min, &end, 10);
        if (errno == 0 && *end == '\0' && v >= 0)
            m = v;
    }
    setting_off = is_off;
    setting_min = m;
}

static void read_settings(void)
{
    pthread_once(&settings_once, read_settings_once);
}

static bool eligible(const qf__rbuf *rb)
{
    if (!rb->ahead_ok || rb->ahead_failed || !rb->blk || rb->z || rb->nonblock || rb->fd < 0 ||
        rb->file_size < 0)
        return false;
    size_t cap = qf__strblock_whole_cap(rb->blk); /* the buffer size, shifted or not */
    if (cap < AHEAD_MIN_CAP)
        return false;
    read_settings();
    if (setting_off)
        return false;
    /* A smaller file is read in a few read(2)s that cost less than the
     * thread (about 100 us a MiB of copy against some 30 us to start and
     * join one). */
    uint64_t min = 4 * (uint64_t)cap;
    if (min < AHEAD_MIN_FILE)
        min = AHEAD_MIN_FILE;
    if (setting_min >= 0)
        min = (uint64_t)setting_min;
    return (uint64_t)rb->file_size >= min;
}

/* ------------------------------------------------------------- helper */

/* pread until want bytes, the end of the file or an error. */
static size_t read_at(int fd, char *dst, size_t want, uint64_t off, int *ret_err)
{
    size_t got = 0;
    *ret_err = 0;
    while (got < want) {
        ssize_t n = pread(fd, dst + got, want - got, (off_t)(off + got));
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            /* Bytes before the error are handed over, as read(2) would
             * (the error then comes with the next read, at their end). */
            if (got == 0)
                *ret_err = errno;
            break;
        }
    }
    return got;
}

static void *helper_main(void *arg)
{
    qf__ahead *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (a->phase == A_IDLE || a->phase == A_READY)
            pthread_cond_wait(&a->cv, &a->mu);
        if (a->phase == A_QUIT)
            break;
        char *dst = qf__strblock_data(a->blk) + a->head;
        size_t want = a->want;
        uint64_t off = a->off;
        pthread_mutex_unlock(&a->mu);
        int err;
        size_t got = read_at(a->fd, dst, want, off, &err);
        pthread_mutex_lock(&a->mu);
        a->got = got;
        a->err = err;
        if (a->phase == A_READING)
            a->phase = A_READY;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ------------------------------------------------------------- filler */

static bool start(qf__rbuf *rb)
{
    qf__ahead *a = calloc(1, sizeof(*a));
    if (!a)
        return false;
    if (pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a);
        return false;
    }
    if (pthread_cond_init(&a->cv, NULL) != 0) {
        pthread_mutex_destroy(&a->mu);
        free(a);
        return false;
    }
    a->fd = rb->fd;
    a->phase = A_IDLE;
    a->pid = getpid();
    /* No signal is ever delivered to the helper: a program that leaves
     * its signals to one thread (qflow-lines) keeps them there. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    int e = pthread_attr_init(&attr);
    if (e == 0) {
        /* pread and a lock: a small stack does. */
        (void)pthread_attr_setstacksize(&attr, AHEAD_STACK);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        e = pthread_create(&a->th, &attr, helper_main, a);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (e != 0) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        free(a);
        rb->ahead_failed = true; /* read as usual, and do not try again for this file */
        return false;
    }
    (void)pthread_setname_np(a->th, "qflow-ahead");
    rb->ahead = a;
    return true;
}

/* Ask for the block after the buffer's bytes. False (nothing asked) when
 * no block can be had: the next fill then reads as usual. */
static bool ask(qf__rbuf *rb)
{
    qf__ahead *a = rb->ahead;
    qf__strblock *b = qf__strblock_pool_get(rb->pool);
    if (!b)
        return false;
    size_t cap = qf__strblock_cap(b);
    size_t head = cap / 8 < AHEAD_HEAD_MAX ? cap / 8 : AHEAD_HEAD_MAX;
    pthread_mutex_lock(&a->mu);
    a->blk = b;
    a->head = head;
    a->off = rb->raw_off;
    a->want = cap - head;
    a->phase = A_READING;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    a->asked = true;
    return true;
}

void qf__ahead_next(qf__rbuf *rb)
{
    if (!rb->ahead && (!eligible(rb) || !start(rb)))
        return;
    if (!rb->ahead->asked)
        (void)ask(rb);
}

/* Put the file position where a reader without read-ahead would have it.
 * A failure cannot be told to anyone who could act on it, and the next
 * read would read from the wrong place, which the shrink check and the
 * record formats' own checks do not catch: the file ends there, with a
 * warning. */
static void restore_position(qf__rbuf *rb)
{
    if (rb->fd < 0 || rb->raw_off > (uint64_t)INT64_MAX ||
        lseek(rb->fd, (off_t)rb->raw_off, SEEK_SET) >= 0)
        return;
    if (rb->owner)
        qf__reader_warn(rb->owner,
                        "'%s': cannot seek back to %llu after reading ahead (%s); "
                        "the rest of the file is not read",
                        rb->path, (unsigned long long)rb->raw_off, strerror(errno));
    rb->eof = true;
}

/* A fork's child has the reader but not the helper (threads do not
 * survive a fork): it must neither wait for it nor join it. The state is
 * left behind (its mutex may have been held at the fork); the child reads
 * as usual. */
static bool forked(qf__rbuf *rb)
{
    if (rb->ahead->pid == getpid())
        return false;
    rb->ahead = NULL;
    rb->ahead_failed = true;
    restore_position(rb);
    return true;
}

void qf__ahead_stop(qf__rbuf *rb)
{
    qf__ahead *a = rb->ahead;
    if (!a || forked(rb))
        return;
    pthread_mutex_lock(&a->mu);
    a->phase = A_QUIT;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->th, NULL);
    if (a->blk)
        qf__strblock_drop(a->blk); /* read ahead, never taken */
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
    rb->ahead = NULL;
    restore_position(rb);
}

/* Wait for the block asked for and take it back: NULL when none was
 * asked. */
static qf__strblock *take(qf__ahead *a, size_t *ret_head, size_t *ret_want, size_t *ret_got,
                          int *ret_err)
{
    if (!a->asked)
        return NULL;
    a->asked = false;
    pthread_mutex_lock(&a->mu);
    while (a->phase == A_READING)
        pthread_cond_wait(&a->cv, &a->mu);
    qf__strblock *b = a->phase == A_READY ? a->blk : NULL;
    if (b) {
        *ret_head = a->head;
        *ret_want = a->want;
        *ret_got = a->got;
        *ret_err = a->err;
        a->blk = NULL;
        a->phase = A_IDLE;
    }
    pthread_mutex_unlock(&a->mu);
    return b;
}

/* Lay the block out as the buffer: buf[0..keep) the partial line, then
 * the bytes read ahead. Returns how many of those it holds. The line goes
 * in front of them when it fits in the head; a longer one goes at the
 * start and the bytes are moved up behind it (one copy, as read(2) would
 * have made; those that no longer fit are read again next time). */
static size_t lay_out(qf__strblock *b, const char *line, size_t keep, size_t head, size_t got)
{
    size_t use = got;
    if (keep <= head) {
        qf__strblock_shift(b, head - keep);
    } else {
        size_t cap = qf__strblock_cap(b); /* unshifted: fresh from the pool */
        if (use > cap - keep)
            use = cap - keep;
        char *d = qf__strblock_data(b);
        memmove(d + keep, d + head, use);
    }
    memcpy(qf__strblock_data(b), line, keep);
    return use;
}

bool qf__ahead_fill(qf__rbuf *rb, qf_code *ret_rc)
{
    qf__ahead *a = rb->ahead;
    if (!a || forked(rb))
        return false;
    size_t head, want, got;
    int err;
    qf__strblock *b = take(a, &head, &want, &got, &err);
    if (!b)
        return false;
    if (err) {
        qf__strblock_drop(b);
        qf__ahead_stop(rb);
        *ret_rc = qf__io_error(rb->path, err);
        return true;
    }
    size_t keep = rb->lim - rb->pos;
    if (keep >= qf__strblock_cap(b)) {
        /* No room for a byte after the line (not from a TextLineReader,
         * which carries such a line out first): read as usual. */
        qf__strblock_drop(b);
        return false;
    }
    size_t use = lay_out(b, rb->buf + rb->pos, keep, head, got);
    qf__strblock_drop(rb->blk);
    rb->blk = b;
    rb->buf = qf__strblock_data(b);
    rb->cap = qf__strblock_cap(b);
    rb->base += rb->pos;
    rb->pos = 0;
    rb->lim = keep + use;
    rb->raw_off += use;
    uint64_t end = rb->base + rb->lim;
    *ret_rc = QF_OK;
    /* The end, by the same rule as a read(2) into the buffer. */
    if (got == 0 || (rb->size >= 0 && use == got && got < want && end >= (uint64_t)rb->size)) {
        if (got == 0)
            qf__rbuf_check_shrank(rb);
        rb->eof = true;
        qf__ahead_stop(rb); /* the helper is not needed any more */
        return true;
    }
    (void)ask(rb);
    return true;
}
