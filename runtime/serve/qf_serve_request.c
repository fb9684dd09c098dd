/* qf_serve_request.c - a request's answer: delivered exactly once, to a
 * callback or to whoever waits on the request.
 *
 * Implementation notes.
 *
 * The request is the caller's memory, and the caller may free it the
 * moment it sees the answer. So the answering thread must be finished with
 * the request before any waiter can see the answer as final:
 *
 *   answerer                               waiter
 *   --------                               ------
 *   store status                           register waker on qf__waiters
 *   CAS (no WAITERS) -> ANSWERED|DONE      fetch_or WAITERS
 *     (no waiter: one RMW, never touches     old has ANSWERED: withdraw, wait
 *      the request again)                    for DONE, read status
 *   else (WAITERS set):                    else sleep; woken: wait for DONE
 *     fetch_or ANSWERED
 *     wake every waiter on qf__waiters
 *     store ANSWERED|DONE (release): last touch
 *
 * A waiter that sees ANSWERED without DONE waits (spins, then yields) for
 * the answerer's last store: the window is a wake-list walk, never a sleep.
 * A callback request is marked ANSWERED|DONE before its callback runs, so
 * the callback may free or resubmit it.
 */
#include <sched.h>
#include <stddef.h>

#include "qf_lock-impl.h"
#include "qf_serve-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"

void qf_serve_request_init(qf_serve_request *req, void *user, qf_deadline deadline,
                           uint32_t priority, qf_serve_done_fn done, void *done_arg)
{
    if (!req) {
        qf__set_error_static(QF_INVALID_ARGUMENT, "qf_serve_request_init: request (req) is NULL");
        return;
    }
    req->user = user;
    req->deadline = deadline;
    req->priority = priority;
    req->done = done;
    req->done_arg = done_arg;
    req->qf__admit_ns = 0;
    req->qf__next = NULL;
    atomic_init(&req->qf__state, 0);
    atomic_init(&req->qf__status, QF_OK);
    qf_waitlist_init(&req->qf__waiters);
}

void qf__serve_answer(qf_serve_request *r, qf_code status)
{
    atomic_store_explicit(&r->qf__status, (int32_t)status, memory_order_relaxed);
    if (r->done) {
        qf_serve_done_fn fn = r->done;
        void *arg = r->done_arg;
        atomic_store_explicit(&r->qf__state, QF__REQ_ANSWERED | QF__REQ_DONE, memory_order_release);
        fn(r, status, arg);
        return;
    }
    /* The state may carry HANDED or COMPLETING besides QUEUED; only
     * WAITERS changes the path. */
    uint32_t st = atomic_load_explicit(&r->qf__state, memory_order_relaxed);
    while (!(st & QF__REQ_WAITERS))
        if (atomic_compare_exchange_weak_explicit(&r->qf__state, &st,
                                                  QF__REQ_ANSWERED | QF__REQ_DONE,
                                                  memory_order_acq_rel, memory_order_acquire))
            return; /* nobody waits: the request is not touched again */
    /* A waiter announced itself: mark the answer, wake, then let go. */
    atomic_fetch_or_explicit(&r->qf__state, QF__REQ_ANSWERED, memory_order_seq_cst);
    qf_waitlist_wake(&r->qf__waiters, INT32_MAX);
    atomic_store_explicit(&r->qf__state, QF__REQ_ANSWERED | QF__REQ_DONE, memory_order_release);
}

void qf__serve_answer_list(qf_serve_request *head, qf_code status)
{
    while (head) {
        qf_serve_request *next = head->qf__next; /* before the answer frees it */
        head->qf__next = NULL;
        qf__serve_answer(head, status);
        head = next;
    }
}

/* The wake `w` got from this request's answer needs no passing on (an
 * answer wakes every waiter), and must not be: the request may be freed
 * once its answer is read, and withdrawing `w` later (the runtime does
 * when a task ends) would otherwise wake that freed list. A wake from
 * another list is left alone. Owner of `w` only. */
static void forget_wake(qf_serve_request *r, qf_waker *w)
{
    uint32_t st;
    for (unsigned i = 0; (st = qf_waker_state(w)) == QF_WAKER_CLAIMED; i++) {
        if (i < 256)
            qf__cpu_relax(); /* a wake function running: short */
        else
            sched_yield();
    }
    if (st == QF_WAKER_DONE &&
        __atomic_load_n(&w->qf__woken_from, __ATOMIC_RELAXED) == &r->qf__waiters)
        qf_waker_consumed(w);
}

/* ANSWERED seen: wait for the answerer's last touch (DONE). */
static void wait_done(qf_serve_request *r)
{
    for (unsigned i = 0;
         !(atomic_load_explicit(&r->qf__state, memory_order_acquire) & QF__REQ_DONE); i++) {
        if (i < 256)
            qf__cpu_relax();
        else
            sched_yield();
    }
}

static qf_code check_waitable(const qf_serve_request *r, const void *out)
{
    if (!r || !out)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL %s", r ? "ret_status" : "request");
    if (r->done)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "request has a completion callback: its answer goes there");
    return QF_OK;
}

