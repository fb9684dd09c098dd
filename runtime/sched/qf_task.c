/* qf_task.c - task lifecycle: spawn, wake, poll, finish, join. */
#include <stdlib.h>
#include <string.h>

#include "qf_blockcache-impl.h"
#include "qf_coord_join-impl.h"
#include "qf_coordinator-impl.h"
#include "qf_fence-impl.h"
#include "qf_futex.h"
#include "qf_lock-impl.h"
#include "qf_pagemem-impl.h"
#include "qf_runtime-impl.h"
#include "qf_task_mark-impl.h"
#include "qf_tsan-impl.h"

/* Where an inline argument starts: aligned to 8 (the alignment a member
 * record gives the task too), which runner-task state needs; 16 for any
 * object would cost padding in every task. */
#define TASK_ARG_OFF ((sizeof(qf_task) + 7) & ~(size_t)7)

/* A task's `done` word (the futex qf_task_join() sleeps on): running,
 * running with a joiner that may be asleep (set by the joiner before it
 * sleeps), done (stored by the task's end, which wakes the word only when
 * it replaced TASK_JOINED). The exchange and the joiner's mark are RMWs
 * of one word, so one of them sees the other: either the end reads
 * TASK_JOINED and wakes, or the mark fails on TASK_DONE and the joiner does
 * not sleep; a joiner whose futex wait starts after the end returns at once
 * (the word is no longer TASK_JOINED). tests/model/task_join.pml checks it
 * (with joiners whose deadline passes), and finds the lost wake of joiners
 * that sleep without marking. */
enum { TASK_RUNNING = 0, TASK_DONE = 1, TASK_JOINED = 2 };

/* A batch of at most this many tasks keeps its lists on the stack. */
#define SMALL_BATCH 8
_Static_assert(_Alignof(qf_task) <= 8, "a task must fit a member's 8-aligned extra bytes");

static void task_free(qf_task *t)
{
    qf_status_free(t->status);
    if (t->member)
        qf__coord_member_release(t->member); /* the task lives inside it */
    else
        qf__block_free(t, t->mem_class);
}

qf_task *qf_task_ref(qf_task *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void qf__task_unref(qf_task *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        task_free(t);
}

void qf_task_unref(qf_task *t)
{
    qf__task_unref(t);
}

static void on_task_wake(qf_waker *w)
{
    qf_task_wake(w->ctx);
}

qf_code qf_task_spawn(qf_runtime *rt, qf_task_fn fn, void *arg, const qf_task_options *o,
                      qf_task **ret_task)
{
    return qf__task_spawn_ext(rt, fn, arg, NULL, 0, o, ret_task);
}

/* A task's memory, its name copied in: inside a member record made for
 * `coord` (not registered yet) or on its own. NULL when out of memory.
 * One on its own comes from the block cache (qf_blockcache-impl.h): a task
 * is made on the spawning thread and ends on a worker, and malloc()'s
 * free of another thread's block cost its arena lock and list walks
 * (task.spawn 620-670 -> 420-460 ns per task, in builds of two code
 * layouts). */
static qf_task *task_alloc(qf_coord *coord, const char *name, size_t body)
{
    qf_task *t;
    if (coord) {
        qf_coord_member *member;
        void *extra;
        const char *mname;
        if (qf__coord_member_make(coord, name, body, &member, &extra, &mname) != QF_OK)
            return NULL;
        t = extra;
        t->name = mname;
        t->member = member;
        return t;
    }
    size_t len = strlen(name) + 1;
    uint8_t cls;
    t = qf__block_alloc(body + len, &cls);
    if (t) {
        memset(t, 0, body);
        t->mem_class = cls;
        t->name = memcpy((char *)t + body, name, len);
    }
    return t;
}

/* Free a task that was never registered anywhere. */
static void task_discard(qf_task *t)
{
    if (t->member)
        qf__coord_member_discard(t->member);
    else
        qf__block_free(t, t->mem_class);
}

static void task_setup(qf_task *t, qf_runtime *rt, qf_task_fn fn, void *arg, const void *arg_init,
                       size_t arg_size, const qf_task_options *o, bool handle)
{
    if (arg_init) {
        arg = (char *)t + TASK_ARG_OFF;
        memcpy(arg, arg_init, arg_size);
    }
    if (t->member && rt->nworkers == 0) /* named in a join's laggard message */
        qf__coord_member_mark_hosted(t->member);
    t->rt = rt;
    t->fn = fn;
    t->arg = arg;
    t->timer_idx = -1;
    t->timer_at = QF_FOREVER;
    atomic_init(&t->refs, handle ? 2 : 1);
    t->daemon = o && o->daemon;
    atomic_init(&t->state, o && o->suspended ? T_PARKED : T_SCHEDULED);
    qf_waker_init(&t->waker, on_task_wake, t);
}

/* Put ts[0..n) on the runtime's live list under one lock; false (nothing
 * linked) when the runtime no longer accepts tasks. */
static bool live_link(qf_runtime *rt, qf_task *const *ts, size_t n)
{
    qf__lock(&rt->live_lock);
    if (!atomic_load_explicit(&rt->accepting, memory_order_relaxed)) {
        qf__unlock(&rt->live_lock);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        qf_task *t = ts[i];
        t->live_next = rt->live_head;
        if (rt->live_head)
            rt->live_head->live_prev = t;
        rt->live_head = t;
    }
    atomic_fetch_add_explicit(&rt->live_n, (int64_t)n, memory_order_relaxed);
    qf__unlock(&rt->live_lock);
    return true;
}

/* The runtime refused registered tasks: their members end, they go. */
static void refuse(qf_task *const *ts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ts[i]->member)
            qf_coord_member_done(ts[i]->member);
        task_free(ts[i]);
    }
}

