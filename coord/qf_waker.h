/* qf_waker.h - wakers, wait lists and event counts: how anything in qflow waits.
 *
 * A *waker* is a small struct that something waiting leaves with whatever it
 * waits on. A waiter is either a thread (the waker's own word is a futex the
 * thread sleeps on) or a task of a scheduler (the waker's function makes the
 * task runnable again). Queues and the Coordinator hold wakers in *wait
 * lists* and never need to know which kind they hold.
 *
 * Lifecycle of one registration:
 *
 *     waiter                                 waker side (enqueue, close, stop)
 *     ------                                 ---------------------------------
 *     qf_waitlist_register(wl, w)
 *     re-check the condition  ------------>  change state, then qf_waitlist_wake()
 *     sleep / return pending                   unlinks w, calls w->wake (or
 *                                              wakes the thread), marks w DONE
 *     qf_waitlist_cancel(wl, w) when giving up (deadline, success on re-check)
 *
 * The protocol guarantees: a waker is woken at most once per registration;
 * after qf_waitlist_cancel() returns, or after the waker reads DONE, the wait
 * list never touches the waker again, so it may live on the waiter's stack.
 * No wake is lost provided the waiter re-checks its condition *after*
 * registering and the notifier changes the state *before* waking, with the
 * two ordered by a sequentially consistent operation on each side (the
 * register call ends with a full fence for that reason).
 *
 * Synchronization table
 *   register / cancel / wake     any threads concurrently on one list;
 *                                short internal lock (spin, then futex) held
 *                                only while linking/unlinking, never during
 *                                a wake function or a syscall.
 *   qf_waitlist_has_waiters      wait-free, one relaxed load.
 *   qf_waker_wait_until          blocking (thread wakers only).
 *   qf_eventcount_*              prepare/notify wait-free; wait blocking.
 *
 * Bad input: a NULL waker, wait list or event count is refused (calls
 * returning int give QF_INVALID_ARGUMENT, the others a neutral value or
 * nothing) with the error recorded and nothing changed; qf_waitlist_destroy
 * and the async-signal-safe qf_eventcount_notify take NULL quietly.
 */
#ifndef QF_WAKER_H
#define QF_WAKER_H

#include <stdbool.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_status.h"
#include "qf_time.h"

QF_BEGIN_DECLS

typedef struct qf_waker qf_waker;
typedef struct qf_waitlist qf_waitlist;

/* A wake function runs on the waking thread, outside every qflow lock. It
 * must not block and must not free the waker; it may re-register it on
 * another list only after returning (the list marks it DONE afterwards). */
typedef void (*qf_wake_fn)(qf_waker *w);

/* Waker states (qf__state). */
enum {
    QF_WAKER_IDLE = 0,       /* not on any list */
    QF_WAKER_REGISTERED = 1, /* on a list, not yet woken */
    QF_WAKER_CLAIMED = 2,    /* unlinked by a waking thread, wake in progress */
    QF_WAKER_DONE = 3,       /* woken; the list is finished with it */
};

/* Public so it can be embedded (tasks) or put on a stack (threads) with no
 * allocation. Fields starting with qf__ belong to the wait list. */
struct qf_waker {
    qf_wake_fn wake; /* NULL: a thread waker, woken through qf__state */
    void *ctx;       /* for the owner of the waker */
    qf_waker *qf__next;
    qf_waker *qf__prev;
    qf_waitlist *qf__list;
    /* The list whose wake is not yet used: withdrawing the waker then hands
     * the wake on to the next waiter there (NULL once used). */
    qf_waitlist *qf__woken_from;
    QF_ATOMIC(uint32_t) qf__state;
};

/**
 * qf_waker_init() - prepare a waker that calls `fn(w)` when woken.
 * qf_waker_init_thread() - prepare a waker for the calling thread
 * (qf_waker_wait_until() sleeps on it). Never block; the waker must be IDLE.
 */
QF_API void qf_waker_init(qf_waker *w, qf_wake_fn fn, void *ctx);
QF_API void qf_waker_init_thread(qf_waker *w);

/** qf_waker_state() - the current state (acquire load). Wait-free. */
QF_API uint32_t qf_waker_state(const qf_waker *w);

/**
 * qf_waker_wait_until() - sleep until a thread waker is woken or `deadline`.
 *
 * Blocking:    until woken or the deadline (absolute CLOCK_MONOTONIC ns;
 *              QF_FOREVER for none).
 * Concurrency: only the thread that owns `w`.
 * Ordering:    acquire: what the waking thread did before waking is visible.
 * Returns:     QF_OK when woken (state DONE); QF_DEADLINE_EXCEEDED when the
 *              deadline passed first; the waker is then still registered and
 *              the caller must qf_waitlist_cancel() it.
 */
QF_API qf_code qf_waker_wait_until(qf_waker *w, qf_deadline deadline);

/** qf_waker_wait() - qf_waker_wait_until() returning an int. Kept for
 *  existing callers. */
QF_API int qf_waker_wait(qf_waker *w, qf_deadline deadline)
    QF_DEPRECATED("use qf_waker_wait_until(), which returns a qf_code");

