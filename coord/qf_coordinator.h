/* qf_coordinator.h - make a set of threads and tasks stop together and
 * report the first real error (TensorFlow's tf.train.Coordinator).
 *
 * Usage, in the seeds' style:
 *
 *     static void *worker(void *arg)           // thread or task body
 *     {
 *         qf_coord *c = arg;
 *         while (!qf_coord_should_stop(c)) {
 *             if (qf_coord_report(c, do_some_work()) != QF_OK)
 *                 break;                        // error reported, stop requested
 *         }
 *         return NULL;
 *     }
 *
 *     qf_coord *c;
 *     qf_coord_new(NULL, 0, &c);               // clean stop on OUT_OF_RANGE
 *     for (i = 0; i < n; i++)
 *         qf_coord_thread_create(c, "worker", worker, c, &t[i]);
 *     qf_code rc = qf_coord_join(c, NULL, 0, 120.0, false, NULL);
 *     if (rc != QF_OK)                         // the first error any worker
 *         fprintf(stderr, "%s\n", qf_last_message());   // reported
 *     qf_coord_free(c);
 *
 * The stop word. One atomic 32-bit word holds a stop bit, a "someone sleeps
 * on this word" bit and a 30-bit epoch counter. qf_coord_should_stop() is
 * one acquire load of it. A stop request sets the stop bit with one atomic
 * RMW and, only when the sleepers bit was set, wakes every thread sleeping
 * on the word with one futex wake. qf_coord_clear_stop() starts a new epoch
 * (increments the counter, clears both bits). A thread in
 * qf_coord_wait_for_stop() returns true once the stop of the epoch it
 * started waiting in was requested, even if the stop was cleared again
 * before it woke up.
 *
 * Stop work. Besides the word, a stop wakes everything registered with the
 * coordinator: wakers (qf_waker.h; a task parked on "stop requested") are
 * woken once, and stop actions (for example a queue's cancel, registered by
 * a QueueRunner) run exactly once per epoch in which a stop is requested.
 * A stop action added while a stop is in effect runs at once.
 *
 * Signals. qf_coord_request_stop_from_signal() only sets the bit and wakes
 * the futex sleepers and a waiting join: it takes no lock, allocates
 * nothing, touches no stdio, so a SIGTERM handler may call it. Stop actions
 * and wakers cannot run inside a signal handler (they take locks), so after
 * a stop from a signal they run, on the calling thread, at the next of
 * these calls that observes the stop: qf_coord_request_stop(),
 * qf_coord_report(), qf_coord_check_stop(), qf_coord_wait_for_stop(),
 * qf_coord_join(), qf_coord_clear_stop(), qf_coord_add_stop_action(),
 * qf_coord_register_waker(). (qf_coord_should_stop() stays a single load
 * and never runs them.) A server stopping on SIGTERM therefore calls
 * request_stop_from_signal() in its handler and has its main thread in
 * qf_coord_join() or qf_coord_wait_for_stop(), which wakes up and runs them,
 * or, in an event loop, watches qf_coord_stop_fd() (readable once a stop is
 * requested, from a handler too) and calls qf_coord_check_stop() when it
 * polls readable.
 *
 * Errors. qf_coord_request_stop() takes a qf_status. The first status with
 * a code that is not a clean-stop code is recorded, and only if no stop was
 * requested before it in the epoch (spec 109-111); a clean-stop code
 * (default OUT_OF_RANGE, spec 112) stops like a request without a status.
 * qf_coord_join() returns the recorded status (code returned, message in
 * qf_last_message()).
 *
 * Members. A member is something join waits for: a thread created with
 * qf_coord_thread_create() or registered with qf_coord_register_thread(),
 * or a general handle from qf_coord_member_new() that its owner (a task of
 * a scheduler, say) marks finished with qf_coord_member_done().
 *
 * Async-signal-safe calls: qf_coord_request_stop_from_signal(),
 * qf_coord_should_stop(). No other call is.
 *
 * Synchronization table
 *   should_stop, joined                  any thread; wait-free, one load
 *   request_stop_from_signal             any thread or signal handler;
 *                                        lock-free (bounded: one RMW, at
 *                                        most two futex wakes)
 *   request_stop, report, clear_stop,
 *   raise_requested_exception            any threads concurrently; short
 *                                        internal mutex; may run stop work
 *   check_stop, wait_for_stop            any threads; may run stop work;
 *                                        wait_for_stop blocks until stop or
 *                                        deadline
 *   add/remove_stop_action,
 *   register/cancel_waker                any threads concurrently
 *   thread_create, register_thread,
 *   member_new, member_done              any threads concurrently
 *   stop_fd                              any thread; the fd: poll/epoll
 *                                        from any thread
 *   join, join_until                     any thread that is not a member;
 *                                        one join at a time is the
 *                                        intended use (concurrent joins
 *                                        split the members between them)
 *   qf_coord_free                        quiescence (see there)
 *
 * Bad input. A NULL coordinator makes every call refuse: QF_INVALID_ARGUMENT
 * (or false / nothing for the calls that return a bool or void) with
 * qf_last_message() naming it, and nothing changes; qf_coord_request_stop()
 * still frees the status it was given. The two async-signal-safe calls
 * (should_stop, request_stop_from_signal) take a NULL coordinator quietly
 * (false, nothing) and record nothing. qf_coord_report() with a code outside
 * the canonical set (qf_code_is_valid()) returns QF_INVALID_ARGUMENT and
 * requests no stop.
 *
 * Differences from TensorFlow: the grace period counts from the moment
 * join observes the stop (TensorFlow: within a second of it, by polling);
 * join reaps the pthreads it waited for; members registered while a join
 * is running are left for the next join instead of being forgotten; the
 * laggard error is QF_DEADLINE_EXCEEDED (TensorFlow: RuntimeError, see
 * qf_coord_join()).
 */
