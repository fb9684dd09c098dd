/* qf_waker.c - wait lists of wakers, and event counts.
 *
 * Implementation notes.
 *
 * A waker moves IDLE -> REGISTERED (register) and then either back to IDLE
 * (cancel, under the list lock) or REGISTERED -> CLAIMED (wake, under the
 * list lock) -> DONE (after its wake function ran, outside the lock). The
 * lock decides the race between cancel and wake: exactly one of them
 * unlinks the waker. The CLAIMED state exists so that the waking thread may
 * still touch the waker (call its function, store DONE) after dropping the
 * lock: the owner does not reuse or free the waker until it reads DONE.
 * Cancel on a list the waker is not on (IDLE, DONE, or on another list)
 * decides nothing and returns at once; only a CLAIMED waker, whose DONE is
 * one wake function away, is waited for.
 *
 * A wake function may leave its last step (a futex wake of a worker) to
 * run after the DONE store: a wake opens a deferral around the call and
 * the store, a near one (qf__waitlist_wake_near(): a queue's consumers,
 * woken for elements) marked as such (qf_wake_defer-impl.h says why and
 * how).
 *
 * For thread wakers the state word itself is the futex the thread sleeps
 * on. The futex wake after the DONE store may reach an address the owner
 * has already left (it saw DONE and returned); a futex wake on such an
 * address can at worst wake some other waiter spuriously, and every wait in
 * qflow re-checks its condition, so that is harmless.
 */
#include "qf_waker.h"

#include <sched.h>
#include <time.h>

#include "qf_eventcount-impl.h"
#include "qf_waitlist-impl.h"
#include "qf_wake_defer-impl.h"
#include "qf_futex.h"
#include "qf_futex-impl.h"
#include "qf_lock-impl.h"
#include "qf_status.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"

/* The bad-input answer for a NULL waker, list or event count: recorded
 * with a static message (no formatting on these paths). */
static int refuse(const char *msg)
{
    return qf__set_error_static(QF_INVALID_ARGUMENT, msg);
}

/* The deferral of this thread (qf_wake_defer-impl.h). */
static _Thread_local struct {
    unsigned depth;
    uint64_t near; /* bit d: the deferral at depth d + 1 is a near wake's */
    qf__deferred_fn fn;
    void *arg;
} tls_defer;

void qf__wake_defer_begin(bool near)
{
    unsigned d = tls_defer.depth++;
    if (d < 64)
        tls_defer.near = (tls_defer.near & ~(UINT64_C(1) << d)) | ((uint64_t)near << d);
}

bool qf__wake_defer_near(void)
{
    unsigned d = tls_defer.depth;
    return d != 0 && d <= 64 && (tls_defer.near >> (d - 1) & 1);
}

void qf__wake_defer_end(void)
{
    if (--tls_defer.depth != 0 || !tls_defer.fn)
        return;
    qf__deferred_fn fn = tls_defer.fn;
    void *arg = tls_defer.arg;
    tls_defer.fn = NULL;
#ifdef QF_RACE_WIDENING
    /* Room for the woken task to end and its owner to free what it likes
     * (a yield is not enough when nothing else waits for this core); one
     * deferral in 8, so suites full of wakes do not crawl. */
    static _Thread_local unsigned widen;
    if (++widen % 8 == 0)
        nanosleep(&(struct timespec){0, 50000}, NULL);
#endif
    fn(arg);
}

static _Thread_local unsigned tls_batch_depth;
static void (*_Atomic batch_end_fn)(void);

void qf__wake_batch_begin(void)
{
    tls_batch_depth++;
}

void qf__wake_batch_end(void)
{
    if (--tls_batch_depth != 0)
        return;
    void (*fn)(void) = atomic_load_explicit(&batch_end_fn, memory_order_acquire);
    if (fn)
        fn();
}

bool qf__wake_batching(void)
{
    return tls_batch_depth != 0;
}