qf_code qf__task_spawn_ext(qf_runtime *rt, qf_task_fn fn, void *arg, const void *arg_init,
                           size_t arg_size, const qf_task_options *o, qf_task **ret_task)
{
    if (!rt || !fn)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", rt ? "task function" : "runtime");
    const char *name = o && o->name ? o->name : "task";
    qf_coord *coord = o ? o->coord : NULL;
    /* One allocation per task and one copy of its name: with a Coordinator
     * the member record holds the task (and the name both use); without,
     * the name follows the task. */
    qf_task *t = task_alloc(coord, name, arg_init ? TASK_ARG_OFF + arg_size : sizeof(qf_task));
    if (!t)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory spawning task '%s'", name);
    task_setup(t, rt, fn, arg, arg_init, arg_size, o, ret_task != NULL);
    if (coord)
        qf__coord_members_link(coord, &t->member, 1);
    if (!live_link(rt, &t, 1)) {
        refuse(&t, 1);
        return qf_set_error(QF_CANCELLED, "Runtime is shutting down: task '%s' not started", name);
    }
    if (ret_task)
        *ret_task = t;
    if (!(o && o->suspended))
        qf__schedule(t);
    return QF_OK;
}

qf_code qf__task_spawn_batch(qf_runtime *rt, qf_task_fn fn, const qf__task_batch *b,
                             const qf_task_options *o, qf_task **ret_tasks)
{
    if (!rt || !fn || !b)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s",
                            !rt   ? "runtime"
                            : !fn ? "task function"
                                  : "batch");
    size_t n = b->n;
    if (n == 0)
        return QF_OK;
    qf_coord *coord = o ? o->coord : NULL;
    /* Plan: every allocation first, so that a failure starts none. A
     * small batch (one runner's start) keeps its lists on the stack. */
    qf_task *ts_small[SMALL_BATCH];
    qf_coord_member *ms_small[SMALL_BATCH];
    bool small = n <= SMALL_BATCH;
    qf_task **ts = small ? ts_small : qf__scratch_alloc(n, sizeof(*ts));
    qf_coord_member **ms = !coord ? NULL : small ? ms_small : qf__scratch_alloc(n, sizeof(*ms));
    bool ok = ts && (!coord || ms);
    if (small)
        memset(ts, 0, n * sizeof(*ts));
    for (size_t i = 0; ok && i < n; i++) {
        ts[i] = task_alloc(coord, b->name(b->ctx, i), TASK_ARG_OFF + b->arg_size);
        ok = ts[i] != NULL;
    }
    if (!ok) {
        for (size_t i = 0; ts && i < n && ts[i]; i++)
            task_discard(ts[i]);
        if (!small) {
            qf__scratch_free(ts, n, sizeof(*ts));
            qf__scratch_free(ms, n, sizeof(*ms));
        }
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory spawning %zu tasks", n);
    }
    /* Build: set up, register, link, then one push of the whole chain. */
    for (size_t i = 0; i < n; i++) {
        b->init(b->ctx, i, (char *)ts[i] + TASK_ARG_OFF);
        task_setup(ts[i], rt, fn, (char *)ts[i] + TASK_ARG_OFF, NULL, 0, o, ret_tasks != NULL);
        if (coord)
            ms[i] = ts[i]->member;
    }
    if (coord)
        qf__coord_members_link(coord, ms, n);
    if (!small)
        qf__scratch_free(ms, n, sizeof(*ms));
    qf_code rc = QF_OK;
    if (!live_link(rt, ts, n)) {
        refuse(ts, n);
        rc = qf_set_error(QF_CANCELLED, "Runtime is shutting down: %zu tasks not started", n);
    } else {
        if (ret_tasks)
            memcpy(ret_tasks, ts, n * sizeof(*ts));
        if (!(o && o->suspended))
            qf__schedule_chain(rt, ts, n);
    }
    if (!small)
        qf__scratch_free(ts, n, sizeof(*ts));
    return rc;
}