#ifndef QF_COORDINATOR_H
#define QF_COORDINATOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_status.h"
#include "qf_time.h"
#include "qf_waker.h"

QF_BEGIN_DECLS

typedef struct qf_coord qf_coord;
typedef struct qf_coord_member qf_coord_member;
typedef struct qf_coord_action qf_coord_action;

/* A stop action: runs on whichever thread runs the stop work, outside every
 * coordinator lock. It must not block (it may delay a request_stop, a join
 * or a clear_stop) and should be quick: a queue cancel, a flag, a wake. */
typedef void (*qf_coord_action_fn)(void *arg);

/* Stop grace period TensorFlow uses by default, in seconds. */
#define QF_COORD_DEFAULT_GRACE_SECS 120.0

/* The laggard message prefix; join's message is this followed by the names
 * of the members still running, separated by single spaces (spec 117). */
#define QF_COORD_LAGGARD_PREFIX "Coordinator stopped with threads still running: "

/**
 * qf_coord_new() - create a coordinator.
 *
 * @clean_codes: codes that stop cleanly when reported to request_stop
 *              (spec 112). NULL: the default, {QF_OUT_OF_RANGE}. Non-NULL
 *              with n_clean == 0: no code is clean. QF_OK in the list is
 *              ignored (a QF_OK status is always a stop without error).
 * Ownership:   the caller owns *ret_c; pair with qf_coord_free(). The list
 *              is copied.
 * Blocking:    never (allocates).  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a code outside the canonical
 *              range or a NULL ret_c; QF_RESOURCE_EXHAUSTED when out of
 *              memory. *ret_c is untouched on failure.
 */
QF_API qf_code qf_coord_new(const qf_code *clean_codes, size_t n_clean, qf_coord **ret_c);

/**
 * qf_coord_free() - destroy a coordinator. NULL-safe.
 *
 * Needs quiescence: no thread is in, or will call, any qf_coord_ function
 * on `c`; every member handle has been marked done and every thread
 * created or registered by its own call has ended. (Members still running
 * after a join with laggards must be waited for first.) Frees the recorded
 * status, the stop actions still registered and the members not yet
 * joined; pthreads are not joined by free.
 * Blocking:    only for the few instructions a concurrent
 *              qf_coord_member_done() may still be executing after join saw
 *              the member finish.
 */
QF_API void qf_coord_free(qf_coord *c);

/* ------------------------------------------------------------------------
 * Stop flag
 */

/**
 * qf_coord_should_stop() - whether a stop was requested in this epoch.
 *
 * Blocking:    never.  Concurrency: any thread; async-signal-safe.
 * Progress:    wait-free: one acquire load, no lock, no syscall. Never runs
 *              stop work (see qf_coord_check_stop()).
 * Ordering:    acquire: when it returns true, everything the requesting
 *              thread did before its request_stop is visible.
 */
QF_API bool qf_coord_should_stop(const qf_coord *c);

