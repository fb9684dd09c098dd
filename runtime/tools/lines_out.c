/* lines_out.c - whole-line output for qflow-lines (see lines_out.h). */
#include "lines_out.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool lines_out_init(lines_out *o, int fd, size_t cap, volatile sig_atomic_t *stop)
{
    memset(o, 0, sizeof(*o));
    o->buf = malloc(cap);
    if (!o->buf)
        return false;
    o->fd = fd;
    o->cap = o->base_cap = cap;
    o->stop = stop;
    return true;
}

void lines_out_free(lines_out *o)
{
    free(o->buf);
    o->buf = NULL;
    o->len = o->cap = 0;
}

/* Write p[0..len), whole lines, with as many write(2) calls as it takes;
 * sets o->status on a failure, and on a stop (see the top of lines_out.h)
 * ends early at a line boundary. */
static void write_lines(lines_out *o, const char *p, size_t len)
{
    size_t off = 0, end = len;
    while (o->status == LINES_OUT_OK && off < end) {
        ssize_t n = write(o->fd, p + off, end - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            if (o->stop && *o->stop && end == len) {
                /* Stop as soon as the output ends with a whole line: at
                 * once when off is at a line start, else after the rest of
                 * the current line (p holds only whole lines, so that '\n'
                 * exists). */
                if (off == 0 || p[off - 1] == '\n') {
                    end = off;
                } else {
                    const char *nl = memchr(p + off, '\n', end - off);
                    end = (size_t)(nl - p) + 1;
                }
            }
            continue;
        }
        if (n < 0 && errno == EPIPE) {
            o->status = LINES_OUT_BROKEN;
        } else {
            o->err = n < 0 ? errno : EIO; /* write() returning 0: no progress */
            o->status = LINES_OUT_ERROR;
        }
    }
    if (o->status == LINES_OUT_OK && end < len)
        o->status = LINES_OUT_STOPPED;
}

lines_out_status lines_out_flush(lines_out *o)
{
    write_lines(o, o->buf, o->len);
    o->len = 0;
    if (o->cap > o->base_cap) {
        /* A very long line grew the buffer: give the memory back. */
        char *b = realloc(o->buf, o->base_cap);
        if (b) {
            o->buf = b;
            o->cap = o->base_cap;
        }
    }
    return o->status;
}

lines_out_status lines_out_line(lines_out *o, const char *key, size_t key_len, const char *value,
                                size_t value_len)
{
    if (o->status != LINES_OUT_OK)
        return o->status;
    size_t need = (key ? key_len + 1 : 0) + value_len + 1;
    if (o->len + need > o->cap) {
        if (lines_out_flush(o) != LINES_OUT_OK)
            return o->status;
        if (need > o->cap) {
            char *b = realloc(o->buf, need);
            if (!b) {
                o->err = ENOMEM;
                return o->status = LINES_OUT_ERROR;
            }
            o->buf = b;
            o->cap = need;
        }
    }
    char *p = o->buf + o->len;
    if (key) {
        memcpy(p, key, key_len);
        p += key_len;
        *p++ = '\t';
    }
    if (value_len) /* an empty string may have a NULL data pointer */
        memcpy(p, value, value_len);
    p += value_len;
    *p = '\n';
    o->len += need;
    return LINES_OUT_OK;
}

/* The end of the run of values from v[i] (non-empty): values that lie
 * back to back, each one byte (its terminator, once the source's '\n')
 * after the one before, as a TextLineReader hands them out of its block.
 * Empty values (no bytes of their own) join the run when the next
 * non-empty value starts as many bytes after the terminator as there are
 * empty values between: those bytes then get the empty lines' '\n's.
 * One such byte is never a non-empty row's (that row's terminator would
 * be the next value's first byte). Two or more could hold a row of the
 * block that this batch does not have, one taken later from a shuffle
 * queue, and writing over it would change that row: so more than one
 * empty value joins only when the values come in their reader's order
 * (o->values_in_order), where any row lying between two values of the
 * batch is in the batch between them. Random text has two empty lines in
 * a row every few hundred lines, and a run cut there cost a write(2)
 * more per batch of 1024. Stops before `limit` bytes (0: no limit).
 * *ret_span: the run's bytes with its last terminator. */
static size_t run_end(const lines_out *o, const qf_string *v, size_t i, size_t n, size_t limit,
                      size_t *ret_span)
{
    const char *start = v[i].data;
    size_t max_gap = o->values_in_order ? SIZE_MAX : 1;
    size_t j = i + 1, span = v[i].len + 1;
    for (;;) {
        size_t gap = 0, k = j;
        while (k < n && v[k].len == 0 && gap < max_gap) {
            gap++;
            k++;
        }
        if (k >= n || v[k].len == 0 || v[k].data != start + span + gap)
            break;
        size_t next = span + gap + v[k].len + 1;
        if (limit && next > limit)
            break;
        span = next;
        j = k + 1;
    }
    *ret_span = span;
    return j;
}