void qf__wake_batch_set_end(void (*fn)(void))
{
    atomic_store_explicit(&batch_end_fn, fn, memory_order_release);
}

bool qf__wake_deferring(void)
{
    return tls_defer.depth != 0;
}

bool qf__wake_deferred(qf__deferred_fn fn, void *arg)
{
    return tls_defer.fn == fn && tls_defer.arg == arg;
}

bool qf__wake_defer(qf__deferred_fn fn, void *arg)
{
    if (tls_defer.depth == 0)
        return false;
    qf__deferred_fn old = tls_defer.fn;
    void *old_arg = tls_defer.arg;
    tls_defer.fn = fn;
    tls_defer.arg = arg;
    if (old)
        old(old_arg);
    return true;
}

void qf_waker_init(qf_waker *w, qf_wake_fn fn, void *ctx)
{
    if (!w) {
        refuse("qf_waker_init: waker (w) is NULL");
        return;
    }
    w->wake = fn;
    w->ctx = ctx;
    w->qf__next = w->qf__prev = NULL;
    __atomic_store_n(&w->qf__list, NULL, __ATOMIC_RELAXED);
    w->qf__woken_from = NULL;
    atomic_store_explicit(&w->qf__state, QF_WAKER_IDLE, memory_order_relaxed);
}

void qf_waker_init_thread(qf_waker *w)
{
    qf_waker_init(w, NULL, NULL);
}

uint32_t qf_waker_state(const qf_waker *w)
{
    if (!w) {
        refuse("qf_waker_state: waker (w) is NULL");
        return QF_WAKER_IDLE;
    }
    return atomic_load_explicit(&((qf_waker *)w)->qf__state, memory_order_acquire);
}

/* Wait until a waking thread has finished with `w` (CLAIMED -> DONE). */
static void wait_until_done(qf_waker *w)
{
    for (unsigned i = 0; atomic_load_explicit(&w->qf__state, memory_order_acquire) != QF_WAKER_DONE;
         i++)
        qf__spin_then_yield(i);
}

qf_code qf_waker_wait_until(qf_waker *w, qf_deadline deadline)
{
    if (!w)
        return refuse("qf_waker_wait_until: waker (w) is NULL");
    for (;;) {
        uint32_t s = atomic_load_explicit(&w->qf__state, memory_order_acquire);
        if (s == QF_WAKER_DONE)
            return QF_OK;
        if (s == QF_WAKER_CLAIMED) {
            wait_until_done(w);
            return QF_OK;
        }
        if (qf_futex_wait_until(&w->qf__state, s, deadline) == QF_DEADLINE_EXCEEDED) {
            s = atomic_load_explicit(&w->qf__state, memory_order_acquire);
            if (s == QF_WAKER_REGISTERED)
                return QF_DEADLINE_EXCEEDED;
        }
    }
}

int qf_waker_wait(qf_waker *w, qf_deadline deadline)
{
    return qf_waker_wait_until(w, deadline);
}

void qf_waitlist_init(qf_waitlist *wl)
{
    if (!wl) {
        refuse("qf_waitlist_init: wait list (wl) is NULL");
        return;
    }
    atomic_store_explicit(&wl->qf__lock, 0, memory_order_relaxed);
    atomic_store_explicit(&wl->qf__count, 0, memory_order_relaxed);
    wl->qf__head = wl->qf__tail = NULL;
}

void qf_waitlist_destroy(qf_waitlist *wl)
{
    (void)wl; /* nothing allocated; present so init/destroy pair up */
}

uint32_t qf__waitlist_count_sc(qf_waitlist *wl)
{
    return atomic_load_explicit(&wl->qf__count, memory_order_seq_cst);
}

uint32_t qf_waitlist_count(const qf_waitlist *wl)
{
    if (!wl) {
        refuse("qf_waitlist_count: wait list (wl) is NULL");
        return 0;
    }
    return atomic_load_explicit(&((qf_waitlist *)wl)->qf__count, memory_order_relaxed);
}