void qf_task_wake(qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_wake: task is NULL");
        return;
    }
    /* The caller made the task's condition true before calling us.
     * SCHEDULED or NOTIFIED below means "a poll is coming, nothing to add",
     * which holds only if that poll sees the condition: the caller's store then
     * this load, the worker's RUNNING store then the poll's loads, a
     * Dekker pair (the other fence is in qf__task_run). A wait list's wake
     * had a locked RMW in between by chance; a put request's final state
     * (finish_request() in queues/engine/qf_fifo_wait.c) is a plain store
     * followed by this call, and a store buffer can let both loads miss:
     * a Coordinator stop's waker has a parked runner polled just as the
     * stop's cancel op (or a consumer's hand-off) finishes its request; we
     * read SCHEDULED, its poll reads WAITING, and it parks for good (issue
     * 26: the runner task that never ended). */
    qf__fence_full();
    uint32_t s = atomic_load_explicit(&t->state, memory_order_acquire);
    for (;;) {
        if (s == T_PARKED) {
            /* The one thread that wins this CAS queues the task. */
            if (atomic_compare_exchange_weak_explicit(&t->state, &s, T_SCHEDULED,
                                                      memory_order_acq_rel, memory_order_acquire)) {
                qf__schedule(t);
                return;
            }
        } else if (s == T_RUNNING) {
            if (atomic_compare_exchange_weak_explicit(&t->state, &s, T_NOTIFIED,
                                                      memory_order_acq_rel, memory_order_acquire))
                return;
        } else {
            return; /* SCHEDULED, NOTIFIED or DONE: nothing to add */
        }
    }
}

static void finish(qf_task *t, qf_code rc)
{
    qf_runtime *rt = t->rt;
    t->result = rc;
    if (rc != QF_OK) {
        /* The poll function may have returned a code without recording a
         * message (or after an unrelated one): keep the code truthful. */
        t->status = qf_last_code() == rc
                        ? qf_last_status()
                        : qf_status_new(rc, "Task '%s' failed: %s", t->name, qf_code_name(rc));
    }
    /* Safety net: a finished task must not stay on a wait list. */
    qf_waker_withdraw(&t->waker);
    qf__timer_disarm(t);
    qf_coord_member *member = t->member; /* stays set: task_free releases it */

    qf__lock(&rt->live_lock);
    if (t->live_prev)
        t->live_prev->live_next = t->live_next;
    else
        rt->live_head = t->live_next;
    if (t->live_next)
        t->live_next->live_prev = t->live_prev;
    qf__unlock(&rt->live_lock);
    /* Before DONE: whoever joins the task must no longer count it among
     * the runtime's tasks (the runtime outlives this call: its workers
     * are joined before it is freed). */
    atomic_fetch_sub_explicit(&rt->live_n, 1, memory_order_acq_rel);

    atomic_store_explicit(&t->state, T_DONE, memory_order_release);
    /* A joiner asleep on `done` marked it first (qf_task_join()): only then
     * a futex call, not at every task's end. */
    if (atomic_exchange_explicit(&t->done, TASK_DONE, memory_order_acq_rel) == TASK_JOINED)
        qf_futex_wake(&t->done, INT32_MAX);
    /* Only now: a Coordinator join that sees the member finished must also
     * see the task done. */
    if (member)
        qf_coord_member_done(member);
    qf_eventcount_notify(&rt->live_ec, true);
    qf__task_unref(t); /* the runtime's reference */
}

