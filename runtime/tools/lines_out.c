/* lines_out.c - whole-line output for qflow-lines (see lines_out.h). */
#include "lines_out.h"

#include <errno.h>
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

lines_out_status lines_out_flush(lines_out *o)
{
    size_t off = 0, end = o->len;
    while (o->status == LINES_OUT_OK && off < end) {
        ssize_t n = write(o->fd, o->buf + off, end - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            if (o->stop && *o->stop && end == o->len) {
                /* Stop as soon as the output ends with a whole line: at
                 * once when off is at a line start, else after the rest of
                 * the current line (the buffer holds only whole lines, so
                 * that '\n' exists). */
                if (off == 0 || o->buf[off - 1] == '\n') {
                    end = off;
                } else {
                    const char *nl = memchr(o->buf + off, '\n', end - off);
                    end = (size_t)(nl - o->buf) + 1;
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
    if (o->status == LINES_OUT_OK && end < o->len)
        o->status = LINES_OUT_STOPPED;
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

lines_out_status lines_out_values(lines_out *o, const qf_string *v, size_t n)
{
    size_t i = 0;
    while (i < n && o->status == LINES_OUT_OK) {
        char *p = o->buf + o->len;
        size_t room = o->cap - o->len;
        while (i < n && v[i].len < room) {
            if (v[i].len == 0) {
                *p++ = '\n';
                room--;
                i++;
                continue;
            }
            /* Values a TextLineReader handed out lie back to back in its
             * block, each one byte (its '\n', overwritten with a NUL) after
             * the one before: copy such a run at once, then turn those
             * bytes into '\n's. Lines are short, so this saves a memcpy
             * call per line. */
            const char *start = v[i].data;
            size_t j = i + 1, span = v[i].len + 1; /* the run and its last '\n' */
            while (j < n && v[j].len && v[j].data == start + span && span + v[j].len < room) {
                span += v[j].len + 1;
                j++;
            }
            memcpy(p, start, span - 1);
            for (size_t k = i; k + 1 < j; k++)
                p[(size_t)(v[k].data - start) + v[k].len] = '\n';
            p[span - 1] = '\n';
            p += span;
            room -= span;
            i = j;
        }
        o->len = (size_t)(p - o->buf);
        /* A line that does not fit: lines_out_line() flushes (and grows
         * the buffer for a line longer than it). */
        if (i < n && lines_out_line(o, NULL, 0, v[i].data, v[i].len) == LINES_OUT_OK)
            i++;
    }
    return o->status;
}
