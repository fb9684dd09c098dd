/* qf_queue_runner.c - QueueRunners: one task per enqueue op.
 *
 * Each task polls its op and then enqueues what the op produced, holding
 * the element while the queue is full (a parked task, no worker). Per
 * runtime the runner counts its live tasks, as TensorFlow counts threads
 * per session: the last task to retire through a closed code runs the close
 * op (spec 130-131), unless a task of the same start left because the
 * runtime shut down (its input has not ended: a start on a new runtime goes
 * on, spec 139-141); a start while tasks are still counted does nothing
 * (spec 139).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_coordinator-impl.h"
#include "qf_lock-impl.h"
#include "qf_pagemem-impl.h"
#include "qf_queue-impl.h"
#include "qf_queue_runner-impl.h"
#include "qf_runtime-impl.h"
#include "qf_status-impl.h"

_Static_assert(_Alignof(qf__rtask) <= 8, "runner-task state lives 8-aligned inside its task");
_Static_assert(offsetof(qf__rtask, ticket) == 64,
               "a poll's fields fill the first 64 bytes of the runner-task state, the ticket "
               "follows (qf_queue_runner-impl.h)");

/* Steps per poll before a runner task yields its worker to others. */
#define BUDGET 64

/* A turn: while other tasks wait for the worker, a runner that can put
 * keeps putting for up to TURN_PUTS elements or TURN_NS, whichever ends
 * first, then yields. One put per turn made every element cost a task
 * switch through the run queues, 3-5x the put itself (perf/runners_regime:
 * 290 against 66 ns an element with one worker and the consumer a task).
 * The clock starts when the runner's first put of its own in this poll
 * ends, and is read again after its 2nd, 4th, 8th and 16th, so a slow op
 * ends its turn after at most two of its puts, or about twice TURN_NS. A
 * put that a consumer finished for the runner (its ticket, served while
 * the queue was full: pointer queues and element queues that are neither
 * inline nor packed) is not one of the turn's: it starts no clock and is
 * not counted. With the queue full every element goes that way, one poll
 * each, and two clock reads per poll (about 24 ns each on this VM) were a
 * tenth of the element's cost. A runner's first turn is one put: a start
 * of 10,000 runners gets each runner's first element out before any
 * runner's second turn. */
#define TURN_PUTS 32
#define TURN_NS 10000

typedef struct turn {
    bool first;    /* the runner's first poll */
    unsigned puts; /* of its own, in this poll */
    int64_t t0;    /* when the first put of its own ended (puts >= 1) */
} turn;

/* After a put (`handed`: a consumer finished it, the ticket): whether the
 * turn is over and others wait for the worker. */
static bool turn_over(qf_task *t, turn *u, bool handed)
{
    if (handed)
        return false;
    unsigned n = ++u->puts;
    bool over;
    if (u->first || n >= TURN_PUTS) {
        over = true;
    } else if (n == 1) {
        u->t0 = qf_now_ns();
        over = false;
    } else {
        over = (n & (n - 1)) == 0 && qf_now_ns() - u->t0 >= TURN_NS;
    }
    return over && qf_task_should_yield(t);
}

/* --------------------------------------------------------------- creation */

static qf_code default_close(void *arg)
{
    return qf_queue_close(arg, false);
}

static qf_code default_cancel(void *arg)
{
    return qf_queue_close(arg, true);
}

/* The default closed codes, shared rather than copied into every runner. */
static const qf_code default_closed[] = {QF_OUT_OF_RANGE};

/* Appends a NUL-terminated copy of a + b + c at *p; returns the copy. */
static const char *put_name3(char **p, const char *a, const char *b, const char *c)
{
    char *s = *p;
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    *p = s + la + lb + lc + 1;
    return s;
}

static const char *put_name(char **p, const char *a, const char *b)
{
    return put_name3(p, a, b, "");
}

/* An op's task is named TASK_PREFIX <queue> "-" <op> (spec 128). */
#define TASK_PREFIX "QueueRunnerThread-"

/* Op i's function or input fits its kind, and a pointer producer feeds a
 * queue of pointers. */
static qf_code check_op(qf_queue *queue, const qf_enqueue_op *op, size_t i)
{
    if (op->kind == QF_OP_PRODUCE_PTR &&
        !(qf_queue_is_inline(queue) && qf_queue_dtype(queue, 0) == QF_PTR))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Enqueue op %zu ('%s') produces pointers, but queue '%s' is not a "
                            "queue of one scalar QF_PTR component",
                            i, op->name ? op->name : "", qf_queue_name(queue));
    bool ok = (op->kind == QF_OP_PRODUCE && op->produce) ||
              (op->kind == QF_OP_PRODUCE_PTR && op->produce_ptr) ||
              (op->kind == QF_OP_TRANSFORM && op->input) || (op->kind == QF_OP_POLL && op->poll);
    if (!ok)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Enqueue op %zu ('%s') of the runner for queue '%s' lacks its "
                            "function or input queue",
                            i, op->name ? op->name : "", qf_queue_name(queue));
    return QF_OK;
}