/**
 * qf_waker_withdraw() - take `w` off whatever wait list holds it, without
 * knowing which (the runtime uses it when cancelling a parked task).
 * Returns true when it was registered and is now IDLE; false when it was
 * not registered or had been woken (then, as with qf_waitlist_cancel(), the
 * call returns once the waking thread is done with it). A wake that was
 * delivered but not used (see qf_waker_consumed()) is passed on to the next
 * waiter of the list that sent it, so abandoning a wait never loses a
 * wake. Owner only.
 */
QF_API bool qf_waker_withdraw(qf_waker *w);

/** qf_waker_consumed() - the wake `w` received has been used (the poll it
 *  was for succeeded), so withdrawing it later passes nothing on. Owner
 *  only; wait-free. */
QF_API void qf_waker_consumed(qf_waker *w);

/* A wait list. Embed it; initialise with qf_waitlist_init(). Pair with
 * qf_waitlist_destroy() once no waker is registered. */
struct qf_waitlist {
    QF_ATOMIC(uint32_t) qf__lock;
    QF_ATOMIC(uint32_t) qf__count;
    qf_waker *qf__head;
    qf_waker *qf__tail;
};

QF_API void qf_waitlist_init(qf_waitlist *wl);
QF_API void qf_waitlist_destroy(qf_waitlist *wl);

/**
 * qf_waitlist_register() - append `w` (IDLE) to the list, oldest first.
 *
 * Ownership:   the list borrows `w` until it is woken or cancelled.
 * Blocking:    never sleeps; takes the list's short lock.
 * Ordering:    ends with a sequentially consistent fence, so the caller's
 *              following re-check of its condition cannot be reordered
 *              before the registration (see the protocol above).
 */
QF_API void qf_waitlist_register(qf_waitlist *wl, qf_waker *w);

/**
 * qf_waitlist_cancel() - withdraw a registration.
 *
 * Returns:     true when `w` was still registered and is now IDLE (it was
 *              not woken); false when it had been woken: the call then
 *              waits (spinning briefly) until the waking thread is done with
 *              `w`, so on return `w` may be freed or reused. A waiter that
 *              was woken but no longer needs the wake should pass it on
 *              (wake one other waiter) so nothing is lost.
 * Concurrency: only the owner of `w`. Never sleeps.
 */
QF_API bool qf_waitlist_cancel(qf_waitlist *wl, qf_waker *w);

/**
 * qf_waitlist_wake() - wake up to `n` of the oldest registered wakers
 * (INT32_MAX: all). Returns the number woken.
 *
 * Blocking:    never sleeps; runs wake functions and futex wakes outside the
 *              list's lock.
 * Ordering:    release: state the caller changed before calling is visible
 *              to the woken waiter.
 */
QF_API int qf_waitlist_wake(qf_waitlist *wl, int n);

/** qf_waitlist_count() - registered wakers right now (relaxed, a hint).
 *  Wait-free. Use after a seq_cst operation of your own for a Dekker-style
 *  "is anyone waiting" check. */
QF_API uint32_t qf_waitlist_count(const qf_waitlist *wl);

/* ---------------------------------------------------------------------
 * Event count: the classic "prepare / re-check / wait" sleep primitive for
 * threads that wait for "something changed" rather than for one item (idle
 * workers of a pool, for example). A sequence word that sleepers futex-wait
 * on, plus a count of announced sleepers so notify costs no syscall when
 * nobody sleeps.
 *
 *   waiter:    t = prepare(); if (condition) cancel(); else wait_until(t, deadline);
 *   notifier:  make condition true; notify();
 */
typedef struct qf_eventcount {
    QF_ATOMIC(uint32_t) qf__seq;
    QF_ATOMIC(uint32_t) qf__sleepers;
} qf_eventcount;

QF_API void qf_eventcount_init(qf_eventcount *ec);

/** qf_eventcount_prepare() - announce a possible sleep and take a ticket
 *  before re-checking the condition. Wait-free; full fence. Pair with
 *  exactly one qf_eventcount_cancel() or qf_eventcount_wait(). */
QF_API uint32_t qf_eventcount_prepare(qf_eventcount *ec);

/** qf_eventcount_cancel() - the condition held after prepare: withdraw. */
QF_API void qf_eventcount_cancel(qf_eventcount *ec);

/** qf_eventcount_wait_until() - sleep unless a notify happened since
 *  `ticket`. Blocking until notify, the deadline, or spuriously (re-check in
 *  a loop). Returns QF_OK or QF_DEADLINE_EXCEEDED. */
QF_API qf_code qf_eventcount_wait_until(qf_eventcount *ec, uint32_t ticket, qf_deadline deadline);

/** qf_eventcount_wait() - qf_eventcount_wait_until() returning an int.
 *  Kept for existing callers. */
QF_API int qf_eventcount_wait(qf_eventcount *ec, uint32_t ticket, qf_deadline deadline)
    QF_DEPRECATED("use qf_eventcount_wait_until(), which returns a qf_code");

/** qf_eventcount_notify() - advance the count and wake one sleeper (or all
 *  when `all`), with no syscall when no sleeper is announced. Full fence
 *  first, so state changed before the call is seen by re-checking waiters.
 *  Lock-free; async-signal-safe. */
QF_API void qf_eventcount_notify(qf_eventcount *ec, bool all);

QF_END_DECLS

#endif
