/* qf_status.h - status codes and status objects.
 *
 * Every qflow call that can fail returns a qf_code directly; the values are
 * TensorFlow's canonical error codes, so a code written to disk or a log
 * means the same thing in both systems.
 *
 * Messages are formatted only on failure and kept per thread: after a call
 * returns a code other than QF_OK, qf_last_message() names the object and the
 * reason ("FIFOQueue 'q' is closed and has insufficient elements (requested
 * 4, current size 3)"). A qf_status is a heap object carrying a code and a
 * message that can be handed from thread to thread (to a Coordinator, for
 * example) and is freed by whoever holds it last.
 *
 * Synchronization table
 *   qf_code_name, qf_status_*           : pure or per-object, any thread
 *   qf_last_code, qf_last_message,
 *   qf_last_status                      : per calling thread only
 */
#ifndef QF_STATUS_H
#define QF_STATUS_H

#include <stdarg.h>
#include <stdbool.h>

#include "qf_export.h"

QF_BEGIN_DECLS

/* TensorFlow's canonical codes, same numeric values (error_codes.proto). */
typedef enum qf_code {
    QF_OK = 0,
    QF_CANCELLED = 1,
    QF_UNKNOWN = 2,
    QF_INVALID_ARGUMENT = 3,
    QF_DEADLINE_EXCEEDED = 4,
    QF_NOT_FOUND = 5,
    QF_ALREADY_EXISTS = 6,
    QF_PERMISSION_DENIED = 7,
    QF_RESOURCE_EXHAUSTED = 8,
    QF_FAILED_PRECONDITION = 9,
    QF_ABORTED = 10,
    QF_OUT_OF_RANGE = 11,
    QF_UNIMPLEMENTED = 12,
    QF_INTERNAL = 13,
    QF_UNAVAILABLE = 14,
    QF_DATA_LOSS = 15,
    QF_UNAUTHENTICATED = 16,
} qf_code;

/* Number of canonical codes; valid codes are 0 .. QF_CODE_COUNT-1. */
#define QF_CODE_COUNT 17

/**
 * qf_code_name() - the canonical upper-case name of a code ("OUT_OF_RANGE").
 *
 * Ownership:   returns a static string; "UNKNOWN_CODE" for values outside
 *              the canonical range.
 * Blocking:    never.  Concurrency: any thread.  Progress: wait-free.
 */
QF_API const char *qf_code_name(int code);

/** qf_code_is_valid() - true when 0 <= code < QF_CODE_COUNT. Wait-free. */
QF_API bool qf_code_is_valid(int code);

typedef struct qf_status qf_status;

/**
 * qf_status_new() - make a status with a printf-style message.
 *
 * Ownership:   the caller owns the result; free it with qf_status_free() or
 *              hand it to a function documented as taking ownership.
 * Blocking:    never (allocates).  Concurrency: any thread.
 * Returns:     the new status. On allocation failure a static
 *              RESOURCE_EXHAUSTED status is returned, which qf_status_free()
 *              recognises and ignores, so callers need no NULL check. A code
 *              outside the canonical set (qf_code_is_valid()) or a NULL fmt
 *              gives a QF_INVALID_ARGUMENT status whose message names the
 *              argument, never a status with a made-up code.
 */
QF_API qf_status *qf_status_new(qf_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** qf_status_newv() - qf_status_new() with a va_list. */
QF_API qf_status *qf_status_newv(qf_code code, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/** qf_status_copy() - a new status with the same code and message. NULL-safe. */
QF_API qf_status *qf_status_copy(const qf_status *s);

/** qf_status_free() - release a status. NULL-safe. Not concurrently with
 *  any other use of the same status. */
QF_API void qf_status_free(qf_status *s);

/** qf_status_code() - the code; QF_OK for a NULL status. Wait-free. */
QF_API qf_code qf_status_code(const qf_status *s);

/** qf_status_message() - the message, owned by the status; "" for NULL. */
QF_API const char *qf_status_message(const qf_status *s);

/**
 * qf_last_code() / qf_last_message() - the code and message of the last
 * qflow call on this thread that failed.
 *
 * The message stays valid until the next failing qflow call on the same
 * thread. Successful calls do not clear it. Wait-free; per thread.
 */
QF_API qf_code qf_last_code(void);
QF_API const char *qf_last_message(void);

/**
 * qf_last_status() - the last failure on this thread as a new qf_status
 * (for example to pass to qf_coord_request_stop()).
 *
 * Ownership:   the caller owns the result.
 */
QF_API qf_status *qf_last_status(void);

/**
 * qf_set_error() - record a failure as this thread's last error and return
 * its code, for user code (enqueue ops, reader callbacks) that wants its
 * errors to read like qflow's. Returns code unchanged, except that a code
 * outside the canonical set (qf_code_is_valid()) or a NULL fmt records and
 * returns QF_INVALID_ARGUMENT, with a message naming the argument (and
 * keeping the caller's message after it).
 */
QF_API qf_code qf_set_error(qf_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

QF_END_DECLS

#endif