static qf_code check_closed_codes(const qf_queue_runner_options *o)
{
    for (size_t i = 0; i < o->n_closed_codes; i++)
        if (!o->closed_codes || !qf_code_is_valid(o->closed_codes[i]) ||
            o->closed_codes[i] == QF_OK)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "queue_closed_exception_types must be canonical error codes "
                                "(got %d)",
                                o->closed_codes ? (int)o->closed_codes[i] : -1);
    if (o->n_closed_codes > UINT32_MAX)
        return qf_set_error(QF_INVALID_ARGUMENT, "too many queue_closed_exception_types");
    return QF_OK;
}

/* Bytes for every name the runner keeps (each NUL-terminated): the ops'
 * (or "enqueue_op_<i>") and their tasks', then the close and cancel ops'
 * (or the queue's defaults). */
static size_t names_size(const char *qn, const qf_enqueue_op *ops, size_t n_ops,
                         const qf_queue_runner_options *o)
{
    size_t names = 0;
    for (size_t i = 0; i < n_ops; i++) {
        size_t op = (ops[i].name ? strlen(ops[i].name) : sizeof("enqueue_op_") + 20) + 1;
        names += op + sizeof(TASK_PREFIX) + strlen(qn) + op;
    }
    names += o->close_op_name ? strlen(o->close_op_name) + 1 : strlen(qn) + sizeof("_Close");
    names += o->cancel_op_name ? strlen(o->cancel_op_name) + 1 : strlen(qn) + sizeof("_Close_1");
    return names;
}

/* Close and cancel ops, their names at *p: the options', else the queue's
 * own close (spec 130-131). */
static void set_actions(qf_queue_runner *r, qf_queue *queue, const qf_queue_runner_options *o,
                        char **p)
{
    const char *qn = qf_queue_name(queue);
    r->close_op = o->close_op ? o->close_op : default_close;
    r->close_arg = o->close_op ? o->close_arg : queue;
    r->cancel_op = o->cancel_op ? o->cancel_op : default_cancel;
    r->cancel_arg = o->cancel_op ? o->cancel_arg : queue;
    r->close_name =
        o->close_op_name ? put_name(p, o->close_op_name, "") : put_name(p, qn, "_Close");
    r->cancel_name =
        o->cancel_op_name ? put_name(p, o->cancel_op_name, "") : put_name(p, qn, "_Close_1");
}

/* The closed codes: a copy of the options' at `closed`, or the shared
 * default. */
static void set_closed(qf_queue_runner *r, const qf_queue_runner_options *o, qf_code *closed)
{
    if (o->n_closed_codes) {
        memcpy(closed, o->closed_codes, o->n_closed_codes * sizeof(qf_code));
        r->closed = closed;
        r->n_closed = (uint32_t)o->n_closed_codes;
    } else {
        r->closed = default_closed;
        r->n_closed = 1;
    }
}

/* The ops, their names and their tasks' at *p; each input queue
 * referenced. */
static void set_ops(qf_queue_runner *r, const qf_enqueue_op *ops, size_t n_ops, char **p)
{
    const char *qn = qf_queue_name(r->queue);
    for (size_t i = 0; i < n_ops; i++) {
        r->ops[i].op = ops[i];
        char idx[48];
        snprintf(idx, sizeof(idx), "enqueue_op_%zu", i);
        r->ops[i].op.name = put_name(p, ops[i].name ? ops[i].name : idx, "");
        char *task_name = *p;
        put_name3(p, TASK_PREFIX, qn, "-");
        (*p)--; /* the op's name goes over the NUL */
        put_name(p, r->ops[i].op.name, "");
        r->ops[i].task_name = task_name;
        if (ops[i].input)
            qf_queue_ref(ops[i].input);
    }
}