/**
 * qf_coord_check_stop() - qf_coord_should_stop(), and when a stop is in
 * effect, make sure this epoch's stop work (actions, wakers) has run.
 *
 * Only differs from should_stop after a stop from a signal handler that
 * no other call has acted on yet: then the stop work runs on the calling
 * thread before it returns. Otherwise two loads.
 * Blocking:    never sleeps; may run stop actions.  Not async-signal-safe.
 * Ordering:    as qf_coord_should_stop().
 */
QF_API bool qf_coord_check_stop(qf_coord *c);

/**
 * qf_coord_request_stop() - ask every member to stop, reporting `st`.
 *
 * @st:         NULL (or a QF_OK status) for a stop without error; otherwise
 *              the error to report.
 * Behaviour:   when the coordinator has been joined and `st` has a
 *              non-clean code, the call does nothing else than hand the
 *              error straight back (spec 121): it sets the calling thread's
 *              last error to st's code and message, frees st and returns
 *              the code, and no stop is requested. Otherwise it sets the
 *              stop bit; when this call is the one that set it (the first
 *              request of the epoch), a non-clean st is recorded
 *              (spec 109-110); a non-clean st arriving after a stop of the
 *              epoch is dropped and counted (spec 111; see
 *              qf_coord_join_report.n_dropped). A clean code is never
 *              recorded nor counted (spec 112). Then the stop work runs:
 *              stop actions not yet run this epoch run on the calling
 *              thread, registered wakers are woken.
 * Ownership:   always takes `st` (recorded, or freed before returning).
 * Blocking:    never sleeps; takes a short internal mutex; runs stop
 *              actions, which are required not to block.
 * Concurrency: any threads. Not async-signal-safe (see
 *              qf_coord_request_stop_from_signal()).
 * Ordering:    release: a thread that sees should_stop() true sees what the
 *              caller did before the request; join() reads the recorded
 *              status after the stop it observes.
 * Returns:     QF_OK (the stop is requested, or was already); after join,
 *              st's code for a non-clean st (qf_last_message() holds its
 *              message).
 */
QF_API qf_code qf_coord_request_stop(qf_coord *c, qf_status *st);

/**
 * qf_coord_request_stop_from_signal() - request a stop without an error,
 * from anywhere, signal handlers included.
 *
 * Sets the stop bit (one atomic RMW), futex-wakes the threads in
 * wait_for_stop and a thread in join. Stop actions and wakers are left to
 * the next non-signal call that observes the stop (see the top of this
 * file). errno is preserved.
 * Blocking:    never.  Concurrency: any thread; async-signal-safe.
 * Progress:    lock-free; at most two futex wake syscalls, made only when
 *              someone sleeps.
 * Ordering:    as qf_coord_request_stop().
 */
QF_API void qf_coord_request_stop_from_signal(qf_coord *c);

/**
 * qf_coord_stop_fd() - a file descriptor that polls readable while a stop is
 * in effect, so an event loop (poll, epoll, libuv) wakes on a stop,
 * including one requested from a signal handler.
 *
 * The fd is an eventfd owned by the coordinator, made on the first call
 * (later calls return the same fd) and closed by qf_coord_free(). It
 * becomes readable when a stop is requested (already readable if one is in
 * effect when it is made) and stays readable until qf_coord_clear_stop()
 * starts a new epoch, so a level-triggered loop cannot miss it. Do not
 * read, write or close it. A stop requested from a signal handler at the
 * moment a clear_stop runs may leave it readable in the new epoch: on
 * readable, check qf_coord_check_stop() (which also runs the stop work a
 * signal handler could not).
 * Ownership:   the coordinator's; valid until qf_coord_free().
 * Blocking:    never (the first call creates the eventfd under the
 *              coordinator's mutex).  Concurrency: any thread.
 * Ordering:    a poll that reports the fd readable happens after the stop
 *              request; qf_coord_should_stop() then returns true (unless a
 *              clear_stop came in between).
 * Returns:     QF_OK and *ret_fd; QF_INVALID_ARGUMENT for a NULL argument;
 *              QF_RESOURCE_EXHAUSTED when eventfd(2) fails (out of file
 *              descriptors). *ret_fd untouched on failure.
 */
QF_API qf_code qf_coord_stop_fd(qf_coord *c, int *ret_fd);

