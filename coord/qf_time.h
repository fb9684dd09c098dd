/* qf_time.h - one time convention for the whole library.
 *
 * Every wait in qflow takes an absolute deadline: nanoseconds on
 * CLOCK_MONOTONIC. Absolute deadlines compose across nested waits (a call
 * that waits twice passes the same deadline down); durations would not.
 *
 *   QF_NO_WAIT   (0)   do not wait: any instant in the past behaves the same.
 *   QF_FOREVER   (-1)  wait until woken (close, cancel, stop).
 *
 * All functions here are wait-free, never block and are callable from any
 * thread; qf_now_ns() is also async-signal-safe.
 */
#ifndef QF_TIME_H
#define QF_TIME_H

#include <stdint.h>

#include "qf_export.h"

QF_BEGIN_DECLS

typedef int64_t qf_deadline;

#define QF_NO_WAIT ((qf_deadline)0)
#define QF_FOREVER ((qf_deadline)-1)

/** qf_now_ns() - CLOCK_MONOTONIC now, in nanoseconds. */
QF_API int64_t qf_now_ns(void);

/** qf_deadline_in_ns() - the deadline `ns` nanoseconds from now; ns <= 0
 *  gives QF_NO_WAIT semantics (a deadline already passed), saturates on
 *  overflow to QF_FOREVER. */
QF_API qf_deadline qf_deadline_in_ns(int64_t ns);

/** qf_deadline_in_s() - the deadline `secs` seconds from now (fractions
 *  allowed, 1e-10 is valid); negative or NaN gives a passed deadline. */
QF_API qf_deadline qf_deadline_in_s(double secs);

/** qf_deadline_passed() - true when `d` is not QF_FOREVER and now >= d. */
QF_API int qf_deadline_passed(qf_deadline d);

/** qf_deadline_min() - the earlier of two deadlines (QF_FOREVER is latest). */
QF_API qf_deadline qf_deadline_min(qf_deadline a, qf_deadline b);

QF_END_DECLS

#endif