qf_code qf_queue_runner_new(qf_queue *queue, const qf_enqueue_op *ops, size_t n_ops,
                            const qf_queue_runner_options *opts, qf_queue_runner **ret)
{
    if (!queue || !ops || n_ops == 0 || !ret)
        return qf_set_error(QF_INVALID_ARGUMENT, "Must provide queue and enqueue_ops.");
    qf_code rc = QF_OK;
    for (size_t i = 0; rc == QF_OK && i < n_ops; i++)
        rc = check_op(queue, &ops[i], i);
    const qf_queue_runner_options none = {0};
    const qf_queue_runner_options *o = opts ? opts : &none;
    if (rc != QF_OK || (rc = check_closed_codes(o)) != QF_OK)
        return rc;

    /* One allocation: the struct, the ops, custom closed codes, then every
     * name (a runner is per-queue state a program may hold thousands of). */
    size_t n_closed = o->n_closed_codes;
    size_t names = names_size(qf_queue_name(queue), ops, n_ops, o);
    size_t head = sizeof(qf_queue_runner) + n_ops * sizeof(qf__op_rec);
    if (n_ops > (SIZE_MAX / 4) / sizeof(qf__op_rec) || n_closed > (SIZE_MAX / 4) / sizeof(qf_code))
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a QueueRunner");
    qf_queue_runner *r = calloc(1, head + n_closed * sizeof(qf_code) + names);
    if (!r)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a QueueRunner");
    char *p = (char *)r + head + n_closed * sizeof(qf_code);
    r->queue = qf_queue_ref(queue);
    r->n_ops = n_ops;
    set_actions(r, queue, o, &p);
    set_closed(r, o, (qf_code *)((char *)r + head));
    set_ops(r, ops, n_ops, &p);
    r->cleanup = o->cleanup;
    r->cleanup_arg = o->cleanup_arg;
    *ret = r;
    return QF_OK;
}

static qf__runner_run *run_at(qf_queue_runner *r, size_t i)
{
    return i == 0 ? &r->run0 : &r->more_runs[i - 1];
}

qf_code qf_queue_runner_free(qf_queue_runner *r)
{
    if (!r)
        return QF_OK;
    qf__lock(&r->lock);
    for (size_t i = 0; i < r->n_runs; i++)
        if (run_at(r, i)->running) {
            size_t running = run_at(r, i)->running;
            qf__unlock(&r->lock);
            return qf_set_error(QF_FAILED_PRECONDITION,
                                "QueueRunner '%s' still has %zu running tasks",
                                qf_queue_name(r->queue), running);
        }
    qf__unlock(&r->lock);
    for (size_t i = 0; i < r->n_ops; i++)
        qf_queue_unref(r->ops[i].op.input);
    for (size_t i = 0; i < r->n_exc; i++)
        qf_status_free(r->exc[i]);
    free(r->exc);
    free(r->more_runs);
    qf_queue_unref(r->queue);
    void (*cleanup)(void *) = r->cleanup;
    void *cleanup_arg = r->cleanup_arg;
    free(r); /* ops, closed codes and names are inside */
    if (cleanup)
        cleanup(cleanup_arg);
    return QF_OK;
}

/* The accessors' answer to a NULL runner: a neutral value, the error
 * recorded (static message). */
