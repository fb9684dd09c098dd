/* qf_status.c - codes, status objects and the per-thread last error. */
#include "qf_status-impl.h"
#include "qf_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct qf_status {
    qf_code code;
    char *message;
};

static const char *const code_names[QF_CODE_COUNT] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

/* Returned when allocating a status fails: callers never see NULL, and
 * qf_status_free() must not free it. */
static char oom_message[] = "out of memory while reporting an error";
static qf_status oom_status = {QF_RESOURCE_EXHAUSTED, oom_message};

bool qf_code_is_valid(int code)
{
    return code >= 0 && code < QF_CODE_COUNT;
}

const char *qf_code_name(int code)
{
    return qf_code_is_valid(code) ? code_names[code] : "UNKNOWN_CODE";
}

/* A status with a message made here (no caller format): for the bad-input
 * answers of qf_status_new(). */
static qf_status *status_of(qf_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static qf_status *status_of(qf_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qf_status *s = qf_status_newv(code, fmt, ap);
    va_end(ap);
    return s;
}

qf_status *qf_status_newv(qf_code code, const char *fmt, va_list ap)
{
    /* A status crosses threads and ends up as what join returns: a code
     * outside the canonical set would come out of join as nonsense, so the
     * status says what was wrong instead. */
    if (!qf_code_is_valid(code))
        return status_of(QF_INVALID_ARGUMENT,
                         "qf_status_new: code %d is not a canonical qf_code (0..%d)", (int)code,
                         QF_CODE_COUNT - 1);
    if (!fmt)
        return status_of(QF_INVALID_ARGUMENT, "qf_status_new: fmt is NULL (code %s)",
                         qf_code_name(code));
    qf_status *s = malloc(sizeof(*s));
    if (!s)
        return &oom_status;
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    if (!msg)
        msg = strdup("");
    if (!msg) {
        free(s);
        return &oom_status;
    }
    s->code = code;
    s->message = msg;
    return s;
}

qf_status *qf_status_new(qf_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qf_status *s = qf_status_newv(code, fmt, ap);
    va_end(ap);
    return s;
}

qf_status *qf_status_copy(const qf_status *s)
{
    if (!s)
        return NULL;
    return qf_status_new(s->code, "%s", s->message);
}

void qf_status_free(qf_status *s)
{
    if (!s || s == &oom_status)
        return;
    free(s->message);
    free(s);
}

qf_code qf_status_code(const qf_status *s)
{
    return s ? s->code : QF_OK;
}

const char *qf_status_message(const qf_status *s)
{
    return s ? s->message : "";
}

/* Per-thread last error. Formatting happens into a fixed buffer, so
 * recording an error never allocates; a static message skips formatting
 * entirely (try-calls polled in a loop use that). */
#define LAST_MSG_CAP 512
static _Thread_local qf_code last_code = QF_OK;
static _Thread_local const char *last_static;
static _Thread_local char last_buf[LAST_MSG_CAP];
/* A message naming an object, made only when read (qf__set_error_named). */
#define NAMED_CAP 128
static _Thread_local const char *named_fmt;
static _Thread_local const char *named_kind;
static _Thread_local char named_name[NAMED_CAP];
static _Thread_local long long named_n;

qf_code qf__set_errorv(qf_code code, const char *fmt, va_list ap)
{
    last_code = code;
    last_static = NULL;
    named_fmt = NULL;
    vsnprintf(last_buf, sizeof(last_buf), fmt ? fmt : "", ap);
    return code;
}

qf_code qf__set_error_static(qf_code code, const char *msg)
{
    last_code = code;
    last_static = msg;
    named_fmt = NULL;
    return code;
}

qf_code qf__set_error_named(qf_code code, const char *fmt, const char *kind, const char *name,
                            long long n)
{
    size_t len = name ? strnlen(name, NAMED_CAP - 1) : 0;
    memcpy(named_name, name ? name : "", len);
    named_name[len] = '\0';
    named_kind = kind ? kind : "";
    named_n = n;
    named_fmt = fmt;
    last_code = code;
    last_static = NULL;
    return code;
}

qf_code qf_set_error(qf_code code, const char *fmt, ...)
{
    if (!fmt)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_set_error: fmt is NULL (code %s)",
                            qf_code_name(code));
    va_list ap;
    va_start(ap, fmt);
    qf__set_errorv(code, fmt, ap);
    va_end(ap);
    if (!qf_code_is_valid(code)) {
        /* Keep what the caller wanted to say, after why it is refused. */
        char said[LAST_MSG_CAP / 2];
        memcpy(said, last_buf, sizeof(said) - 1);
        said[sizeof(said) - 1] = 0;
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_set_error: code %d is not a canonical qf_code (0..%d); "
                            "message: %s",
                            (int)code, QF_CODE_COUNT - 1, said);
    }
    return code;
}

qf_code qf_last_code(void)
{
    return last_code;
}

const char *qf_last_message(void)
{
    if (named_fmt) {
        snprintf(last_buf, sizeof(last_buf), named_fmt, named_kind, named_name, named_n);
        named_fmt = NULL;
    }
    return last_static ? last_static : last_buf;
}

qf_status *qf_last_status(void)
{
    return qf_status_new(last_code, "%s", qf_last_message());
}