void qf__task_run(qf__worker *w, qf_task *t)
{
    QF_HB_ACQUIRE(t);
    atomic_store_explicit(&t->state, T_RUNNING, memory_order_relaxed);
    /* The poll's loads of its conditions come after this store for every
     * waker: either a wake's load (after its own full fence, qf_task_wake)
     * sees RUNNING or later and marks the task NOTIFIED, or the poll sees
     * what that wake's caller stored. Store then load on both sides: only
     * a full fence orders them. */
    qf__fence_full();
    /* Whether the poll could see the cancel: only then may the safety net
     * below end the task. A cancel that lands during the poll (after the
     * task function's own check) gets one more poll instead, so the task's
     * code sees it and cleans up (a runner task must leave() its runner). */
    bool cancel_seen = atomic_load_explicit(&t->cancelled, memory_order_acquire);
    qf__set_current_task(t);
    /* Put back what was there: the thread may be a custom scheduler's
     * (qf_thread_set_task_runner) driving a runtime of 0 workers. */
    bool was_in_task = qf__in_task();
    qf__set_in_task(true);
    qf_code rc = t->fn(t, t->arg);
    qf__set_in_task(was_in_task);
    qf__set_current_task(NULL);

    if (rc != QF_PENDING && rc != QF_YIELD && !qf_code_is_valid((int)rc)) {
        /* Not a code: the task ends with an error that says what it
         * returned, rather than with a value nobody can interpret. */
        qf_set_error(QF_INVALID_ARGUMENT,
                     "Task '%s' returned %d, which is neither a qf_code nor QF_PENDING or "
                     "QF_YIELD",
                     t->name, (int)rc);
        rc = QF_INVALID_ARGUMENT;
    }
    if ((rc == QF_PENDING || rc == QF_YIELD) && cancel_seen) {
        /* Shutdown asked it to stop and it did not: end it here rather
         * than let it park forever. */
        qf_waker_withdraw(&t->waker);
        qf_set_error(QF_CANCELLED, "Task '%s' was cancelled: the runtime is shutting down",
                     t->name);
        rc = QF_CANCELLED;
    }
    if (rc == QF_PENDING) {
        uint32_t s = T_RUNNING;
        /* Cancelled during the poll: poll once more (see above). Seq_cst,
         * pairing with qf_runtime_shutdown()'s fence: a cancel this misses
         * comes with a wake that finds the task RUNNING (or PARKED). */
        if (!atomic_load_explicit(&t->cancelled, memory_order_seq_cst) &&
            atomic_compare_exchange_strong_explicit(&t->state, &s, T_PARKED, memory_order_acq_rel,
                                                    memory_order_acquire))
            return;
        /* woken while it ran (NOTIFIED), or cancelled: poll again */
        atomic_store_explicit(&t->state, T_SCHEDULED, memory_order_relaxed);
        qf__push_again(w, t);
        return;
    }
    if (rc == QF_YIELD) {
        atomic_store_explicit(&t->state, T_SCHEDULED, memory_order_relaxed);
        qf__push_yielded(w, t);
        return;
    }
    finish(t, rc);
}

qf_waker *qf_task_waker(qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_waker: task is NULL");
        return NULL;
    }
    return &t->waker;
}

void qf_task_waker_init(qf_task *t, qf_waker *w)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_waker_init: task is NULL");
        return;
    }
    qf_waker_init(w, on_task_wake, t);
}

bool qf_task_is_daemon(const qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_is_daemon: task is NULL");
        return false;
    }
    return t->daemon;
}

bool qf_task_is_cancelled(const qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_is_cancelled: task is NULL");
        return false;
    }
    return atomic_load_explicit(&((qf_task *)t)->cancelled, memory_order_acquire);
}

const char *qf_task_name(const qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_name: task is NULL");
        return NULL;
    }
    return t->name;
}

void *qf_task_arg(const qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_arg: task is NULL");
        return NULL;
    }
    return t->arg;
}

bool qf_task_is_done(const qf_task *t)
{
    if (!t) {
        qf_set_error(QF_INVALID_ARGUMENT, "qf_task_is_done: task is NULL");
        return false;
    }
    return atomic_load_explicit(&((qf_task *)t)->done, memory_order_acquire) == TASK_DONE;
}

qf_code qf_task_join(qf_task *t, qf_deadline deadline, qf_status **ret_status)
{
    if (!t)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL task");
    uint32_t d;
    while ((d = atomic_load_explicit(&t->done, memory_order_acquire)) != TASK_DONE) {
        if (qf__in_task())
            return qf__blocking_in_task_error_instead(
                "qf_task_join", "check qf_task_is_done() (non-blocking) from the task, and join "
                                "from a thread that runs no tasks once it is true");
        if (qf_deadline_passed(deadline))
            return qf_set_error(QF_DEADLINE_EXCEEDED, "Task '%s' is still running", t->name);
        /* Mark the word before sleeping on it, so the task's end wakes us
         * (a failed mark means it ended, or another joiner marked it). A
         * join that will not sleep (its deadline passed) does not mark:
         * the end would make the futex call for nobody. */
        if (d == TASK_RUNNING &&
            !atomic_compare_exchange_strong_explicit(&t->done, &d, TASK_JOINED,
                                                     memory_order_acquire, memory_order_acquire))
            continue;
        if (qf_futex_wait_until(&t->done, TASK_JOINED, deadline) == QF_DEADLINE_EXCEEDED &&
            atomic_load_explicit(&t->done, memory_order_acquire) != TASK_DONE)
            return qf_set_error(QF_DEADLINE_EXCEEDED, "Task '%s' is still running", t->name);
    }
    if (ret_status)
        *ret_status = t->status ? qf_status_copy(t->status) : NULL;
    if (t->result != QF_OK && t->status)
        qf_set_error(t->result, "%s", qf_status_message(t->status));
    return t->result;
}