/* The count changes only under the list's lock: a load and a store, not
 * a locked RMW. Readers outside the lock load it relaxed, as a hint after
 * their own ordering, or seq_cst (qf__waitlist_count_sc()). */
static void count_add(qf_waitlist *wl, int32_t d)
{
    QF__ASSERT_HELD(&wl->qf__lock);
    uint32_t n = atomic_load_explicit(&wl->qf__count, memory_order_relaxed);
    atomic_store_explicit(&wl->qf__count, n + (uint32_t)d, memory_order_relaxed);
}

/* `fence`: close with the full fence (see qf_waitlist-impl.h for when a
 * caller may leave it out). */
static void register_waker(qf_waitlist *wl, qf_waker *w, bool fence)
{
    if (!wl || !w) {
        refuse(!wl ? "qf_waitlist_register: wait list (wl) is NULL"
                   : "qf_waitlist_register: waker (w) is NULL");
        return;
    }
    /* A task may be made runnable by its wake function and try to
     * re-register before the waking thread stored DONE. */
    uint32_t s = atomic_load_explicit(&w->qf__state, memory_order_acquire);
    if (s == QF_WAKER_CLAIMED)
        wait_until_done(w);
    if (s == QF_WAKER_REGISTERED) {
        /* A task woken by something else (a timer, a cancellation) polls
         * again with its waker still registered. On this list already:
         * keep that registration (linking it twice would corrupt the
         * list). On another list: move it here. If a wake claims it
         * meanwhile, the task is simply polled once more. */
        if (__atomic_load_n(&w->qf__list, __ATOMIC_RELAXED) == wl) {
            if (fence)
                atomic_thread_fence(memory_order_seq_cst);
            return;
        }
        qf_waker_withdraw(w);
    }
    __atomic_store_n(&w->qf__woken_from, NULL,
                     __ATOMIC_RELAXED); /* re-registering uses the earlier wake */
    qf__lock(&wl->qf__lock);
    atomic_store_explicit(&w->qf__state, QF_WAKER_REGISTERED, memory_order_relaxed);
    __atomic_store_n(&w->qf__list, wl, __ATOMIC_RELAXED);
    w->qf__next = NULL;
    w->qf__prev = wl->qf__tail;
    if (wl->qf__tail)
        wl->qf__tail->qf__next = w;
    else
        wl->qf__head = w;
    wl->qf__tail = w;
    count_add(wl, 1);
    qf__unlock(&wl->qf__lock);
    /* Pairs with the notifier's seq_cst operation between its state change
     * and its look at the list: our re-check of the condition must not be
     * satisfied from before the registration became visible. */
    if (fence)
        atomic_thread_fence(memory_order_seq_cst);
}

void qf_waitlist_register(qf_waitlist *wl, qf_waker *w)
{
    register_waker(wl, w, true);
}

void qf__waitlist_register_unfenced(qf_waitlist *wl, qf_waker *w)
{
    register_waker(wl, w, false);
}

static void unlink_locked(qf_waitlist *wl, qf_waker *w)
{
    QF__ASSERT_HELD(&wl->qf__lock);
    if (w->qf__prev)
        w->qf__prev->qf__next = w->qf__next;
    else
        wl->qf__head = w->qf__next;
    if (w->qf__next)
        w->qf__next->qf__prev = w->qf__prev;
    else
        wl->qf__tail = w->qf__prev;
    w->qf__next = w->qf__prev = NULL;
    __atomic_store_n(&w->qf__list, NULL, __ATOMIC_RELAXED);
    count_add(wl, -1);
}

