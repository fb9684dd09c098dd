/* qf_futex.h - the only place qflow sleeps.
 *
 * Thin wrappers over Linux futex(2) on a 32-bit atomic word, private to
 * the process. Every blocking call in the library ends up in
 * qf_futex_wait_until(); everything that wakes ends up in qf_futex_wake().
 *
 * Synchronization table
 *   qf_futex_wait_until   blocking until woken, `expected` changed, or
 *                         deadline
 *   qf_futex_wake         never blocks (one syscall); async-signal-safe
 */
#ifndef QF_FUTEX_H
#define QF_FUTEX_H

#include <stdint.h>

#include "qf_export.h"
#include "qf_status.h"
#include "qf_time.h"

QF_BEGIN_DECLS

/**
 * qf_futex_wait_until() - sleep while *word == expected, at most until
 * `deadline`.
 *
 * Blocking:    until a qf_futex_wake() on `word`, a signal, the deadline
 *              (absolute CLOCK_MONOTONIC ns; QF_FOREVER for none), or
 *              returns at once when *word != expected.
 * Progress:    blocking. May return spuriously: callers re-check their
 *              condition in a loop.
 * Ordering:    none beyond what the caller's own loads give; re-read the
 *              word with acquire after returning.
 * Returns:     QF_OK when woken or the value differed (or spuriously);
 *              QF_DEADLINE_EXCEEDED when the deadline has passed;
 *              QF_INVALID_ARGUMENT for a NULL word.
 */
QF_API qf_code qf_futex_wait_until(QF_ATOMIC(uint32_t) * word, uint32_t expected,
                                   qf_deadline deadline);

/** qf_futex_wait() - the same, returning an int (0 or QF_DEADLINE_EXCEEDED).
 *  Kept for existing callers; use qf_futex_wait_until(). */
QF_API int qf_futex_wait(QF_ATOMIC(uint32_t) * word, uint32_t expected, qf_deadline deadline)
    QF_DEPRECATED("use qf_futex_wait_until(), which returns a qf_code");

/**
 * qf_futex_wake() - wake up to `n` threads sleeping on `word`
 * (INT32_MAX for all). Returns the number woken (0 for a NULL word or
 * n <= 0). Never blocks; async-signal-safe (a raw syscall).
 */
QF_API int qf_futex_wake(QF_ATOMIC(uint32_t) * word, int n);

QF_END_DECLS

#endif
