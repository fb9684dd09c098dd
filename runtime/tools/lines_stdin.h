/* lines_stdin.h - qflow-lines' standard input: a thread of the tool's own
 * that reads fd 0, cuts it into lines as a TextLineReader cuts a file, and
 * feeds them as (key, value) elements to the pipeline.
 *
 * Why a thread and not a reader task: a pipe may never deliver, and a
 * worker of the runtime must never wait for it. This thread waits in
 * poll(2) on fd 0 and on an eventfd; a Coordinator stop (a stop action)
 * writes the eventfd and closes the queues it feeds with
 * cancel_pending_enqueues, so the thread ends whether it waits for input or
 * for room.
 *
 * Three ways to feed, chosen by lines_stdin_run() and lines_stdin_spool():
 *   - straight into the batch queue (the default: one queue operation per
 *     line). Then `q` is a *gate*, a queue nothing is ever put into, that
 *     stays open while standard input is and is closed at its end; a batch
 *     source over the gate keeps the batch's runner from closing the batch
 *     queue before the last line is in (the last source to end closes it,
 *     spec 174), and ends right after;
 *   - into `q` itself, for a source over it (all the lines are in `q`
 *     before whoever joins the thread goes on);
 *   - no lines at all: every byte copied as it is to another file (--seed:
 *     standard input is kept whole in a memory file, which the readers then
 *     read as they read any FILE, once the single-threaded pipeline starts,
 *     so its schedule, and the output, do not depend on when the bytes
 *     arrived; a line made an element of its own on the way cost 1,000 ns
 *     of the one thread's time, the reader's rows a tenth of that).
 *
 * Lines follow the TextLineReader exactly (spec 190-195): a line is what
 * comes before '\n', one '\r' before the '\n' (or at the end) is dropped,
 * an unterminated last line is still a line unless nothing is left of it,
 * keys are "-:<line number>" counting from 1, header lines skipped are
 * counted. At the end of the input `q` is closed (plainly).
 *
 * One thread (the tool's main thread) calls start / run / join / free.
 */
#ifndef QFLOW_LINES_STDIN_H
#define QFLOW_LINES_STDIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "qflow.h"

typedef struct lines_stdin {
    int fd;                   /* what is read: STDIN_FILENO */
    int spool_fd;             /* lines_stdin_spool(): where the bytes go; else -1 */
    int wake_fd;              /* eventfd written by the stop action */
    qf_queue *q;              /* the gate, or the queue of lines (see the top) */
    qf_queue *_Atomic target; /* where lines go; NULL until run */
    qf_coord *coord;          /* borrowed: read errors are reported to it */
    int64_t skip;             /* header lines to drop */
    pthread_t thread;
    bool made; /* lines_stdin_start() ran: there is something to free */
    bool started;
    qf_coord_action *action;
} lines_stdin;

/**
 * lines_stdin_start() - make `q` (see the top: `capacity` 0 makes a gate;
 * else a queue of that many lines, negative: unbounded) and register the
 * stop action with `coord`. Nothing is read yet. Returns QF_OK, or an error
 * with qf_last_message() set (lines_stdin_free() cleans up either way).
 */
qf_code lines_stdin_start(lines_stdin *in, int fd, qf_coord *coord, int64_t capacity,
                          int64_t skip_header_lines);

/**
 * lines_stdin_run() - start the thread, feeding `target` (the batch queue,
 * with a gate) or, target NULL, `q`. Call with the stop signals blocked:
 * the thread inherits the mask.
 */
qf_code lines_stdin_run(lines_stdin *in, qf_queue *target);

/**
 * lines_stdin_spool() - start the thread copying every byte of the input
 * to `out` (a file the caller owns, written from its current offset) until
 * the end of the input or a stop; no lines, and `q` is left alone (close
 * it, or not, as the caller likes). A read or write error stops `coord`
 * with "read error on standard input: ..." or "standard input: cannot keep
 * it: ...". Call with the stop signals blocked, after lines_stdin_start().
 */
qf_code lines_stdin_spool(lines_stdin *in, int out);

/** lines_stdin_join() - wait for the thread (it ends at the end of the
 *  input or after a stop). Idempotent. */
void lines_stdin_join(lines_stdin *in);

/** lines_stdin_free() - after join: remove the stop action, release the
 *  queues and the eventfd. Nothing to do for a zeroed, never started one. */
void lines_stdin_free(lines_stdin *in);

#endif