bool qf_waitlist_cancel(qf_waitlist *wl, qf_waker *w)
{
    if (!wl || !w) {
        refuse(!wl ? "qf_waitlist_cancel: wait list (wl) is NULL"
                   : "qf_waitlist_cancel: waker (w) is NULL");
        return false;
    }
    qf__lock(&wl->qf__lock);
    /* Under this list's lock a wake of this list is either finished with
     * its unlink-and-claim or not begun: REGISTERED with qf__list == wl is
     * ours to unlink. */
    uint32_t st = atomic_load_explicit(&w->qf__state, memory_order_acquire);
    qf_waitlist *on = __atomic_load_n(&w->qf__list, __ATOMIC_RELAXED);
    if (st == QF_WAKER_REGISTERED && on == wl) {
        unlink_locked(wl, w);
        atomic_store_explicit(&w->qf__state, QF_WAKER_IDLE, memory_order_relaxed);
        qf__unlock(&wl->qf__lock);
        return true;
    }
    qf__unlock(&wl->qf__lock);
    switch (st) {
    case QF_WAKER_REGISTERED:
        /* On another list (or being unlinked by that list's wake, qf__list
         * already NULL): unlinking it here would corrupt both lists, and
         * that list's wake, not this one, decides when it is done. */
        qf__set_error_static(QF_INVALID_ARGUMENT,
                             "qf_waitlist_cancel: the waker is registered on another wait list");
        return false;
    case QF_WAKER_CLAIMED:
        /* A wake (of any list) is calling its function: that ends in
         * DONE within a wake function call. */
        wait_until_done(w);
        return false;
    default:
        /* DONE: woken earlier (the acquire load above saw the waking
         * thread's last store). IDLE: never registered, cancelled already,
         * or a poll that finished at once; nothing will ever make it DONE,
         * so waiting for DONE here would spin forever. */
        return false;
    }
}

static int wake_list(qf_waitlist *wl, int n, bool near);

int qf_waitlist_wake(qf_waitlist *wl, int n)
{
    if (!wl) {
        refuse("qf_waitlist_wake: wait list (wl) is NULL");
        return 0;
    }
    return wake_list(wl, n, false);
}

int qf__waitlist_wake_near(qf_waitlist *wl, int n)
{
    return wake_list(wl, n, true);
}

/* Wake up to n wakers of wl; `near`: inside a deferral (see the notes). */
static int wake_list(qf_waitlist *wl, int n, bool near)
{
    if (n <= 0)
        return 0;
    qf_waker *batch = NULL, *last = NULL;
    int k = 0;
    qf__lock(&wl->qf__lock);
    while (k < n && wl->qf__head) {
        qf_waker *w = wl->qf__head;
        unlink_locked(wl, w);
#ifdef QF_RACE_WIDENING
        /* Widen the window in which the owner sees no list but no claim
         * yet (qf_waker_withdraw() must wait it out). */
        sched_yield();
#endif
        __atomic_store_n(&w->qf__woken_from, wl, __ATOMIC_RELAXED);
        atomic_store_explicit(&w->qf__state, QF_WAKER_CLAIMED, memory_order_relaxed);
        /* Reuse qf__next for a private singly linked batch. */
        if (last)
            last->qf__next = w;
        else
            batch = w;
        last = w;
        k++;
    }
    qf__unlock(&wl->qf__lock);
    while (batch) {
        qf_waker *w = batch;
        /* Read the link before DONE: after DONE the owner may reuse w. */
        batch = w->qf__next;
        w->qf__next = NULL;
        if (w->wake) {
            /* The wake function's futex call may run after DONE, so that
             * whoever waits for the waker's DONE (a worker it gets up, its
             * task's own poll) does not wait for the call; `near` also
             * chooses the worker (qf_wake_defer-impl.h). */
            qf__wake_defer_begin(near);
            w->wake(w);
            atomic_store_explicit(&w->qf__state, QF_WAKER_DONE, memory_order_release);
            qf__wake_defer_end();
        } else {
            atomic_store_explicit(&w->qf__state, QF_WAKER_DONE, memory_order_release);
            qf_futex_wake(&w->qf__state, 1);
        }
    }
    return k;
}

void qf_eventcount_init(qf_eventcount *ec)
{
    if (!ec) {
        refuse("qf_eventcount_init: event count (ec) is NULL");
        return;
    }
    atomic_store_explicit(&ec->qf__seq, 0, memory_order_relaxed);
    atomic_store_explicit(&ec->qf__sleepers, 0, memory_order_relaxed);
}