/* Turn the terminators of the run v[i..j) and the bytes of the empty
 * values in it into '\n's: the run's bytes are then its lines. The
 * strings are the caller's (see lines_out_values() in the header). */
static void terminate_run(const qf_string *v, size_t i, size_t j)
{
    char *p = (char *)v[i].data;
    for (size_t k = i; k < j; k++) {
        if (v[k].len)
            p = (char *)v[k].data + v[k].len;
        *p++ = '\n';
    }
}

/* Values ahead of the one written whose bytes are asked for (below). */
#define PREFETCH_AHEAD 8

/* A long run [i, j) of values whose ends are in place (o->ends_in_place,
 * in order), written where it lies without a store into it: the bytes up
 * to the run's last value are whole lines, their '\n's the source's own
 * (a "\r\n" or an empty "\r\n" line between two values would put them a
 * byte further apart than run_end() joins); the last value's end may be
 * the '\r' of a "\r\n", so that line goes through the buffer. Why not
 * terminate_run(): the reader's core wrote these lines, and a store into
 * each of them cost a transfer of the line to this core and back when the
 * reader reused its block (qflow-lines FILE, 200 MB, in the VM's slow
 * core-to-core regime: 76-80 -> 67-71 ms, its system time 37-39 -> 27-31
 * ms). */
static void write_run_in_place(lines_out *o, const qf_string *v, size_t i, size_t j)
{
    const char *last = v[j - 1].data;
    if (last > v[i].data)
        write_lines(o, v[i].data, (size_t)(last - v[i].data));
    lines_out_line(o, NULL, 0, last, v[j - 1].len);
}

lines_out_status lines_out_values(lines_out *o, const qf_string *v, size_t n)
{
    /* In order, ends in place: a run's bytes are not read here at all. */
    bool in_place = o->ends_in_place && o->values_in_order;
    size_t i = 0;
    while (i < n && o->status == LINES_OUT_OK) {
        /* Lines taken from a shuffle queue lie all over the reader's blocks,
         * in lines another core wrote: each copy waited for its line's
         * bytes. Asked for a few values ahead (the first byte, and the
         * terminator, which terminate_run() writes), they come in while
         * the lines before them are copied: qflow-lines --shuffle over
         * 200 MB, 222-231 -> 168-171 ms; in order, where they lie back to
         * back and are written from where they lie, no change (90 ms). */
        if (!in_place && i + PREFETCH_AHEAD < n && v[i + PREFETCH_AHEAD].len) {
            const qf_string *a = &v[i + PREFETCH_AHEAD];
            __builtin_prefetch(a->data, 0);
            __builtin_prefetch(a->data + a->len, 1);
        }
        size_t room = o->cap - o->len;
        if (v[i].len == 0) {
            if (room == 0 && lines_out_flush(o) != LINES_OUT_OK)
                break;
            o->buf[o->len++] = '\n';
            i++;
            continue;
        }
        size_t span, j = run_end(o, v, i, n, 0, &span);
        if (span >= LINES_OUT_DIRECT_MIN) {
            /* A long run is written from where it lies: copying it into
             * the buffer would cost more than the write(2) it saves (to
             * /dev/null or a pipe, the kernel's copy is the only one). */
            if (o->len && lines_out_flush(o) != LINES_OUT_OK)
                break;
            if (in_place) {
                write_run_in_place(o, v, i, j);
            } else {
                terminate_run(v, i, j);
                write_lines(o, v[i].data, span);
            }
            i = j;
            continue;
        }
        if (span > room && v[i].len < room)
            j = run_end(o, v, i, n, room, &span); /* the part that fits */
        if (span <= room) {
            /* A short run: one copy (lines are short: this saves a memcpy
             * call per line). In place, only the last end may not be a
             * '\n' (see write_run_in_place()): set in the copy. */
            if (!in_place)
                terminate_run(v, i, j);
            memcpy(o->buf + o->len, v[i].data, span);
            o->len += span;
            if (in_place)
                o->buf[o->len - 1] = '\n';
            i = j;
            continue;
        }
        /* A line that does not fit: lines_out_line() flushes (and grows
         * the buffer for a line longer than it). */
        if (lines_out_line(o, NULL, 0, v[i].data, v[i].len) == LINES_OUT_OK)
            i++;
    }
    return o->status;
}
