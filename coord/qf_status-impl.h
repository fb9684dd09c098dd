/* qf_status-impl.h - internal: how the library records errors without
 * formatting on paths that may be polled in a loop.
 * Never installed; not exported from libqflow.so (the layers above link
 * the static archive). */
#ifndef QF_STATUS_IMPL_H
#define QF_STATUS_IMPL_H

#include <stdarg.h>

#include "qf_status.h"

/* Internal: like qf_set_error with a va_list. */
qf_code qf__set_errorv(qf_code code, const char *fmt, va_list ap);
/* Internal: record a failure whose message is a static string (no
 * formatting; used on paths that may be polled in a loop). */
qf_code qf__set_error_static(qf_code code, const char *msg);
/* Internal: record a failure whose message names an object, for paths that
 * may be polled in a loop (a try-dequeue on an empty queue): nothing is
 * formatted here. `fmt` (static) takes, in order, `kind` (static), `name`
 * (copied, truncated to 127 bytes) and `n` as %s, %s and %lld (a format may
 * leave the last ones out); qf_last_message() formats it when asked. */
qf_code qf__set_error_named(qf_code code, const char *fmt, const char *kind, const char *name,
                            long long n);

#endif