uint32_t qf_eventcount_prepare(qf_eventcount *ec)
{
    if (!ec) {
        refuse("qf_eventcount_prepare: event count (ec) is NULL");
        return 0;
    }
    atomic_fetch_add_explicit(&ec->qf__sleepers, 1, memory_order_seq_cst);
    /* The seq_cst RMW above orders the announcement before this read and
     * before the caller's re-check; pairs with the fence in notify. */
    return atomic_load_explicit(&ec->qf__seq, memory_order_seq_cst);
}

void qf_eventcount_cancel(qf_eventcount *ec)
{
    if (!ec) {
        refuse("qf_eventcount_cancel: event count (ec) is NULL");
        return;
    }
    atomic_fetch_sub_explicit(&ec->qf__sleepers, 1, memory_order_relaxed);
}

qf_code qf_eventcount_wait_until(qf_eventcount *ec, uint32_t ticket, qf_deadline deadline)
{
    if (!ec)
        return refuse("qf_eventcount_wait_until: event count (ec) is NULL");
    return qf__eventcount_wait_tagged(ec, ticket, QF__EC_ANY, deadline);
}

qf_code qf__eventcount_wait_tagged(qf_eventcount *ec, uint32_t ticket, uint32_t bits,
                                   qf_deadline deadline)
{
    qf_code r = QF_OK;
    if (atomic_load_explicit(&ec->qf__seq, memory_order_acquire) == ticket)
        r = qf__futex_wait_bits(&ec->qf__seq, ticket, bits, deadline);
    atomic_fetch_sub_explicit(&ec->qf__sleepers, 1, memory_order_relaxed);
    return r == QF_DEADLINE_EXCEEDED ? QF_DEADLINE_EXCEEDED : QF_OK;
}

int qf_eventcount_wait(qf_eventcount *ec, uint32_t ticket, qf_deadline deadline)
{
    return qf_eventcount_wait_until(ec, ticket, deadline);
}

void qf_eventcount_notify(qf_eventcount *ec, bool all)
{
    if (!ec)
        return; /* async-signal-safe: nothing recorded */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&ec->qf__sleepers, memory_order_relaxed) == 0)
        return;
    atomic_fetch_add_explicit(&ec->qf__seq, 1, memory_order_release);
    qf_futex_wake(&ec->qf__seq, all ? INT32_MAX : 1);
}

void qf__eventcount_notify_prefer(qf_eventcount *ec, uint32_t prefer)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&ec->qf__sleepers, memory_order_relaxed) == 0)
        return;
    /* The count first, as in the plain notify: a waiter not yet in its
     * futex wait sees it and returns, whichever sleeper the wake reaches. */
    atomic_fetch_add_explicit(&ec->qf__seq, 1, memory_order_release);
    if (prefer != 0 && prefer != QF__EC_ANY && qf__futex_wake_bits(&ec->qf__seq, 1, prefer) > 0)
        return;
    qf_futex_wake(&ec->qf__seq, 1);
}