/**
 * qf_coord_report() - the "stop on exception" one-liner (spec 113).
 *
 * When code != QF_OK, requests a stop with the calling thread's last error
 * as status (qf_last_status()): the message of the qflow call (or
 * qf_set_error()) that failed with `code`. When the thread's last error has
 * a different code, the status carries `code` with its name as message.
 * Returns `code` unchanged, so it wraps a call:
 *
 *     if (qf_coord_report(c, qf_queue_enqueue(q, e)) != QF_OK)
 *         return;   // reported (or a clean OUT_OF_RANGE stop); leave
 *
 * Blocking, concurrency, ordering: as qf_coord_request_stop(); allocates
 * the status only when code != QF_OK. After join, a non-clean code is
 * handed straight back as qf_coord_request_stop() does (the last error
 * keeps its message) and still returned.
 */
QF_API qf_code qf_coord_report(qf_coord *c, qf_code code);

/**
 * qf_coord_wait_for_stop() - sleep until a stop is requested or `deadline`.
 *
 * @deadline:   absolute CLOCK_MONOTONIC ns (qf_deadline_in_s()), QF_NO_WAIT
 *              to test, QF_FOREVER for no limit (spec 108).
 * Blocking:    until the stop of the epoch the call started in is requested,
 *              or the deadline. Sleeps on the stop word (futex); no polling.
 * Concurrency: any number of threads (all are woken by one stop).
 * Ordering:    acquire, as qf_coord_should_stop().
 * Returns:     true when that stop was requested (also if it has been
 *              cleared since), false when the deadline passed first
 *              (spec 107). Runs pending stop work before returning true in
 *              the same epoch (so not async-signal-safe). Inside a task of a
 *              qflow runtime it never sleeps: it returns false with
 *              qf_last_code() QF_FAILED_PRECONDITION when it would have to
 *              (register a waker instead).
 */
QF_API bool qf_coord_wait_for_stop(qf_coord *c, qf_deadline deadline);

/**
 * qf_coord_clear_stop() - start a new epoch: should_stop() is false again,
 * and the recorded status, the dropped-error count and joined are reset
 * (spec 122).
 *
 * Before the epoch advances, the stop work of the ending epoch is finished:
 * actions that have not run for it yet run on the calling thread, and the
 * call waits until stop actions running on other threads have returned.
 * Hence every stop action runs exactly once per stopped epoch and never
 * concurrently with itself. When no stop is in effect, only the resets
 * happen (waiters of the epoch keep waiting). Called from inside a stop
 * action, it still finishes the epoch's stop work but does not wait for
 * actions running on other threads (two actions clearing on two threads
 * would otherwise wait for each other); an action may then run again in
 * the next epoch while its previous run is finishing.
 * Ownership:   frees the recorded status.
 * Blocking:    may wait for stop actions running on other threads (which
 *              must not block); never for members.
 * Concurrency: any thread, including from inside a stop action.
 * Ordering:    acq_rel on the stop word: a thread that sees the new epoch
 *              sees the resets.
 */
QF_API void qf_coord_clear_stop(qf_coord *c);

/**
 * qf_coord_raise_requested_exception() - the recorded status, if any
 * (spec 123).
 *
 * @ret_status: optional; on a non-OK return receives a copy of the recorded
 *              status, owned by the caller.
 * Behaviour:   when a status is recorded, sets the calling thread's last
 *              error to it and returns its code; otherwise returns QF_OK and
 *              leaves *ret_status untouched.
 * Blocking:    never sleeps (short mutex).  Concurrency: any thread.
 */
QF_API qf_code qf_coord_raise_requested_exception(qf_coord *c, qf_status **ret_status);

/**
 * qf_coord_joined() - whether join has completed since the coordinator
 * was created or last cleared (spec 120, 123). Wait-free; any thread.
 */
QF_API bool qf_coord_joined(const qf_coord *c);

/* ------------------------------------------------------------------------
 * Things a stop wakes
 */

/**
 * qf_coord_add_stop_action() - run `fn(arg)` once in every epoch in which
 * a stop is requested, until removed.
 *
 * When a stop is in effect at the time of the call, fn runs at once, on the
 * calling thread, before the call returns. Otherwise it runs as part of
 * the stop work of the next stop (on the thread running it). Actions run
 * in the order they were added. The decision "runs in this epoch" is taken
 * under the coordinator's mutex, against the same epoch check the stop work
 * and clear_stop make, so a race with request_stop or clear_stop can
 * neither lose nor duplicate a run.
 * @ret_action: optional; receives the handle for
 *              qf_coord_remove_stop_action(). Without it the action stays
 *              until qf_coord_free().
 * Ownership:   the coordinator owns the action record; `arg` is borrowed
 *              until the action is removed or the coordinator freed.
 * Blocking:    never sleeps; may run fn.  Concurrency: any threads.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL fn;
 *              QF_RESOURCE_EXHAUSTED. *ret_action untouched on failure.
 */
