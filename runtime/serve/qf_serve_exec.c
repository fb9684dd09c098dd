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

#include "qf_runtime-impl.h"
#include "qf_serve-impl.h"
#include "qf_task_mark-impl.h"
#include "qf_thread-impl.h"

/* What an executor remembers of a model that returned something that is
 * not a status: the first such value and how many batches got one. */
typedef struct bad_model {
    int first;
    uint64_t batches;
} bad_model;

static const char *non_code_name(int v)
{
    return v == (int)QF_PENDING ? " (QF_PENDING)" : v == (int)QF_YIELD ? " (QF_YIELD)" : "";
}

/* Run the model on a handed-out batch and answer it. A value that is not a
 * canonical code cannot be an answer (QF_PENDING, QF_YIELD, 99): the batch
 * is answered QF_INVALID_ARGUMENT, as the scheduler ends a task that
 * returns one, with the message recorded first so a completion callback on
 * this thread can read it. The batch is answered whatever happens: if
 * complete refuses it whole (the model completed some of it itself), each
 * request still handed out is answered alone. */
static void run_batch(qf_serve *s, qf_serve_execute_fn fn, void *arg, qf_serve_request **buf,
                      size_t n, bad_model *bad)
{
    qf_code st = fn(arg, buf, n);
    if (!qf_code_is_valid((int)st)) {
        if (bad->batches++ == 0)
            bad->first = (int)st;
        qf_set_error(QF_INVALID_ARGUMENT,
                     "batcher '%s': the model function returned %d%s, which is not a status "
                     "code; its batch of %zu is answered INVALID_ARGUMENT",
                     s->name, (int)st, non_code_name((int)st), n);
        st = QF_INVALID_ARGUMENT;
    }
    if (qf_serve_complete(s, buf, n, st) == QF_OK)
        return;
    for (size_t i = 0; i < n; i++)
        (void)qf_serve_complete(s, &buf[i], 1, st); /* refused: already answered */
}

/* The executor's result once the batcher is drained. */
static qf_code end_result(qf_serve *s, const bad_model *bad, qf_code rc)
{
    if (bad->batches)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': the model function returned %d%s, which is not a "
                            "status code (%llu batches answered INVALID_ARGUMENT for it)",
                            s->name, bad->first, non_code_name(bad->first),
                            (unsigned long long)bad->batches);
    return rc;
}

qf_code qf_serve_run(qf_serve *s, qf_serve_execute_fn fn, void *arg)
{
    if (!s || !fn)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_run: NULL %s", s ? "fn" : "batcher");
    if (qf__in_task())
        return qf__blocking_in_task_error("qf_serve_run");
    qf_serve_request **buf = malloc(s->max_batch * sizeof(*buf));
    if (!buf)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory running batcher '%s'", s->name);
    /* Best effort and quiet: a sandbox that refuses leaves the thread as it
     * was, the executor runs, and the thread's last error is untouched. */
    qf_thread_sched saved;
    int64_t slice = atomic_load_explicit(&s->exec_slice_ns, memory_order_relaxed);
    bool prefer = slice != 0 && qf__thread_prefer_latency(slice, &saved, true) == QF_OK;
    qf_code rc;
    size_t n;
    bad_model bad = {0, 0};
    while ((rc = qf_serve_next_batch(s, buf, &n)) == QF_OK)
        run_batch(s, fn, arg, buf, n, &bad);
    free(buf);
    if (prefer)
        (void)qf__thread_restore_sched(&saved, true);
    return end_result(s, &bad, rc == QF_OUT_OF_RANGE ? QF_OK : rc);
}

qf_code qf_serve_set_exec_slice(qf_serve *s, int64_t slice_ns)
{
    if (!s)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_set_exec_slice: NULL batcher");
    if (!qf__slice_or_zero_ok(slice_ns))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_serve_set_exec_slice: batcher '%s': slice of %lld ns is neither 0 "
                            "(leave the thread alone) nor in the kernel's %lld..%lld ns",
                            s->name, (long long)slice_ns, (long long)QF_THREAD_SLICE_MIN_NS,
                            (long long)QF_THREAD_SLICE_MAX_NS);
    atomic_store_explicit(&s->exec_slice_ns, slice_ns, memory_order_relaxed);
    return QF_OK;
}

typedef struct runner {
    qf_serve *s;
    qf_serve_execute_fn fn;
    void *arg;
    bool cancel_seen;
    bad_model bad;
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
        run_batch(s, r->fn, r->arg, r->buf, n, &r->bad);
        return QF_YIELD;
    }
    qf_task_sleep_until(t, QF_FOREVER);
    bool cancelled = r->cancel_seen;
    bad_model bad = r->bad;
    free(r);
    if (rc == QF_OUT_OF_RANGE)
        rc = cancelled ? qf_set_error(QF_CANCELLED, "batcher executor cancelled by shutdown")
                       : QF_OK;
    return end_result(s, &bad, rc);
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
    r->bad = (bad_model){0, 0};
    /* The task may run on any worker: on a busy machine each must wake on
     * time, as qf_serve_run()'s thread does (unless the runtime's owner
     * chose otherwise with qf_runtime_set_worker_slice()). Before the spawn,
     * so that the worker it wakes has the setting from the first poll; a
     * spawn that then fails leaves only that setting behind. */
    int64_t slice = atomic_load_explicit(&s->exec_slice_ns, memory_order_relaxed);
    if (slice != 0)
        qf__runtime_offer_worker_slice(rt, slice);
    qf_task_options o = {.name = s->name, .coord = s->coord};
    qf_code rc = qf_task_spawn(rt, exec_task, r, opts ? opts : &o, ret_task);
    if (rc != QF_OK)
        free(r);
    return rc;
}