static bool null_runner(const qf_queue_runner *r, const char *msg)
{
    if (r)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

const char *qf_queue_runner_name(const qf_queue_runner *r)
{
    return null_runner(r, "qf_queue_runner_name: runner (r) is NULL") ? NULL
                                                                      : qf_queue_name(r->queue);
}

qf_queue *qf_queue_runner_queue(const qf_queue_runner *r)
{
    return null_runner(r, "qf_queue_runner_queue: runner (r) is NULL") ? NULL : r->queue;
}

size_t qf_queue_runner_num_ops(const qf_queue_runner *r)
{
    return null_runner(r, "qf_queue_runner_num_ops: runner (r) is NULL") ? 0 : r->n_ops;
}

size_t qf_queue_runner_closed_codes(const qf_queue_runner *r, qf_code *out, size_t cap)
{
    if (null_runner(r, "qf_queue_runner_closed_codes: runner (r) is NULL"))
        return 0;
    for (size_t i = 0; out && i < r->n_closed && i < cap; i++)
        out[i] = r->closed[i];
    return r->n_closed;
}

/* ------------------------------------------------------------ bookkeeping */

static qf__runner_run *find_run(qf_queue_runner *r, const qf_runtime *rt, bool create)
{
    for (size_t i = 0; i < r->n_runs; i++)
        if (run_at(r, i)->rt == rt)
            return run_at(r, i);
    if (!create)
        return NULL;
    if (r->n_runs >= 1 && r->n_runs - 1 == r->cap_more) {
        /* Only a runner started on a second runtime pays for this array. */
        if (r->cap_more > UINT32_MAX / 2)
            return NULL;
        uint32_t nc = r->cap_more ? r->cap_more * 2 : 2;
        qf__runner_run *nr = realloc(r->more_runs, nc * sizeof(*nr));
        if (!nr)
            return NULL;
        r->more_runs = nr;
        r->cap_more = nc;
    }
    qf__runner_run *run = run_at(r, r->n_runs++);
    memset(run, 0, sizeof(*run));
    run->rt = rt;
    return run;
}

size_t qf_queue_runner_running(const qf_queue_runner *r, const qf_runtime *rt)
{
    if (null_runner(r, "qf_queue_runner_running: runner (r) is NULL"))
        return 0;
    qf_queue_runner *mr = (qf_queue_runner *)r;
    qf__lock(&mr->lock);
    qf__runner_run *run = find_run(mr, rt, false);
    size_t n = run ? run->running : 0;
    qf__unlock(&mr->lock);
    return n;
}

size_t qf_queue_runner_num_exceptions(const qf_queue_runner *r)
{
    if (null_runner(r, "qf_queue_runner_num_exceptions: runner (r) is NULL"))
        return 0;
    qf_queue_runner *mr = (qf_queue_runner *)r;
    qf__lock(&mr->lock);
    size_t n = mr->n_exc;
    qf__unlock(&mr->lock);
    return n;
}

qf_status *qf_queue_runner_exception(const qf_queue_runner *r, size_t i)
{
    if (null_runner(r, "qf_queue_runner_exception: runner (r) is NULL"))
        return NULL;
    qf_queue_runner *mr = (qf_queue_runner *)r;
    qf__lock(&mr->lock);
    qf_status *s = i < mr->n_exc ? qf_status_copy(mr->exc[i]) : NULL;
    qf__unlock(&mr->lock);
    return s;
}

static void record_exception(qf_queue_runner *r, qf_status *st)
{
    qf__lock(&r->lock);
    if (r->n_exc == r->cap_exc) {
        uint32_t nc = r->cap_exc ? r->cap_exc * 2 : 4;
        if (r->cap_exc > UINT32_MAX / 2) {
            qf__unlock(&r->lock);
            qf_status_free(st);
            return;
        }
        qf_status **ne = realloc(r->exc, nc * sizeof(*ne));
        if (!ne) {
            qf__unlock(&r->lock);
            qf_status_free(st);
            return;
        }
        r->exc = ne;
        r->cap_exc = nc;
    }
    r->exc[r->n_exc++] = st;
    qf__unlock(&r->lock);
}

static void cancel_action(void *arg)
{
    qf_queue_runner *r = arg;
    r->cancel_op(r->cancel_arg); /* errors ignored (spec 134) */
}

/* A task leaves. The last one to leave through a closed code closes the
 * queue, unless a task of the same start left through a cancel (spec
 * 139-141: a start on a new runtime continues); the last one in any case
 * withdraws the stop action. */
static void retire(qf__rtask *s, const qf_runtime *rt, bool closed, bool cancelled)
{
    qf_queue_runner *r = s->r;
    qf_coord_action *action = NULL;
    qf_coord *coord = NULL;
    bool last;
    qf__lock(&r->lock);
    qf__runner_run *run = find_run(r, rt, false);
    if (run && cancelled)
        run->cancelled = true;
    last = run && --run->running == 0;
    if (last) {
        closed = closed && !run->cancelled;
        action = run->action;
        coord = run->coord;
        run->action = NULL;
        run->coord = NULL;
    }
    qf__unlock(&r->lock);
    if (last && closed)
        r->close_op(r->close_arg); /* errors ignored (spec 130) */
    /* A stop wakes the tasks before its stop work reaches the actions: an
     * action withdrawn in between would never run, and the queue would
     * stay open after the join (spec 134). check_stop runs what this
     * epoch's stop work has not claimed yet (each action once). */
    if (action)
        (void)qf_coord_check_stop(coord);
    if (action)
        qf_coord_remove_stop_action(coord, action);
}

/* ----------------------------------------------------------------- tasks */

static bool is_closed_code(const qf_queue_runner *r, qf_code rc)
{
    for (size_t i = 0; i < r->n_closed; i++)
        if (r->closed[i] == rc)
            return true;
    return false;
}

static void drop_pending(qf__rtask *s)
{
    if (!qf__queue_put_abandon(s->r->queue, &s->ticket)) {
        /* A consumer put the element in line into the queue meanwhile. */
        if (s->has_ptr)
            s->has_ptr = false;
        else if (s->holding)
            s->holding = NULL;
        else if (s->row_i < s->nrows)
            s->row_i++;
    }
    qf_element_free(s->holding);
    s->holding = NULL;
    if (s->has_ptr) {
        qf_ptr_dtor dtor = qf_queue_ptr_dtor(s->r->queue);
        if (dtor)
            dtor(s->held_ptr);
        s->has_ptr = false;
    }
    for (uint32_t i = s->row_i; i < s->nrows; i++)
        qf_element_free(s->rows[i]);
    free(s->rows);
    s->rows = NULL;
    s->nrows = s->row_i = 0;
}

/* The task's last poll: withdraw wakers, drop what is pending, leave. The
 * state itself is inside the task and goes with it. */
static qf_code leave(qf__rtask *s, qf_task *t, qf_code rc, bool closed, bool cancelled)
{
    qf_waker_withdraw(qf_task_waker(t));
    if (s->stop_registered)
        qf_coord_cancel_waker(s->coord, &s->stop_waker);
    drop_pending(s);
    retire(s, t->rt, closed, cancelled);
    return rc;
}

static qf_code fail(qf__rtask *s, qf_task *t, qf_code rc)
{
    qf_queue_runner *r = s->r;
    if (!qf_code_is_valid(rc)) /* an op's nonsense must not become the task's result */
        rc = qf_set_error(QF_INVALID_ARGUMENT,
                          "Enqueue op '%s' of QueueRunner '%s' returned %d, which is not a "
                          "qf_code",
                          s->op->op.name, qf_queue_name(r->queue), (int)rc);
    if (rc == QF_CANCELLED && qf_task_is_cancelled(t))
        /* A queue's poll that a shutdown cancelled (qf_queue.h, poll forms):
         * the shutdown, not an error of the op's; its input has not ended,
         * as when the poll parks (runner_task()). */
        return leave(s, t, QF_CANCELLED, false, true);
    if (is_closed_code(r, rc))
        return leave(s, t, QF_OK, true, false); /* its input ended: a clean exit */
    if (s->coord) {
        qf_coord_report(s->coord, rc); /* spec 133, 136 */
    } else {
        /* spec 132; an op may return a code without a message of its own */
        qf_status *st =
            qf_last_code() == rc
                ? qf_last_status()
                : qf_status_new(rc, "Enqueue op '%s' of QueueRunner '%s' failed: %s",
                                s->op->op.name, qf_queue_name(r->queue), qf_code_name(rc));
        record_exception(r, st);
    }
    /* An op that saw the shutdown's cancel and gave up with an error: its
     * input has not ended either (retire()). */
    return leave(s, t, rc, false, qf_task_is_cancelled(t));
}

/* Rows in a batch from op s: its first component's first dimension. */
static qf_code batch_rows(qf_queue *q, const qf_element *batch, const qf__rtask *s, int64_t *ret_n)
{
    const qf_tensor *t0 = qf_element_get(batch, 0);
    if (!t0 || qf_tensor_shape(t0)->rank < 1)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Enqueue op '%s' for queue '%s' must produce a batch (rank >= 1)",
                            s->op->op.name, qf_queue_name(q));
    int64_t n = qf_tensor_shape(t0)->dims[0];
    if (n < 0 || (uint64_t)n > UINT32_MAX) /* rows are counted in 32 bits */
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "Enqueue op '%s' for queue '%s' produced a batch of %lld rows; at "
                            "most %u are supported",
                            s->op->op.name, qf_queue_name(q), (long long)n, (unsigned)UINT32_MAX);
    *ret_n = n;
    return QF_OK;
}