QF_API qf_code qf_coord_add_stop_action(qf_coord *c, qf_coord_action_fn fn, void *arg,
                                        qf_coord_action **ret_action);

/**
 * qf_coord_remove_stop_action() - stop running an action and free it.
 * NULL-safe.
 *
 * After it returns, the action is not running and will not run again,
 * except when called from inside that same action (directly or nested):
 * then it returns at once and the record is freed when the action returns.
 * Blocking:    waits until a run of the action on another thread returns.
 * Concurrency: any thread; one removal per handle.
 */
QF_API void qf_coord_remove_stop_action(qf_coord *c, qf_coord_action *a);

/**
 * qf_coord_register_waker() - have the next stop wake `w`.
 *
 * Registers `w` (IDLE, qf_waker_init*) on the coordinator's wait list,
 * then re-checks the stop word (the wait-list protocol of qf_waker.h).
 * Ownership:   the coordinator borrows `w` until it is woken or
 *              qf_coord_cancel_waker() returns.
 * Blocking:    never sleeps.  Concurrency: any threads; one registration
 *              per waker at a time.
 * Returns:     true when `w` is registered (or was already woken by a
 *              concurrent stop: its state is then QF_WAKER_DONE, and a task
 *              waker's function has run); false when a stop was already in
 *              effect: `w` is left IDLE, untouched, and nothing will wake
 *              it. A waker may rarely be woken by a stop that a clear_stop
 *              overtook; like every waker it must re-check should_stop().
 */
QF_API bool qf_coord_register_waker(qf_coord *c, qf_waker *w);

/**
 * qf_coord_cancel_waker() - withdraw a registration (qf_waitlist_cancel()).
 * Returns true when `w` had not been woken (now IDLE); false when it had
 * been woken (on return the coordinator no longer touches it), and, at
 * once, when it was not registered here (IDLE, or on another wait list:
 * QF_INVALID_ARGUMENT recorded, left there).
 * Concurrency: only the owner of `w`. Never sleeps.
 */
QF_API bool qf_coord_cancel_waker(qf_coord *c, qf_waker *w);

/* ------------------------------------------------------------------------
 * Members and join
 */

/**
 * qf_coord_thread_create() - start a joinable pthread running fn(arg), as a
 * member of `c` (the exact form of register_thread, spec 115).
 *
 * The member is registered before the call returns, and marked finished
 * when the thread ends (returns from fn or calls pthread_exit), which wakes
 * a waiting join at once.
 * @name:       copied; NULL gives "thread-<n>".
 * Ownership:   the thread is joined (reaped) by qf_coord_join(); the caller
 *              must not join or detach it, unless join reported it as still
 *              running (then the caller may, and should, join it later).
 * Blocking:    never sleeps.  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL fn or ret_thread;
 *              QF_RESOURCE_EXHAUSTED (no memory, or pthread_create failed;
 *              the message says which). *ret_thread untouched on failure.
 */
QF_API qf_code qf_coord_thread_create(qf_coord *c, const char *name, void *(*fn)(void *), void *arg,
                                      pthread_t *ret_thread);

/**
 * qf_coord_register_thread() - add a joinable pthread to the members
 * (spec 115).
 *
 * When `t` is the calling thread, the registration is exact: the thread's
 * end is reported to the coordinator (a thread-specific-data destructor),
 * as with qf_coord_thread_create(). For any other thread, nothing can tell
 * the coordinator when it ends, so join learns it by joining the thread:
 * pthread_tryjoin_np whenever join wakes up, pthread_timedjoin_np bounded
 * by the grace deadline once a stop is in effect, and a plain pthread_join
 * while no stop has been requested and every other member has finished. A
 * stop requested while join is blocked in that plain pthread_join starts
 * the grace period only when the thread ends. Prefer
 * qf_coord_thread_create() or self-registration where the grace period
 * matters.
 * @name:       copied; NULL gives "thread-<n>".
 * Ownership:   as for qf_coord_thread_create(): join reaps the thread.
 * Blocking:    never sleeps.  Concurrency: any thread.
 * Returns:     QF_OK; QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_coord_register_thread(qf_coord *c, pthread_t t, const char *name);

/**
 * qf_coord_member_new() - a member that is not a pthread (a task of a
 * scheduler, a callback chain), registered with `c`.
 *
 * @name:       copied; NULL gives "member-<n>".
 * Ownership:   the caller owns *ret_m until it passes it to
 *              qf_coord_member_done(), exactly once.
 * Blocking:    never.  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL ret_m;
 *              QF_RESOURCE_EXHAUSTED. *ret_m untouched on failure.
 */
