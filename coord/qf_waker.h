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
 * Using a waker (what a custom scheduler needs to know)
 *
 *   One wait at a time. A waker has one list link: it is registered on at
 *   most one wait list. Registering it on a second list while it is still
 *   registered on a first *moves* it (it is withdrawn there first, as by
 *   qf_waker_withdraw(): a wake that list delivers meanwhile goes on to its
 *   next waiter); registering it again on the list it is on keeps the one
 *   registration. So a waker cannot wait for two things at once: a task
 *   that must wake on either of two events uses two wakers (each with a
 *   wake function that makes the task runnable) and cancels the one that
 *   did not fire.
 *
 *   Reuse after it fires. Once woken, the waker needs no re-initialisation:
 *   the owner registers it again (directly, or by calling a poll form again
 *   with it). A wake function only makes the task runnable; the task may run
 *   on another thread and re-register before the waking thread has stored
 *   DONE: registering a CLAIMED waker waits for that store, briefly, so the
 *   owner never has to. The wake function itself must not register, cancel
 *   or withdraw the waker it was called for (that would wait for its own
 *   return). A waker may be freed (or its stack frame left) once its state
 *   is IDLE or DONE (qf_waitlist_cancel() returns with it so, unless it is
 *   registered on another list); never while it is REGISTERED or CLAIMED.
 *
 *   qf_waker_consumed(). A woken waker remembers the list that woke it until
 *   it is registered again, so that qf_waker_withdraw() (used to abandon a
 *   wait, e.g. when a parked task is cancelled) can hand an unused wake on
 *   to the next waiter there. Call qf_waker_consumed(w) when the poll (or,
 *   for code driving wait lists itself, the re-check) that followed a wake
 *   succeeded, if the waker may later be withdrawn rather than registered
 *   again; without it that withdraw wakes another waiter for nothing
 *   (harmless, every waiter re-checks, but it costs a wake). It is always
 *   safe after a successful poll; the queues' poll forms already do it.
 *   Registering the waker again forgets the earlier wake by itself, and
 *   qf_waitlist_cancel() never passes a wake on.
 *
 * Synchronization table
 *   register / cancel / wake     any threads concurrently on one list;
 *                                short internal lock (spin, then futex) held
 *                                only while linking/unlinking, never during
 *                                a wake function or a syscall.
 *   qf_waitlist_count            wait-free, one relaxed load.
 *   qf_waker_wait_until          blocking (thread wakers only).
 *   qf_eventcount_*              prepare/notify wait-free; wait blocking.
 *   qf_thread_*_task_runner      wait-free; the calling thread's own mark.
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

/* A wake function runs on the waking thread, outside the wait list's lock
 * (the waking call may hold locks of its own callers: a batcher's poll
 * holds its lock across the queue operation that wakes), while the waker is
 * CLAIMED (the list stores DONE after it returns). It must not block, take
 * a lock a poll may hold, free the waker, or register, cancel or withdraw
 * it; it makes the waiting task runnable, and the task re-registers when
 * it polls again. */
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
 *  was for succeeded), so withdrawing it later passes nothing on (see
 *  "Using a waker" above for when to call it). Owner only. Wait-free,
 *  except that on a CLAIMED waker it first waits, spinning briefly, for the
 *  wake in progress to store DONE. */
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
 * qf_waitlist_register() - append `w` to the list, oldest first.
 *
 * `w` is IDLE or DONE (a fired waker is registered again as it is); a
 * CLAIMED one is first waited for (until DONE); one already registered on
 * `wl` stays as it is, one registered on another list is moved here (see
 * "Using a waker" above).
 * Ownership:   the list borrows `w` until it is woken or cancelled.
 * Blocking:    never sleeps; takes the list's short lock (and the other
 *              list's, to move `w`).
 * Concurrency: only the owner of `w`; any threads on one list.
 * Ordering:    ends with a sequentially consistent fence, so the caller's
 *              following re-check of its condition cannot be reordered
 *              before the registration (see the protocol above).
 */
QF_API void qf_waitlist_register(qf_waitlist *wl, qf_waker *w);

/**
 * qf_waitlist_cancel() - withdraw a registration of `w` on `wl`.
 *
 * Returns:     true when `w` was registered on `wl` and is now IDLE (it was
 *              not woken). Otherwise false, with `w` left as it is:
 *              - woken (DONE), or being woken (CLAIMED: the call waits,
 *                spinning briefly, until the waking thread has stored DONE);
 *                on return `w` may be freed or reused. A waiter that was
 *                woken but no longer needs the wake should pass it on (wake
 *                one other waiter, or use qf_waker_withdraw()) so nothing
 *                is lost;
 *              - IDLE (never registered, cancelled already, or the poll
 *                that registered it finished at once): returns at once;
 *              - registered on another wait list: returns at once and
 *                records QF_INVALID_ARGUMENT ("... registered on another
 *                wait list"); `w` stays registered there (cancel it on that
 *                list, or use qf_waker_withdraw(), which finds the list).
 *              qf_waker_state() tells the cases apart after a false.
 * Blocking:    never sleeps; never waits except for a wake in progress.
 * Concurrency: only the owner of `w`.
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
 * Task-runner threads. qflow's blocking calls (the thread forms of the
 * queues, qf_coord_join, qf_coord_wait_for_stop, qf_task_join, ...) refuse
 * to block a thread that runs tasks, since a task waiting there would hold
 * the thread every other task needs: they return QF_FAILED_PRECONDITION
 * with a message naming the non-blocking form to use instead. qflow's own
 * workers carry that mark while they run a task; a custom scheduler sets it
 * on its threads with qf_thread_set_task_runner() to get the same
 * protection. */

/**
 * qf_thread_set_task_runner() - mark (or unmark) the calling thread as one
 * that runs tasks.
 *
 * Set it around each task the scheduler runs (or once for a thread that
 * does nothing else) and clear it before the thread makes blocking qflow
 * calls of its own (a final qf_coord_join, for example). The mark belongs
 * to the calling thread only and starts false on every thread; qflow's
 * workers set it while a task runs and then put back what was there.
 *
 * Returns:     the previous mark, so nested runners can restore it.
 * Blocking:    never; wait-free (a thread-local store).
 * Concurrency: any thread, for itself. Async-signal-safe: no.
 * Errors:      none (records nothing).
 */
QF_API bool qf_thread_set_task_runner(bool runs_tasks);

/**
 * qf_thread_is_task_runner() - whether the calling thread is marked as
 * running tasks (by qf_thread_set_task_runner(), or because it is a qflow
 * worker running a task right now). Wait-free; records nothing.
 */
QF_API bool qf_thread_is_task_runner(void);

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