/* Each component of the batch unstacked: component c of row r goes to
 * parts[c * n + r]. Parts not made stay NULL. */
static qf_code unstack_batch(qf_element *batch, int64_t n, qf_tensor **parts)
{
    qf_code rc = QF_OK;
    size_t nc = qf_element_size(batch);
    for (size_t c = 0; c < nc && rc == QF_OK; c++) {
        qf_tensor *t = qf_element_take(batch, c);
        if (!t || qf_tensor_shape(t)->rank < 1 || qf_tensor_shape(t)->dims[0] != n) {
            qf_tensor_unref(t);
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "All input tensors must have the same size in the 0th dimension. "
                                "Component %zu differs",
                                c);
        }
        rc = qf_tensor_unstack(t, parts + c * (size_t)n);
    }
    return rc;
}

/* The rows as elements in s->rows when the unstacking went well (rc),
 * else every part dropped; returns rc, or QF_RESOURCE_EXHAUSTED when the
 * row array of a batch of over 64 components cannot be had (then every part
 * is dropped too, so nothing leaks). qf_element_of() copies the array, so
 * one serves every row. */
static qf_code rows_of_parts(qf__rtask *s, qf_tensor **parts, int64_t n, size_t nc, qf_code rc)
{
    qf_tensor *row[64];
    qf_tensor **rp = nc <= 64 ? row : malloc(nc * sizeof(*rp));
    if (!rp && rc == QF_OK)
        rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory splitting a batch");
    for (int64_t i = 0; i < n; i++) {
        for (size_t c = 0; c < nc; c++) {
            qf_tensor *part = parts[c * (size_t)n + (size_t)i];
            if (rc == QF_OK)
                rp[c] = part;
            else
                qf_tensor_unref(part);
        }
        if (rc == QF_OK)
            s->rows[i] = qf_element_of(nc, rp);
    }
    if (rp != row)
        free(rp);
    return rc;
}

