/* qf_serve_exec.c - executors: the loop that takes batches, runs the
 * model and completes them, on a caller's thread or as a task.
 *
 * The task form parks between batches: its waker waits on the batcher for
 * an arrival that can close the batch, and its timer is armed at the
 * batch's close time, so an idle batcher costs no worker and no polling.
 * After each batch it yields, so several batchers (and other tasks) share
 * one pool batch by batch.
 */
#include <stdlib.h>

#include "qf_serve-impl.h"
#include "qf_task_mark-impl.h"

qf_code qf_serve_run(qf_serve *s, qf_serve_execute_fn fn, void *arg)
{
    if (!s || !fn)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_run: NULL %s", s ? "fn" : "batcher");
    if (qf__in_task())
        return qf__blocking_in_task_error("qf_serve_run");
    qf_serve_request **buf = malloc(s->max_batch * sizeof(*buf));
    if (!buf)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory running batcher '%s'", s->name);
    qf_code rc;
    size_t n;
    while ((rc = qf_serve_next_batch(s, buf, &n)) == QF_OK)
        qf_serve_complete(s, buf, n, fn(arg, buf, n));
    free(buf);
    return rc == QF_OUT_OF_RANGE ? QF_OK : rc;
}

typedef struct runner {
    qf_serve *s;
    qf_serve_execute_fn fn;
    void *arg;
    bool cancel_seen;
    qf_serve_request *buf[]; /* max_batch */
} runner;

static qf_code exec_task(qf_task *t, void *a)
{
    runner *r = a;
    qf_serve *s = r->s;
    if (qf_task_is_cancelled(t) && !r->cancel_seen) {
        /* The runtime is shutting down: nobody will run batches any more,
         * so answer what is queued now rather than leave it. */
        r->cancel_seen = true;
        qf_serve_begin_drain(s, QF_NO_WAIT);
    }
    size_t n;
    qf_deadline wake_at;
    qf_code rc = qf_serve_poll_next_batch(s, qf_task_waker(t), r->buf, &n, &wake_at);
    if (rc == QF_PENDING) {
        qf_task_sleep_until(t, wake_at);
        return QF_PENDING;
    }
    if (rc == QF_OK) {
        qf_serve_complete(s, r->buf, n, r->fn(r->arg, r->buf, n));
        return QF_YIELD;
    }
    qf_task_sleep_until(t, QF_FOREVER);
    bool cancelled = r->cancel_seen;
    free(r);
    if (rc == QF_OUT_OF_RANGE)
        return cancelled ? qf_set_error(QF_CANCELLED, "batcher executor cancelled by shutdown")
                         : QF_OK;
    return rc;
}

qf_code qf_serve_spawn(qf_serve *s, qf_runtime *rt, qf_serve_execute_fn fn, void *arg,
                       const qf_task_options *opts, qf_task **ret_task)
{
    if (!s || !rt || !fn)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_spawn: NULL %s",
                            !s    ? "batcher"
                            : !rt ? "runtime"
                                  : "fn");
    runner *r = malloc(sizeof(*r) + s->max_batch * sizeof(r->buf[0]));
    if (!r)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory spawning batcher '%s'", s->name);
    r->s = s;
    r->fn = fn;
    r->arg = arg;
    r->cancel_seen = false;
    qf_task_options o = {.name = s->name, .coord = s->coord};
    qf_code rc = qf_task_spawn(rt, exec_task, r, opts ? opts : &o, ret_task);
    if (rc != QF_OK)
        free(r);
    return rc;
}