QF_API qf_code qf_coord_member_new(qf_coord *c, const char *name, qf_coord_member **ret_m);

/**
 * qf_coord_member_done() - mark a member finished and give up the handle.
 * NULL-safe.
 *
 * Wakes a join waiting for it. May be called after join has given up on
 * the member (it then only frees the handle) but before qf_coord_free().
 * Blocking:    never sleeps.  Concurrency: any thread; once per handle.
 * Progress:    lock-free (a store, an event-count notify, a reference drop).
 * Ordering:    release: join returning with this member finished sees
 *              everything the member did before this call.
 */
QF_API void qf_coord_member_done(qf_coord_member *m);

/* What join saw. Fill with qf_coord_join(); release with
 * qf_coord_join_report_clear(). Names are in join order: registered
 * members oldest first, then extra threads. */
typedef struct qf_coord_join_report {
    qf_code code;        /* what join returned */
    qf_status *status;   /* NULL when code is QF_OK, else code + message */
    bool stop_requested; /* a stop was in effect when join stopped waiting */
    bool grace_expired;  /* the grace deadline passed with members running */
    size_t n_members;    /* members waited for (duplicates counted once) */
    size_t n_finished;   /* ... of which finished */
    char **finished;     /* their names (n_finished entries) */
    size_t n_running;    /* ... still running when join returned */
    char **running;      /* their names (n_running entries) */
    uint64_t n_dropped;  /* non-clean statuses reported in this epoch and
                            not recorded (a stop was already in effect) */
} qf_coord_join_report;

/** qf_coord_join_report_clear() - free what a report holds and zero it.
 *  NULL-safe; a zeroed report is valid input. */
QF_API void qf_coord_join_report_clear(qf_coord_join_report *r);

/**
 * qf_coord_join() - wait for the members to finish; return the first error.
 *
 * Waits for the union of the registered members and `extra_threads`
 * (spec 114-115; a thread both registered and passed counts once), then
 * empties the registered set and sets joined (spec 120).
 * Phase 1 waits until every member has finished or a stop is requested; if
 * no stop is ever requested, it waits indefinitely (spec 116). Phase 2,
 * once it observes a stop, gives the members still running
 * `stop_grace_period_secs` (fractions allowed; 1e-10 is a valid grace)
 * more (spec 117). Join is woken by member_done, by a thread created with
 * thread_create (or self-registered) ending, and by a stop; it never polls
 * (see qf_coord_register_thread() for threads registered by others). When
 * it observes a stop it also runs the pending stop work.
 *
 * @extra_threads: n_extra joinable pthreads joined like foreign registered
 *              threads (see qf_coord_register_thread()); NULL when n_extra
 *              is 0. Names in reports: "thread-<index in extra_threads>".
 * @ignore_live_threads: laggards do not make join fail (spec 118); they
 *              are still listed in the report.
 * @ret_report: optional; overwritten whenever join waited, i.e. on every
 *              return except QF_INVALID_ARGUMENT and QF_RESOURCE_EXHAUSTED
 *              (then untouched). Join does not free what it held before:
 *              clear a filled report before passing it again.
 * Ownership:   pthreads that finished are reaped (pthread_join); threads
 *              still running are not, and the caller may join them later.
 *              Member records still running are released by their
 *              member_done / thread end.
 * Blocking:    until every member finished, or the grace period after a
 *              stop expired.
 * Concurrency: any thread that is not one of the members.
 * Ordering:    acquire: the caller sees everything finished members did.
 * Returns:     the recorded status's code when one is recorded (spec 119,
 *              even when every member finished); otherwise
 *              QF_DEADLINE_EXCEEDED with message QF_COORD_LAGGARD_PREFIX
 *              followed by the laggards' names when the grace expired with
 *              members running and !ignore_live_threads (TensorFlow raises
 *              RuntimeError: the grace period is a deadline that expired
 *              before the stop completed, and DEADLINE_EXCEEDED is the
 *              canonical code for exactly that); otherwise QF_OK. The
 *              message of a non-OK return is in qf_last_message().
 *              QF_INVALID_ARGUMENT for extra_threads NULL with n_extra > 0
 *              or a negative / NaN grace; QF_RESOURCE_EXHAUSTED when out of
 *              memory (nothing waited, members stay registered);
 *              QF_FAILED_PRECONDITION when called from inside a task of a
 *              qflow runtime or on a thread marked with
 *              qf_thread_set_task_runner() (it would hold a worker; the
 *              message points at qf_coord_members_done()).
 */