/* Split a batch element into row elements. Consumes the batch. */
static qf_code split_batch(qf_queue *q, qf_element *batch, qf__rtask *s)
{
    size_t nc = qf_element_size(batch);
    int64_t n = 0, checked = 0;
    qf_code rc = batch_rows(q, batch, s, &n);
    /* The whole batch against the queue first, as an enqueue_many would
     * check it (TensorFlow's ValidateManyTuple): its dtypes, and with
     * shapes every component [n] + its shape, in the queue's words. */
    if (rc == QF_OK)
        rc = qf__validate_batch(q, batch, &checked);
    if (rc != QF_OK) {
        qf_element_free(batch);
        return rc;
    }
    qf_tensor **parts = calloc((size_t)(n ? n : 1) * nc, sizeof(*parts));
    s->rows = calloc((size_t)(n ? n : 1), sizeof(*s->rows));
    if (!parts || !s->rows) {
        free(parts);
        free(s->rows);
        s->rows = NULL;
        qf_element_free(batch);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory splitting a batch");
    }
    rc = unstack_batch(batch, n, parts);
    qf_element_free(batch);
    rc = rows_of_parts(s, parts, n, nc, rc);
    free(parts);
    s->nrows = rc == QF_OK ? (uint32_t)n : 0;
    s->row_i = 0;
    if (rc != QF_OK) {
        for (int64_t i = 0; i < n; i++)
            qf_element_free(s->rows[i]);
        free(s->rows);
        s->rows = NULL;
    }
    return rc;
}

static bool have_pending(const qf__rtask *s)
{
    return s->holding || s->has_ptr || s->row_i < s->nrows;
}

/* Run one step of the op. QF_OK: something is pending to enqueue (or, for
 * a poll op, one run finished). */
static qf_code run_op(qf__rtask *s, qf_task *t)
{
    qf_code rc;
    if (s->kind == QF_OP_PRODUCE_PTR) { /* from the first line only (qf__rtask) */
        rc = s->produce_ptr(s->op_arg, &s->held_ptr);
        s->has_ptr = rc == QF_OK;
        return rc;
    }
    const qf_enqueue_op *op = &s->op->op;
    qf_element *e = NULL;
    switch (op->kind) {
    case QF_OP_PRODUCE:
        rc = op->produce(op->arg, &e);
        if (rc != QF_OK)
            return rc;
        if (!e)
            return QF_OK;
        if (op->many) {
            free(s->rows);
            s->rows = NULL;
            return split_batch(s->r->queue, e, s);
        }
        s->holding = e;
        return QF_OK;
    case QF_OP_TRANSFORM:
        rc = qf_queue_poll_dequeue(op->input, qf_task_waker(t), &e);
        if (rc != QF_OK)
            return rc;
        if (!op->transform) {
            s->holding = e;
            return QF_OK;
        }
        return op->transform(op->arg, e, &s->holding);
    case QF_OP_POLL:
        return op->poll(t, op->arg);
    case QF_OP_PRODUCE_PTR:
        break; /* above */
    }
    return qf_set_error(QF_INTERNAL, "unknown enqueue op kind");
}

static qf_code runner_step(qf_task *t, qf__rtask *s);

static qf_code runner_task(qf_task *t, void *arg)
{
    qf__rtask *s = arg;
    qf_code rc = runner_step(t, s);
    /* A shutdown that cancelled the task while it ran would otherwise end
     * it at the runtime's safety net, skipping leave(): the runner would
     * count it running forever and leak its state. */
    if ((rc == QF_PENDING || rc == QF_YIELD) && qf_task_is_cancelled(t)) {
        qf_set_error(QF_CANCELLED, "Enqueue operation was cancelled");
        return leave(s, t, QF_CANCELLED, false, true);
    }
    return rc;
}