bool qf_waker_withdraw(qf_waker *w)
{
    if (!w) {
        refuse("qf_waker_withdraw: waker (w) is NULL");
        return false;
    }
    for (;;) {
        qf_waitlist *wl = __atomic_load_n(&w->qf__list, __ATOMIC_RELAXED);
        if (!wl) {
            uint32_t st = atomic_load_explicit(&w->qf__state, memory_order_acquire);
            /* Only a wake unlinks a registered waker behind its owner's
             * back, and it clears the list before it marks the waker
             * CLAIMED (one critical section). No list but still REGISTERED
             * is that wake under way: wait for its mark, else the wake
             * would be neither this waker's nor passed on. */
            for (unsigned i = 0; st == QF_WAKER_REGISTERED; i++) {
                qf__spin_then_yield(i);
                st = atomic_load_explicit(&w->qf__state, memory_order_acquire);
            }
            if (st == QF_WAKER_CLAIMED) {
                wait_until_done(w);
                st = QF_WAKER_DONE;
            }
            qf_waitlist *from = __atomic_load_n(&w->qf__woken_from, __ATOMIC_RELAXED);
            if (st == QF_WAKER_DONE && from) {
                /* Woken and abandoned: hand the wake to the next waiter. */
                __atomic_store_n(&w->qf__woken_from, NULL, __ATOMIC_RELAXED);
                qf_waitlist_wake(from, 1);
            }
            return false;
        }
        /* The list can change only by a wake (to NULL) while we look, and
         * cancel re-checks everything under that list's lock. */
        qf__lock(&wl->qf__lock);
        bool still = __atomic_load_n(&w->qf__list, __ATOMIC_RELAXED) == wl;
        qf__unlock(&wl->qf__lock);
        /* A wake may claim it between that look and cancel's: then cancel
         * fails, and the loop goes round to pass that wake on (returning
         * here would drop it). */
        if (still && qf_waitlist_cancel(wl, w))
            return true;
    }
}

void qf_waker_consumed(qf_waker *w)
{
    if (!w) {
        refuse("qf_waker_consumed: waker (w) is NULL");
        return;
    }
    /* A wake may be under way (claimed by a list, its function not yet
     * run): let it finish, so the two do not write the field at once. The
     * wait also keeps a guarantee callers rely on: after a poll form that
     * used a wake returns, the waker is no longer CLAIMED (the FIFO's put
     * requests hold a task alive only through a waker that is IDLE or
     * DONE, finish_request() in queues/engine/qf_fifo_wait.c). */
    if (atomic_load_explicit(&w->qf__state, memory_order_acquire) == QF_WAKER_CLAIMED)
        wait_until_done(w);
    __atomic_store_n(&w->qf__woken_from, NULL, __ATOMIC_RELAXED);
}

static _Thread_local bool in_task;

void qf__set_in_task(bool v)
{
    in_task = v;
}

bool qf__in_task(void)
{
    return in_task;
}

/* Relaxed: a scheduler installs its check before it runs any task, and
 * the thread that runs one learned of the task through that scheduler. */
static _Atomic(qf__task_spin_check_fn) task_spin_check;

void qf__set_task_spin_check(qf__task_spin_check_fn check)
{
    atomic_store_explicit(&task_spin_check, check, memory_order_relaxed);
}

bool qf__task_may_spin(void)
{
    if (!in_task)
        return false;
    qf__task_spin_check_fn check = atomic_load_explicit(&task_spin_check, memory_order_relaxed);
    return check && check();
}

/* Relaxed, as task_spin_check. */
static _Atomic(qf__task_cancel_check_fn) task_cancel_check;

void qf__set_task_cancel_check(qf__task_cancel_check_fn check)
{
    atomic_store_explicit(&task_cancel_check, check, memory_order_relaxed);
}

bool qf__task_cancelled(void)
{
    if (!in_task)
        return false;
    qf__task_cancel_check_fn check = atomic_load_explicit(&task_cancel_check, memory_order_relaxed);
    return check && check();
}

bool qf_thread_set_task_runner(bool runs_tasks)
{
    bool was = in_task;
    in_task = runs_tasks;
    return was;
}

bool qf_thread_is_task_runner(void)
{
    return in_task;
}

int qf__blocking_in_task_error(const char *what)
{
    return qf_set_error(QF_FAILED_PRECONDITION,
                        "%s would block a worker thread: it was called from inside a task; "
                        "use the poll form (the task parks instead of the worker)",
                        what);
}

int qf__blocking_in_task_error_instead(const char *what, const char *instead)
{
    return qf_set_error(QF_FAILED_PRECONDITION,
                        "%s would block a worker thread: it was called from inside a task "
                        "(or on a thread marked by qf_thread_set_task_runner); it has no poll "
                        "form: %s",
                        what, instead);
}