QF_API qf_code qf_coord_join(qf_coord *c, const pthread_t *extra_threads, size_t n_extra,
                             double stop_grace_period_secs, bool ignore_live_threads,
                             qf_coord_join_report *ret_report);

/**
 * qf_coord_join_until() - qf_coord_join() bounded by an absolute deadline:
 * wait for the members until they have all finished or `deadline`
 * (CLOCK_MONOTONIC ns, qf_deadline_in_s(); QF_FOREVER: no bound) passes,
 * whichever comes first.
 *
 * Where qf_coord_join() gives the members a grace period counted from the
 * moment it observes a stop, here the deadline is the one bound of the
 * whole call; the usual shutdown is qf_coord_request_stop() and then
 * qf_coord_join_until(c, ..., qf_deadline_in_s(10), ...), and deadlines
 * compose (a server with 30 s to shut down passes the same deadline to
 * every wait). With QF_FOREVER it waits exactly like join (spec 116).
 *
 * When the deadline passes with a stop in effect, join completes as after
 * an expired grace period (spec 117-118: laggards make it fail with
 * QF_COORD_LAGGARD_PREFIX unless ignore_live_threads, the registered set is
 * emptied, joined is set). When it passes before any stop was requested,
 * nothing is joined: it returns QF_DEADLINE_EXCEEDED ("qf_coord_join_until:
 * the deadline passed before a stop was requested; still running: <names>"),
 * the members still running stay registered (finished ones are released and
 * their threads reaped), joined stays false, and a later join waits for
 * them again, like any call that timed out. ignore_live_threads does not
 * apply there.
 *
 * @ret_report: as for qf_coord_join(); after a deadline with no stop,
 *              stop_requested and grace_expired are false and n_running
 *              names the members that stay registered.
 * Blocking, concurrency, ordering, ownership: as qf_coord_join().
 * Returns:     as qf_coord_join(), plus QF_DEADLINE_EXCEEDED as above;
 *              QF_INVALID_ARGUMENT for a NULL coordinator, extra_threads
 *              NULL with n_extra > 0, or a deadline below QF_FOREVER.
 */
QF_API qf_code qf_coord_join_until(qf_coord *c, const pthread_t *extra_threads, size_t n_extra,
                                   qf_deadline deadline, bool ignore_live_threads,
                                   qf_coord_join_report *ret_report);

/**
 * qf_coord_members_done() - whether every registered member has finished,
 * without waiting: the non-blocking counterpart of join for a scheduler
 * that must not block (join has no poll form, and refuses inside a task).
 *
 * A member counts as finished once qf_coord_member_done() was called for it
 * (a task member) or its thread ended (qf_coord_thread_create(), or a
 * thread that registered itself). A pthread registered by another thread
 * (qf_coord_register_thread() with t != pthread_self()) can be known to
 * have ended only by joining it, so it counts as running until a join reaps
 * it. True when nothing is registered. Members a running join has taken
 * from the registered set are not counted (one join at a time is the
 * intended use: check this, then join once it is true; the join then
 * returns without waiting, with the recorded status). A stop does not
 * change the answer: it is about the members only.
 *
 * Blocking:    never sleeps; takes the coordinator's lock briefly (it is
 *              never held across a wait), so a task may call it. Linear in
 *              the registered members.
 * Concurrency: any thread.
 * Ordering:    acquire: when it returns true, the caller sees everything
 *              the members did before finishing.
 * Returns:     true or false as above; false (QF_INVALID_ARGUMENT recorded)
 *              for a NULL coordinator.
 */
QF_API bool qf_coord_members_done(const qf_coord *c);

/* ------------------------------------------------------------------------
 * Internal, for white-box tests only (not exported from libqflow.so).
 */

QF_END_DECLS

#endif