static qf_code runner_step(qf_task *t, qf__rtask *s)
{
    if (qf_task_is_cancelled(t)) {
        qf_set_error(QF_CANCELLED, "Enqueue operation was cancelled");
        return leave(s, t, QF_CANCELLED, false, true);
    }
    if (s->coord && !s->stop_checked) {
        /* Be woken by a stop even while parked on an input queue. */
        s->stop_checked = true;
        qf_task_waker_init(t, &s->stop_waker);
        s->stop_registered = qf_coord_register_waker(s->coord, &s->stop_waker);
    }
    turn u = {.first = !s->had_turn};
    s->had_turn = true;
    for (int step = 0; step < BUDGET; step++) {
        if (!have_pending(s)) {
            /* spec 138: a stop ends the task before it runs the op, and
             * such an exit does not close the queue */
            if (s->coord && qf_coord_should_stop(s->coord))
                return leave(s, t, QF_OK, false, false);
            qf_code rc = run_op(s, t);
            if (rc == QF_PENDING)
                return QF_PENDING;
            if (rc == QF_YIELD) /* nothing this run: let others run first */
                return QF_YIELD;
            if (rc != QF_OK)
                return fail(s, t, rc);
            if (s->kind == QF_OP_POLL || !have_pending(s))
                continue;
        }
        bool handed = s->ticket.active; /* this put is the ticket's outcome */
        if (s->has_ptr) {
            qf_code prc =
                qf__queue_poll_put_ptr(s->queue, s->held_ptr, qf_task_waker(t), &s->ticket);
            if (prc == QF_PENDING)
                return QF_PENDING;
            if (prc != QF_OK)
                return fail(s, t, prc); /* the pointer stays held and is released */
            s->has_ptr = false;
            if (turn_over(t, &u, handed))
                return QF_YIELD; /* others wait for the worker: their turn */
            continue;
        }
        qf_element *e = s->holding ? s->holding : s->rows[s->row_i];
        qf_code rc = qf__queue_poll_put_elem(s->queue, e, qf_task_waker(t), &s->ticket);
        if (rc == QF_PENDING)
            return QF_PENDING;
        if (rc != QF_OK)
            return fail(s, t, rc); /* the element stays pending and is freed */
        if (s->holding)
            s->holding = NULL;
        else if (++s->row_i == s->nrows) {
            free(s->rows);
            s->rows = NULL;
            s->nrows = s->row_i = 0;
        }
        if (turn_over(t, &u, handed))
            return QF_YIELD; /* others wait for the worker: their turn */
    }
    return QF_YIELD;
}

/* ----------------------------------------------------------------- start */

void qf_tasks_free(qf_task **tasks, size_t n)
{
    for (size_t i = 0; tasks && i < n; i++)
        qf_task_unref(tasks[i]);
    free(tasks);
}

/* A start of at most this many runners (or tasks) keeps its lists on the
 * stack: qf_queue_runner_start() allocates nothing but its tasks. */
#define SMALL_START 8

/* Claim r for a start on rt (spec 139: not while tasks of an earlier start
 * there still run; spec 141: the raised errors are cleared). 1: claimed;
 * 0: already running, nothing to do; -1: out of memory. */
static int claim(qf_queue_runner *r, qf_runtime *rt, qf_coord *coord)
{
    qf__lock(&r->lock);
    qf__runner_run *run = find_run(r, rt, true);
    int got = !run ? -1 : run->running > 0 ? 0 : 1;
    if (got == 1) {
        for (size_t i = 0; i < r->n_exc; i++)
            qf_status_free(r->exc[i]);
        r->n_exc = 0;
        run->running = r->n_ops;
        run->cancelled = false;
        run->coord = coord;
        run->action = NULL;
    }
    qf__unlock(&r->lock);
    return got;
}

/* The cancel op of each claimed runner becomes a stop action (spec 134;
 * it runs at once if a stop is already in effect). Out of memory leaves a
 * runner without one, as a failed qf_coord_add_stop_action() always did. */
static void add_cancel_actions(qf_queue_runner *const *go, size_t n, const qf_runtime *rt,
                               qf_coord *coord)
{
    /* The actions' arguments as the void pointers they are passed as: a
     * qf_queue_runner * array is not a void * array. */
    void *small_args[SMALL_START];
    qf_coord_action *small_actions[SMALL_START];
    bool small = n <= SMALL_START;
    void **args = small ? small_args : qf__scratch_alloc(n, sizeof(*args));
    qf_coord_action **actions = small ? small_actions : qf__scratch_alloc(n, sizeof(*actions));
    if (args && actions) {
        for (size_t i = 0; i < n; i++)
            args[i] = go[i];
        if (qf__coord_add_stop_actions(coord, n, cancel_action, args, actions) == QF_OK) {
            for (size_t i = 0; i < n; i++) {
                qf__lock(&go[i]->lock);
                /* Looked up again: a start on another runtime may have
                 * grown (moved) the array since the claim. */
                find_run(go[i], rt, false)->action = actions[i];
                qf__unlock(&go[i]->lock);
            }
        }
    }
    if (!small) {
        qf__scratch_free(args, n, sizeof(*args));
        qf__scratch_free(actions, n, sizeof(*actions));
    }
}

/* One task per op of each claimed runner, in order. */
typedef struct plan_task {
    qf_queue_runner *r;
    qf__op_rec *op;
} plan_task;

typedef struct start_plan {
    plan_task *tasks;
    qf_coord *coord;
} start_plan;

static const char *plan_name(void *ctx, size_t i)
{
    return ((start_plan *)ctx)->tasks[i].op->task_name;
}

static void plan_init(void *ctx, size_t i, void *state)
{
    start_plan *p = ctx;
    qf__rtask *s = state;
    s->r = p->tasks[i].r;
    s->op = p->tasks[i].op;
    s->coord = p->coord;
    s->queue = s->r->queue;
    s->kind = s->op->op.kind;
    s->produce_ptr = s->op->op.produce_ptr;
    s->op_arg = s->op->op.arg;
}

