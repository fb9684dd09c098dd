/* lines_out.h - qflow-lines' output: a large buffer of whole lines written
 * to a file descriptor with write(2).
 *
 * Why not stdio: the tool must never emit part of a line, also when a
 * signal or a broken pipe ends it mid-write, and it must tell those cases
 * apart. Lines are appended whole; a flush writes the buffer with as many
 * write(2) calls as it takes. When a write is interrupted by a signal
 * (EINTR: the handlers are installed without SA_RESTART) and the caller's
 * stop flag is set, the flush finishes the line it is in the middle of and
 * drops the lines after it, so the output still ends with '\n'. A line
 * longer than the buffer grows the buffer: it is still written whole.
 *
 * One thread at a time per lines_out.
 */
#ifndef QFLOW_LINES_OUT_H
#define QFLOW_LINES_OUT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "qflow.h"

typedef enum lines_out_status {
    LINES_OUT_OK = 0,
    LINES_OUT_STOPPED = 1, /* a signal stopped the flush at a line boundary */
    LINES_OUT_BROKEN = 2,  /* EPIPE: nobody reads the output any more */
    LINES_OUT_ERROR = 3,   /* another write error; errno-style code in err */
} lines_out_status;

typedef struct lines_out {
    int fd;
    char *buf;
    size_t len, cap;
    size_t base_cap; /* the size to shrink back to after a very long line */
    int err;         /* errno of the failed write (LINES_OUT_ERROR) */
    lines_out_status status;
    /* Set by the signal handler; read here after an EINTR. */
    volatile sig_atomic_t *stop;
    /* The values given to lines_out_values() come in the order their
     * reader made them (a FIFO batch queue and one consumer; not a
     * shuffle): a run may then take in several empty lines in a row (see
     * run_end() in lines_out.c). False after lines_out_init(). */
    bool values_in_order;
    /* The values given to lines_out_values() keep their source's ends in
     * place (qf__strings_keep_ends(): rows of a reader that wrote no NULs,
     * qf__queue_rows_by_length()): each non-empty value is followed by
     * "\n" or "\r\n" where it lies. With values_in_order, runs are then
     * written without a store into the strings or a read of their bytes
     * (see write_run_in_place() in lines_out.c); ignored otherwise. Set per
     * call by the caller; false after lines_out_init(). */
    bool ends_in_place;
} lines_out;

/** lines_out_init() - a buffer of `cap` bytes for `fd`. Returns false when
 *  out of memory. `stop` may be NULL (interrupted writes are then resumed). */
bool lines_out_init(lines_out *o, int fd, size_t cap, volatile sig_atomic_t *stop);

/** lines_out_free() - free the buffer (unflushed lines are dropped). */
void lines_out_free(lines_out *o);

/**
 * lines_out_line() - append "<key><TAB><value>\n" (key NULL: "<value>\n"),
 * flushing first when it does not fit. Returns the status so far: after
 * anything but LINES_OUT_OK nothing more is written and the line is
 * dropped.
 */
lines_out_status lines_out_line(lines_out *o, const char *key, size_t key_len, const char *value,
                                size_t value_len);

/* Runs of values this long (see lines_out_values()) are written where
 * they lie rather than copied into the buffer. */
#define LINES_OUT_DIRECT_MIN (16 * 1024)

/**
 * lines_out_values() - lines_out_line() for n values without keys, with
 * no call per line. Values that lie back to back, each followed by one
 * terminating byte (a TextLineReader's rows in its block), form runs: a
 * run of LINES_OUT_DIRECT_MIN bytes or more is written from where it lies,
 * after its terminators are overwritten with '\n' (unless o->ends_in_place
 * says they are '\n' already), so the caller must own the strings and not
 * need them terminated afterwards (qflow-lines frees the batch next);
 * shorter runs are copied into the buffer. Returns the
 * status so far, as lines_out_line() does.
 */
lines_out_status lines_out_values(lines_out *o, const qf_string *v, size_t n);

/** lines_out_flush() - write everything buffered (see the top of the file
 *  for how a stop ends it early). Returns the status. */
lines_out_status lines_out_flush(lines_out *o);

#endif