/* QF_OK with the status when answered; QF_PENDING when still queued;
 * QF_INVALID_ARGUMENT when never submitted. */
static qf_code peek(qf_serve_request *r, qf_code *ret_status)
{
    uint32_t st = atomic_load_explicit(&r->qf__state, memory_order_acquire);
    if (st & QF__REQ_ANSWERED) {
        if (!(st & QF__REQ_DONE))
            wait_done(r);
        *ret_status = (qf_code)atomic_load_explicit(&r->qf__status, memory_order_relaxed);
        return QF_OK;
    }
    if (!(st & QF__REQ_QUEUED))
        return qf_set_error(QF_INVALID_ARGUMENT, "request was never submitted");
    return QF_PENDING;
}

/* Register `w`, announce it; false when the answer came first (then `w`
 * has been withdrawn and the answer is final). */
static bool announce(qf_serve_request *r, qf_waker *w)
{
    qf_waitlist_register(&r->qf__waiters, w);
    uint32_t old = atomic_fetch_or_explicit(&r->qf__state, QF__REQ_WAITERS, memory_order_seq_cst);
    if (old & QF__REQ_ANSWERED) {
        qf_waitlist_cancel(&r->qf__waiters, w);
        return false;
    }
    return true;
}

qf_code qf_serve_request_wait_until(qf_serve_request *req, qf_deadline deadline,
                                    qf_code *ret_status)
{
    qf_code rc = check_waitable(req, ret_status);
    if (rc != QF_OK)
        return rc;
    for (;;) {
        rc = peek(req, ret_status);
        if (rc != QF_PENDING)
            return rc;
        if (deadline != QF_FOREVER && qf_deadline_passed(deadline))
            return qf_set_error(QF_DEADLINE_EXCEEDED, "request not answered by the deadline");
        if (qf__in_task())
            return qf__blocking_in_task_error("qf_serve_request_wait");
        qf_waker w;
        qf_waker_init_thread(&w);
        if (!announce(req, &w))
            continue;
        if (qf_waker_wait_until(&w, deadline) == QF_DEADLINE_EXCEEDED)
            qf_waitlist_cancel(&req->qf__waiters, &w);
    }
}

qf_code qf_serve_request_wait(qf_serve_request *req, qf_code *ret_status)
{
    return qf_serve_request_wait_until(req, QF_FOREVER, ret_status);
}

qf_code qf_serve_request_try_wait(qf_serve_request *req, qf_code *ret_status)
{
    qf_code rc = check_waitable(req, ret_status);
    if (rc != QF_OK)
        return rc;
    rc = peek(req, ret_status);
    if (rc == QF_PENDING)
        return qf__set_error_static(QF_UNAVAILABLE, "request not answered yet");
    return rc;
}

qf_code qf_serve_request_poll(qf_serve_request *req, qf_waker *w, qf_code *ret_status)
{
    qf_code rc = check_waitable(req, ret_status);
    if (rc != QF_OK)
        return rc;
    if (!w)
        return qf_set_error(QF_INVALID_ARGUMENT, "NULL waker");
    for (;;) {
        rc = peek(req, ret_status);
        if (rc != QF_PENDING) {
            if (qf_waker_state(w) == QF_WAKER_REGISTERED)
                qf_waker_withdraw(w);
            else
                forget_wake(req, w);
            return rc;
        }
        if (announce(req, w))
            return QF_PENDING;
    }
}

bool qf_serve_request_cancel_poll(qf_serve_request *req, qf_waker *w)
{
    if (!req || !w) {
        qf__set_error_static(QF_INVALID_ARGUMENT,
                             req ? "qf_serve_request_cancel_poll: waker (w) is NULL"
                                 : "qf_serve_request_cancel_poll: request (req) is NULL");
        return false;
    }
    /* qf_waitlist_cancel() of a waker that is not on the list waits for a
     * wake that never comes (IDLE: the poll found its answer at once, or
     * the waker was withdrawn) or unlinks it from the wrong list (it is on
     * another one now). Only the owner registers `w`, and a wake only takes
     * it off a list, so a list seen here is either this request's (cancel
     * settles any race with the answer) or not ours to touch. */
    qf_waitlist *wl = __atomic_load_n(&w->qf__list, __ATOMIC_RELAXED);
    if (wl == &req->qf__waiters) {
        if (qf_waitlist_cancel(wl, w))
            return true;
        forget_wake(req, w);
        return false;
    }
    if (wl)
        return false;
    /* Off every list but still REGISTERED or CLAIMED: a wake is under way
     * (a list walk, a wake function): wait it out, never sleeping. */
    for (unsigned i = 0;; i++) {
        uint32_t st = qf_waker_state(w);
        if (st != QF_WAKER_REGISTERED && st != QF_WAKER_CLAIMED)
            break;
        if (i < 256)
            qf__cpu_relax();
        else
            sched_yield();
    }
    forget_wake(req, w);
    return false;
}