static qf_code check_start(qf_queue_runner *const *runners, size_t n, qf_runtime *rt,
                           unsigned flags)
{
    if (!rt)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL runtime");
    if (n && !runners)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL runners with n = %zu", n);
    for (size_t i = 0; i < n; i++)
        if (!runners[i])
            return qf_set_error(QF_INVALID_ARGUMENT, "NULL runner (runners[%zu])", i);
    if (flags & ~(unsigned)(QF_RUNNER_START | QF_RUNNER_DAEMON))
        return qf_set_error(QF_INVALID_ARGUMENT, "flags 0x%x has unknown bits (0x%x)", flags,
                            flags & ~(unsigned)(QF_RUNNER_START | QF_RUNNER_DAEMON));
    return QF_OK;
}

qf_code qf_queue_runners_start(qf_queue_runner *const *runners, size_t n, qf_runtime *rt,
                               qf_coord *coord, unsigned flags, qf_task ***ret_tasks, size_t *ret_n)
{
    qf_code rc = check_start(runners, n, rt, flags);
    if (rc != QF_OK)
        return rc;
    if (ret_tasks)
        *ret_tasks = NULL;
    if (ret_n)
        *ret_n = 0;

    /* Plan: claim the runners (one already running is skipped), then one
     * task per op of those claimed. */
    qf_queue_runner *go_small[SMALL_START];
    qf_queue_runner **go = n <= SMALL_START ? go_small : qf__scratch_alloc(n, sizeof(*go));
    if (!go)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory starting queue runners");
    size_t n_go = 0, n_tasks = 0;
    for (size_t i = 0; i < n; i++) {
        int got = claim(runners[i], rt, coord);
        if (got < 0) {
            rc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory starting a QueueRunner");
            break;
        }
        if (got) {
            go[n_go++] = runners[i];
            n_tasks += runners[i]->n_ops;
        }
    }
    plan_task plan_small[SMALL_START];
    size_t planned = n_tasks; /* n_tasks is 0 after a failure: this frees the plan */
    start_plan plan = {.tasks = planned <= SMALL_START
                                    ? plan_small
                                    : qf__scratch_alloc(planned, sizeof(*plan.tasks)),
                       .coord = coord};
    qf_task **tasks = ret_tasks && n_tasks ? calloc(n_tasks, sizeof(*tasks)) : NULL;
    qf_code brc = QF_OK;
    if (!plan.tasks || (ret_tasks && n_tasks && !tasks)) {
        brc = qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory starting queue runners");
    } else {
        size_t k = 0;
        for (size_t i = 0; i < n_go; i++)
            for (size_t j = 0; j < go[i]->n_ops; j++) {
                plan.tasks[k].r = go[i];
                plan.tasks[k++].op = &go[i]->ops[j];
            }
        /* Build: the stop actions, then every task in one batch. */
        if (coord && n_go)
            add_cancel_actions(go, n_go, rt, coord);
        qf__task_batch b = {.n = n_tasks,
                            .arg_size = sizeof(qf__rtask),
                            .name = plan_name,
                            .init = plan_init,
                            .ctx = &plan};
        qf_task_options to = {.coord = coord,
                              .suspended = !(flags & QF_RUNNER_START),
                              .daemon = (flags & QF_RUNNER_DAEMON) != 0};
        brc = qf__task_spawn_batch(rt, runner_task, &b, &to, tasks);
    }
    if (brc != QF_OK) {
        /* None was created: none counts as running (the last retire of
         * each runner withdraws its stop action). */
        for (size_t i = 0; i < n_go; i++)
            for (size_t j = 0; j < go[i]->n_ops; j++) {
                qf__rtask fake = {.r = go[i]};
                retire(&fake, rt, false, false);
            }
        free(tasks);
        tasks = NULL;
        n_tasks = 0;
        if (rc == QF_OK)
            rc = brc;
    }
    if (plan.tasks != plan_small)
        qf__scratch_free(plan.tasks, planned, sizeof(*plan.tasks));
    if (go != go_small)
        qf__scratch_free(go, n, sizeof(*go));
    if (ret_tasks)
        *ret_tasks = tasks;
    if (ret_n)
        *ret_n = n_tasks;
    return rc;
}

qf_code qf_queue_runner_start(qf_queue_runner *r, qf_runtime *rt, qf_coord *coord, unsigned flags,
                              qf_task ***ret_tasks, size_t *ret_n)
{
    if (!r)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL runner");
    return qf_queue_runners_start(&r, 1, rt, coord, flags, ret_tasks, ret_n);
}
