/* qf_coordinator.c - the Coordinator: stop word, stop work, members, join.
 *
 * Implementation notes.
 *
 * The stop word. Bit 0 STOP, bit 1 SLEEPERS, bits 2..31 the epoch. The
 * "key" of a stopped epoch is the word without SLEEPERS (epoch | STOP); it
 * always has bit 0 set, so 0 means "never".
 *   - should_stop: one acquire load. It pairs with the seq_cst fetch_or of
 *     the requester, so whatever the requester wrote before (the recorded
 *     status included) is visible once the bit is seen.
 *   - wait_for_stop: sets SLEEPERS with a CAS before sleeping on the exact
 *     value it saw (FUTEX_WAIT compares atomically in the kernel). A stop's
 *     fetch_or returns the old word, so the requester learns from the same
 *     RMW whether anyone sleeps: no waiter count, no Dekker fence, and no
 *     syscall when nobody waits. Sleepers are woken all at once.
 *   - clear_stop: the only writer that changes the epoch, always under the
 *     mutex, with a CAS (SLEEPERS may be set concurrently by a waiter of a
 *     running epoch, but only while STOP is clear, and clear_stop only
 *     advances a stopped epoch, so in practice one CAS succeeds).
 *   A waiter that saw epoch e returns true as soon as the word shows STOP or
 *   another epoch: the stop of e was requested even if cleared since.
 *   Epochs wrap after 2^30 clears; a waiter would have to sleep through
 *   exactly that many stops to be fooled, and every stop wakes it.
 *
 * Recording. A non-signal request takes the mutex around its fetch_or, and
 * the request whose fetch_or flips STOP records its status. So "first
 * reportable status, and only if no stop came before it" is decided by the
 * word itself: a stop from a signal handler (no mutex) that lands first
 * makes the fetch_or see STOP and the status is dropped. A reader that
 * observed STOP and then takes the mutex sees the record: the fetch_or sat
 * inside the recorder's critical section, which therefore precedes the
 * reader's.
 *
 * Stop work: waking the wait list of wakers and running the stop actions,
 * once per stopped epoch. It cannot run in a signal handler, so it is not
 * tied to the request itself: any non-signal call that observes STOP runs
 * it unless `settled` already holds the epoch's key ("a full scan
 * completed"). Several threads may run it for the same epoch at once; each
 * action is claimed under the mutex by writing the key into action->ran,
 * after checking that the word still holds that key. clear_stop advances
 * the epoch under the same mutex, after finishing the stop work itself and
 * after waiting for actions running elsewhere (inflight) to return. Hence:
 *   - an action runs at most once per epoch (the claim), never for an epoch
 *     that has been cleared (the key check under the mutex), never
 *     concurrently with itself across epochs (clear_stop waits);
 *   - at least once per stopped epoch while registered: the stop work is
 *     finished before the epoch can advance (clear_stop settles first), and
 *     an action added while STOP is set claims itself in the same critical
 *     section that links it, so a scan that already passed cannot miss it.
 * Actions run outside the mutex (they may call back into the coordinator);
 * `busy` pins an action's list node meanwhile, so the scan continues from
 * a->next after re-locking, and remove waits for busy == 0. Which thread is
 * running which action is kept on a thread-local stack of frames, so that
 * remove and clear_stop called from inside an action do not wait for
 * themselves.
 *
 * Wakers are woken outside the mutex (a wake function may call back in),
 * after re-checking the key; a clear_stop landing between that check and
 * the wake can wake a waker of the new epoch spuriously, which the waker
 * protocol allows (every waiter re-checks its condition).
 *
 * Join sleeps on an event count that member_done, the thread exit hooks and
 * every stop notify; qf_eventcount_notify is lock-free and async-signal-safe,
 * which is what lets a signal-handler stop wake join.
 *
 * Members are reference counted: the coordinator's registered set holds one
 * reference, and the owner (a task's handle, a thread's exit hook) another.
 * join drops the set's reference, so a laggard that finishes after join
 * gave up on it still has a valid record to mark. done_inflight keeps
 * qf_coord_free from freeing the coordinator while a member_done that join
 * has already seen is still notifying the event count.
 */
#include "qf_coordinator.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "qf_coord_join-impl.h"
#include "qf_futex.h"
#include "qf_lock-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"
#include "qf_coordinator-impl.h"

#define STOP QF__COORD_STOP
#define SLEEPERS QF__COORD_SLEEPERS
#define EPOCH_SHIFT QF__COORD_EPOCH_SHIFT

enum member_kind {
    MEMBER_TASK,           /* qf_coord_member_new: done by member_done */
    MEMBER_THREAD_HOOKED,  /* a pthread that reports its own end */
    MEMBER_THREAD_FOREIGN, /* a pthread join can only join */
};

struct qf_coord_member {
    qf_coord *c;
    struct qf_coord_member *next; /* registered set (under c->lock) */
    union {
        struct qf_coord_member *tls_next; /* a hooked thread's exit-hook list */
        size_t extra_index;               /* join's extra threads, never hooked */
    };
    _Atomic uint32_t done;
    _Atomic uint32_t refs;
    enum member_kind kind;
    /* A task of a runtime with 0 workers: it runs only while the host
     * drives the loop (named in join's laggard message). */
    _Atomic bool hosted;
    /* Used only by the join that detached the member. */
    bool finished;
    bool skip; /* a duplicate thread: counted once */
    pthread_t thread;
    /* Inside this allocation (after the extra bytes of
     * qf__coord_member_new_ext), or NULL for join's extra threads. */
    const char *name;
};

/* Where a member's extra bytes start: aligned to 8, enough for pointers
 * and 64-bit atomics (what a task holds); not max_align_t's 16, which
 * would cost padding in every task. */
#define MEMBER_EXTRA_ALIGN 8
#define MEMBER_EXTRA_OFF                                                                           \
    ((sizeof(qf_coord_member) + MEMBER_EXTRA_ALIGN - 1) & ~(size_t)(MEMBER_EXTRA_ALIGN - 1))

struct qf_coord_action {
    qf_coord_action_fn fn;
    void *arg;
    /* Under c->lock. */
    struct qf_coord_action *prev, *next;
    uint32_t ran;  /* key of the last epoch it was claimed for */
    uint16_t busy; /* runs in progress (pins the list node); at most one per
                    * thread running stop work, so 16 bits are plenty */
    bool removed;
    bool orphan; /* removed from inside itself: freed when busy drops to 0 */
    /* 40 bytes: one runner's action fits glibc's 48-byte chunk. */
};

struct qf_coord {
    /* Read by every should_stop: its own cache line, with the key of the
     * last settled epoch that check_stop reads next to it. */
    _Alignas(64) _Atomic uint32_t word;
    _Atomic uint32_t settled;
    _Atomic uint32_t joined;

    _Alignas(64) qf_eventcount ec;
    /* eventfds, -1 until first asked for: stop_fd is readable while a
     * stop is in effect (qf_coord_stop_fd); join_fd is made readable by a
     * stop or a member's end while a driven join (join_driven) sleeps in
     * poll(2) instead of on ec. */
    _Atomic int stop_fd;
    _Atomic int join_fd;
    _Atomic uint32_t driven_joins;
    qf_waitlist wakers;
    _Atomic uint32_t done_inflight;
    _Atomic uint64_t next_id;
    uint32_t clean_mask;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* busy / inflight dropped, for waiters */
    /* Under lock. */
    qf_status *recorded;
    uint64_t dropped;
    struct qf_coord_member *members_head, *members_tail;
    struct qf_coord_action *actions_head, *actions_tail;
    unsigned inflight; /* stop actions running, all threads */
    unsigned waiters;  /* threads in pthread_cond_wait on cond */
};

/* ------------------------------------------------------------------------
 * Small helpers
 */

static uint32_t key_of(uint32_t w)
{
    return w & ~(uint32_t)SLEEPERS;
}

static uint32_t load_word(const qf_coord *c)
{
    return atomic_load_explicit(&((qf_coord *)c)->word, memory_order_acquire);
}

uint32_t qf__coord_word(const qf_coord *c)
{
    return load_word(c);
}

static bool is_clean(const qf_coord *c, qf_code code)
{
    if (code == QF_OK)
        return true;
    return qf_code_is_valid(code) && (c->clean_mask & (1u << code));
}

/* A frame per stop action running on this thread (innermost first). */
struct frame {
    const qf_coord *c;
    const qf_coord_action *a;
    struct frame *prev;
};
static _Thread_local struct frame *tl_frames;

static unsigned own_frames(const qf_coord *c)
{
    unsigned n = 0;
    for (struct frame *f = tl_frames; f; f = f->prev)
        n += f->c == c;
    return n;
}

static bool running_here(const qf_coord_action *a)
{
    for (struct frame *f = tl_frames; f; f = f->prev)
        if (f->a == a)
            return true;
    return false;
}

static void action_unlink_locked(qf_coord *c, qf_coord_action *a)
{
    QF__ASSERT_MUTEX_HELD(&c->lock);
    if (a->prev)
        a->prev->next = a->next;
    else
        c->actions_head = a->next;
    if (a->next)
        a->next->prev = a->prev;
    else
        c->actions_tail = a->prev;
}

/* Run a claimed action (busy and inflight already counted) with the mutex
 * released; returns with the mutex held and the action possibly freed. */
static void run_claimed_locked(qf_coord *c, qf_coord_action *a)
{
    QF__ASSERT_MUTEX_HELD(&c->lock);
    struct frame fr = {c, a, tl_frames};
    pthread_mutex_unlock(&c->lock);
    tl_frames = &fr;
    a->fn(a->arg);
    tl_frames = fr.prev;
    pthread_mutex_lock(&c->lock);
    a->busy--;
    c->inflight--;
    if (c->waiters)
        pthread_cond_broadcast(&c->cond);
}

/* ------------------------------------------------------------------------
 * Stop work
 */

static void run_stop_work(qf_coord *c, uint32_t key)
{
    /* Wakers first and outside the mutex: their functions may call back
     * into the coordinator. The key check keeps a stale runner from waking
     * the next epoch's wakers, except in the window the header documents. */
    if (key_of(load_word(c)) == key)
        qf_waitlist_wake(&c->wakers, INT32_MAX);
#ifdef QF_RACE_WIDENING
    /* Let the woken retire before the actions run (a retiring queue runner
     * must not withdraw an action this epoch has not run: spec 134). */
    for (int i = 0; i < 20; i++)
        sched_yield();
#endif

    pthread_mutex_lock(&c->lock);
    bool complete = true;
    qf_coord_action *a = c->actions_head;
    while (a) {
        /* Under the mutex the key can only change by clear_stop, which
         * holds it too: a claim made here is for a live stopped epoch. */
        if (key_of(atomic_load_explicit(&c->word, memory_order_acquire)) != key) {
            complete = false;
            break;
        }
        if (a->ran == key || a->removed) {
            a = a->next;
            continue;
        }
        a->ran = key;
        a->busy++;
        c->inflight++;
        run_claimed_locked(c, a);
        /* busy pinned the node, so a->next is the live successor. */
        qf_coord_action *next = a->next;
        if (a->busy == 0 && a->orphan) {
            action_unlink_locked(c, a);
            free(a);
        }
        a = next;
    }
    /* Release: pairs with the acquire in settle(); a thread that skips the
     * work because of this store sees the actions' effects. */
    if (complete && key_of(atomic_load_explicit(&c->word, memory_order_acquire)) == key)
        atomic_store_explicit(&c->settled, key, memory_order_release);
    pthread_mutex_unlock(&c->lock);
}

/* Called by every non-signal path that observed `w` with STOP set. */
static void settle(qf_coord *c, uint32_t w)
{
    uint32_t key = key_of(w);
    if (atomic_load_explicit(&c->settled, memory_order_acquire) != key)
        run_stop_work(c, key);
}

/* Make an eventfd readable (async-signal-safe: one write(2); errno kept
 * by the callers that need it). A full counter (EAGAIN) is readable
 * already. */
static void fd_signal(int fd)
{
    if (fd < 0)
        return;
    uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof(one));
    (void)r;
}

/* Wake a driven join sleeping in poll(2). seq_cst load: pairs with the
 * driven join's seq_cst increment of driven_joins before its look, so
 * either the join sees the change or this sees the join. */
static void wake_driven_join(qf_coord *c)
{
    if (atomic_load_explicit(&c->driven_joins, memory_order_seq_cst))
        fd_signal(atomic_load_explicit(&c->join_fd, memory_order_acquire));
}

/* The part of a stop that is async-signal-safe: wake the futex sleepers
 * (only if the old word says there are any), a thread in join, and a
 * driven join. */
static void wake_sleepers(qf_coord *c, uint32_t old)
{
    if (old & SLEEPERS)
        qf_futex_wake(&c->word, INT32_MAX);
    qf_eventcount_notify(&c->ec, true);
    wake_driven_join(c);
}

/* ------------------------------------------------------------------------
 * Lifecycle
 */

qf_code qf_coord_new(const qf_code *clean_codes, size_t n_clean, qf_coord **ret_c)
{
    if (!ret_c)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_new: ret_c is NULL");
    uint32_t mask = 1u << QF_OUT_OF_RANGE;
    if (clean_codes) {
        mask = 0;
        for (size_t i = 0; i < n_clean; i++) {
            if (!qf_code_is_valid(clean_codes[i]))
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "qf_coord_new: clean-stop code %d is not a canonical code",
                                    (int)clean_codes[i]);
            if (clean_codes[i] != QF_OK)
                mask |= 1u << clean_codes[i];
        }
    }
    size_t size = (sizeof(qf_coord) + 63) & ~(size_t)63;
    qf_coord *c = aligned_alloc(64, size);
    if (!c)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_new: out of memory");
    memset(c, 0, sizeof(*c));
    atomic_init(&c->word, 0);
    atomic_init(&c->settled, 0);
    atomic_init(&c->joined, 0);
    atomic_init(&c->done_inflight, 0);
    atomic_init(&c->next_id, 0);
    atomic_init(&c->stop_fd, -1);
    atomic_init(&c->join_fd, -1);
    atomic_init(&c->driven_joins, 0);
    qf_eventcount_init(&c->ec);
    qf_waitlist_init(&c->wakers);
    c->clean_mask = mask;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    *ret_c = c;
    return QF_OK;
}

static void member_unref(qf_coord_member *m)
{
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
        free(m); /* the name (and any extra bytes) are inside */
}

void qf_coord_free(qf_coord *c)
{
    if (!c)
        return;
    /* A member_done whose store join has seen may still be notifying. */
    for (unsigned i = 0; atomic_load_explicit(&c->done_inflight, memory_order_acquire); i++) {
        if (i < 1000)
            qf__cpu_relax();
        else
            sched_yield();
    }
    for (qf_coord_member *m = c->members_head, *n; m; m = n) {
        n = m->next;
        member_unref(m);
    }
    for (qf_coord_action *a = c->actions_head, *n; a; a = n) {
        n = a->next;
        free(a);
    }
    qf_status_free(c->recorded);
    int fd = atomic_load_explicit(&c->stop_fd, memory_order_relaxed);
    if (fd >= 0)
        close(fd);
    fd = atomic_load_explicit(&c->join_fd, memory_order_relaxed);
    if (fd >= 0)
        close(fd);
    qf_waitlist_destroy(&c->wakers);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ------------------------------------------------------------------------
 * Stop flag
 */

/* The bad-input answer of calls given a NULL coordinator: a static message
 * (no formatting), so it also suits calls that are otherwise cheap. */
static qf_code null_coord(const char *msg)
{
    return qf__set_error_static(QF_INVALID_ARGUMENT, msg);
}

bool qf_coord_should_stop(const qf_coord *c)
{
    /* Async-signal-safe: no error is recorded for a NULL coordinator. */
    return c && (load_word(c) & STOP);
}

bool qf_coord_check_stop(qf_coord *c)
{
    if (!c) {
        null_coord("qf_coord_check_stop: coordinator (c) is NULL");
        return false;
    }
    uint32_t w = load_word(c);
    if (!(w & STOP))
        return false;
    settle(c, w);
    return true;
}

qf_code qf_coord_request_stop(qf_coord *c, qf_status *st)
{
    qf_code code = qf_status_code(st);
    if (!c) {
        qf_status_free(st); /* always taken */
        return null_coord("qf_coord_request_stop: coordinator (c) is NULL");
    }
    if (!qf_code_is_valid(code)) { /* qf_status_new() never makes one */
        qf_status_free(st);
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_request_stop: st has code %d, not a canonical qf_code",
                            (int)code);
    }
    bool clean = is_clean(c, code);

    pthread_mutex_lock(&c->lock);
    if (!clean && atomic_load_explicit(&c->joined, memory_order_relaxed)) {
        /* spec 121: nobody is left to report it to; hand it back. */
        pthread_mutex_unlock(&c->lock);
        qf_set_error(code, "%s", qf_status_message(st));
        qf_status_free(st);
        return code;
    }
    /* The one RMW that requests the stop. seq_cst: release for
     * should_stop's acquire, and a total order with the event count's
     * fences so a join about to sleep cannot miss it. */
    uint32_t old = atomic_fetch_or_explicit(&c->word, STOP, memory_order_seq_cst);
    if (!(old & STOP)) {
        if (!clean) {
            c->recorded = st; /* spec 109-110: first of the epoch */
            st = NULL;
        }
        /* Under the mutex, like clear_stop's drain: the fd cannot be
         * left readable in the next epoch by this request. */
        fd_signal(atomic_load_explicit(&c->stop_fd, memory_order_acquire));
    } else if (!clean) {
        c->dropped++; /* spec 111 */
    }
    pthread_mutex_unlock(&c->lock);
    qf_status_free(st); /* NULL when recorded */

    if (!(old & STOP))
        wake_sleepers(c, old);
    settle(c, old | STOP);
    return QF_OK;
}

void qf_coord_request_stop_from_signal(qf_coord *c)
{
    if (!c)
        return; /* async-signal-safe: nothing recorded */
    int saved = errno;
    uint32_t old = atomic_fetch_or_explicit(&c->word, STOP, memory_order_seq_cst);
    if (!(old & STOP)) {
        fd_signal(atomic_load_explicit(&c->stop_fd, memory_order_acquire));
        wake_sleepers(c, old);
    }
    errno = saved;
}

/* Drain an eventfd (nonblocking: EAGAIN when it was not readable). */
static void fd_drain(int fd)
{
    if (fd < 0)
        return;
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
}

/* The eventfd in *slot, made on first use. */
static int fd_get(_Atomic int *slot)
{
    int fd = atomic_load_explicit(slot, memory_order_acquire);
    if (fd >= 0)
        return fd;
    int nfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (nfd < 0)
        return -1;
    int expected = -1;
    if (!atomic_compare_exchange_strong_explicit(slot, &expected, nfd, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        close(nfd); /* another thread made it first */
        return expected;
    }
    return nfd;
}

qf_code qf_coord_stop_fd(qf_coord *c, int *ret_fd)
{
    if (!c || !ret_fd)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_coord_stop_fd: %s is NULL",
                            c ? "ret_fd" : "the coordinator");
    int fd = atomic_load_explicit(&c->stop_fd, memory_order_acquire);
    if (fd < 0) {
        /* Made under the mutex that request_stop and clear_stop hold
         * around their write and drain, so a stop already in effect is
         * written exactly once and a clear cannot be overtaken. */
        pthread_mutex_lock(&c->lock);
        fd = atomic_load_explicit(&c->stop_fd, memory_order_acquire);
        if (fd < 0) {
            fd = fd_get(&c->stop_fd);
            if (fd >= 0 && (atomic_load_explicit(&c->word, memory_order_seq_cst) & STOP))
                fd_signal(fd);
        }
        pthread_mutex_unlock(&c->lock);
        if (fd < 0)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_coord_stop_fd: eventfd: %s",
                                strerror(errno));
    }
    *ret_fd = fd;
    return QF_OK;
}

qf_code qf_coord_report(qf_coord *c, qf_code code)
{
    if (!qf_code_is_valid(code))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_report: code %d is not a canonical qf_code (0..%d); no stop "
                            "was requested",
                            (int)code, QF_CODE_COUNT - 1);
    if (!c)
        return null_coord("qf_coord_report: coordinator (c) is NULL");
    if (code == QF_OK)
        return QF_OK;
    qf_status *st =
        qf_last_code() == code ? qf_last_status() : qf_status_new(code, "%s", qf_code_name(code));
    qf_coord_request_stop(c, st);
    return code;
}

bool qf_coord_wait_for_stop(qf_coord *c, qf_deadline deadline)
{
    if (!c) {
        null_coord("qf_coord_wait_for_stop: coordinator (c) is NULL");
        return false;
    }
    uint32_t w = load_word(c);
    const uint32_t epoch = w >> EPOCH_SHIFT;
    for (;;) {
        if ((w >> EPOCH_SHIFT) != epoch)
            return true; /* stopped, and cleared since */
        if (w & STOP) {
            settle(c, w);
            return true;
        }
        if (deadline != QF_FOREVER && qf_deadline_passed(deadline))
            return false;
        if (qf__in_task()) {
            /* Sleeping here would hold a worker: a task registers a waker
             * (qf_coord_register_waker) instead. */
            qf__blocking_in_task_error("qf_coord_wait_for_stop");
            return false;
        }
        if (!(w & SLEEPERS)) {
            /* Announce the sleep in the word itself, so the requester's
             * fetch_or tells it whether to make the wake syscall. */
            if (!atomic_compare_exchange_weak_explicit(&c->word, &w, w | SLEEPERS,
                                                       memory_order_acquire, memory_order_acquire))
                continue;
            w |= SLEEPERS;
        }
        /* Sleeps only while the word still equals w: a stop between the
         * CAS and the syscall makes it return at once. */
        qf_futex_wait_until(&c->word, w, deadline);
        w = load_word(c);
    }
}

void qf_coord_clear_stop(qf_coord *c)
{
    if (!c) {
        null_coord("qf_coord_clear_stop: coordinator (c) is NULL");
        return;
    }
    for (;;) {
        uint32_t w = load_word(c);
        if (w & STOP)
            settle(c, w); /* finish the epoch's stop work first */
        pthread_mutex_lock(&c->lock);
        w = atomic_load_explicit(&c->word, memory_order_acquire);
        if (w & STOP) {
            if (atomic_load_explicit(&c->settled, memory_order_relaxed) != key_of(w)) {
                /* A stop (from a signal) slipped in after our check. */
                pthread_mutex_unlock(&c->lock);
                continue;
            }
            if (own_frames(c) == 0 && c->inflight > 0) {
                /* Actions of this epoch still running elsewhere. From
                 * inside an action we do not wait: two actions clearing
                 * on two threads would wait for each other. */
                c->waiters++;
                pthread_cond_wait(&c->cond, &c->lock);
                c->waiters--;
                pthread_mutex_unlock(&c->lock);
                continue;
            }
            /* Before the epoch advances: a request of the next epoch
             * writes the fd after its fetch_or, so this drain cannot eat
             * it (a request from a signal handler that raced with this
             * clear may still leave the fd readable; documented). */
            fd_drain(atomic_load_explicit(&c->stop_fd, memory_order_acquire));
            uint32_t next = ((w >> EPOCH_SHIFT) + 1) << EPOCH_SHIFT;
            /* acq_rel: the resets below are published by the mutex; the
             * release here orders the epoch change after the stop work
             * for anyone reading the word. */
            while (!atomic_compare_exchange_weak_explicit(&c->word, &w, next, memory_order_acq_rel,
                                                          memory_order_acquire))
                next = ((w >> EPOCH_SHIFT) + 1) << EPOCH_SHIFT;
            atomic_store_explicit(&c->settled, 0, memory_order_relaxed);
        }
        qf_status_free(c->recorded);
        c->recorded = NULL;
        c->dropped = 0;
        atomic_store_explicit(&c->joined, 0, memory_order_release);
        pthread_mutex_unlock(&c->lock);
        return;
    }
}

qf_code qf_coord_raise_requested_exception(qf_coord *c, qf_status **ret_status)
{
    if (!c)
        return null_coord("qf_coord_raise_requested_exception: coordinator (c) is NULL");
    pthread_mutex_lock(&c->lock);
    qf_status *copy = c->recorded ? qf_status_copy(c->recorded) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (!copy)
        return QF_OK;
    qf_code code = qf_set_error(qf_status_code(copy), "%s", qf_status_message(copy));
    if (ret_status)
        *ret_status = copy;
    else
        qf_status_free(copy);
    return code;
}

bool qf_coord_joined(const qf_coord *c)
{
    if (!c) {
        null_coord("qf_coord_joined: coordinator (c) is NULL");
        return false;
    }
    return atomic_load_explicit(&((qf_coord *)c)->joined, memory_order_acquire) != 0;
}

/* ------------------------------------------------------------------------
 * Stop actions and wakers
 */

qf_code qf_coord_add_stop_action(qf_coord *c, qf_coord_action_fn fn, void *arg,
                                 qf_coord_action **ret_action)
{
    if (!c)
        return null_coord("qf_coord_add_stop_action: coordinator (c) is NULL");
    if (!fn)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_add_stop_action: fn is NULL");
    qf_coord_action *a = calloc(1, sizeof(*a));
    if (!a)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED,
                                    "qf_coord_add_stop_action: out of memory");
    a->fn = fn;
    a->arg = arg;
    if (ret_action)
        *ret_action = a;

    pthread_mutex_lock(&c->lock);
    a->prev = c->actions_tail;
    if (c->actions_tail)
        c->actions_tail->next = a;
    else
        c->actions_head = a;
    c->actions_tail = a;
    /* Linking and the claim for a stop in effect happen in one critical
     * section: a stop-work scan either finds the action already claimed
     * or has not passed it yet. */
    uint32_t w = atomic_load_explicit(&c->word, memory_order_acquire);
    if (w & STOP) {
        a->ran = key_of(w);
        a->busy++;
        c->inflight++;
        run_claimed_locked(c, a);
        if (a->busy == 0 && a->orphan) {
            action_unlink_locked(c, a);
            free(a);
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (w & STOP)
        settle(c, w);
    return QF_OK;
}

void qf_coord_remove_stop_action(qf_coord *c, qf_coord_action *a)
{
    if (!a)
        return;
    if (!c) { /* the record is the coordinator's: leave it to qf_coord_free() */
        null_coord("qf_coord_remove_stop_action: coordinator (c) is NULL");
        return;
    }
    pthread_mutex_lock(&c->lock);
    a->removed = true;
    if (running_here(a)) {
        /* Waiting for busy == 0 would wait for ourselves. */
        a->orphan = true;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    while (a->busy) {
        c->waiters++;
        pthread_cond_wait(&c->cond, &c->lock);
        c->waiters--;
    }
    action_unlink_locked(c, a);
    pthread_mutex_unlock(&c->lock);
    free(a);
}

bool qf_coord_register_waker(qf_coord *c, qf_waker *w)
{
    if (!c || !w) {
        null_coord(!c ? "qf_coord_register_waker: coordinator (c) is NULL"
                      : "qf_coord_register_waker: waker (w) is NULL");
        return false;
    }
    /* register ends with a seq_cst fence: this load cannot be satisfied
     * from before the link became visible. Either the stop's wake (which
     * takes the list lock after its fetch_or) finds the waker, or this
     * load sees STOP. */
    qf_waitlist_register(&c->wakers, w);
    uint32_t s = atomic_load_explicit(&c->word, memory_order_seq_cst);
    if (!(s & STOP))
        return true;
    bool withdrawn = qf_waitlist_cancel(&c->wakers, w);
    settle(c, s);
    return !withdrawn;
}

bool qf_coord_cancel_waker(qf_coord *c, qf_waker *w)
{
    if (!c || !w) {
        null_coord(!c ? "qf_coord_cancel_waker: coordinator (c) is NULL"
                      : "qf_coord_cancel_waker: waker (w) is NULL");
        return false;
    }
    return qf_waitlist_cancel(&c->wakers, w);
}

/* ------------------------------------------------------------------------
 * Members
 */

/* One allocation: the record, `extra` bytes at MEMBER_EXTRA_OFF (when
 * asked for), then the name, so a member costs a single heap chunk. */
static qf_coord_member *member_alloc(qf_coord *c, enum member_kind kind, const char *name,
                                     const char *prefix, uint32_t refs, size_t extra)
{
    char buf[48];
    uint64_t id = atomic_fetch_add_explicit(&c->next_id, 1, memory_order_relaxed);
    if (!name) {
        snprintf(buf, sizeof(buf), "%s-%llu", prefix, (unsigned long long)id);
        name = buf;
    }
    size_t name_off = extra ? MEMBER_EXTRA_OFF + extra : sizeof(qf_coord_member);
    size_t len = strlen(name) + 1;
    if (extra > SIZE_MAX / 2 || len > SIZE_MAX / 2)
        return NULL;
    qf_coord_member *m = calloc(1, name_off + len);
    if (!m)
        return NULL;
    char *copy = (char *)m + name_off;
    memcpy(copy, name, len);
    m->name = copy;
    m->c = c;
    m->kind = kind;
    atomic_init(&m->done, 0);
    atomic_init(&m->refs, refs);
    return m;
}

static void member_link(qf_coord *c, qf_coord_member *m)
{
    pthread_mutex_lock(&c->lock);
    m->next = NULL;
    if (c->members_tail)
        c->members_tail->next = m;
    else
        c->members_head = m;
    c->members_tail = m;
    pthread_mutex_unlock(&c->lock);
}

void qf_coord_member_done(qf_coord_member *m)
{
    if (!m)
        return;
    qf_coord *c = m->c;
    /* Counted before the release store: a join that sees `done` also sees
     * this increment, so qf_coord_free waits for the notify below. */
    atomic_fetch_add_explicit(&c->done_inflight, 1, memory_order_relaxed);
    atomic_store_explicit(&m->done, 1, memory_order_release);
    qf_eventcount_notify(&c->ec, true); /* a full fence first */
    wake_driven_join(c);
    member_unref(m);
    atomic_fetch_sub_explicit(&c->done_inflight, 1, memory_order_release);
}

qf_code qf_coord_member_new(qf_coord *c, const char *name, qf_coord_member **ret_m)
{
    if (!c)
        return null_coord("qf_coord_member_new: coordinator (c) is NULL");
    if (!ret_m)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_member_new: ret_m is NULL");
    /* Two references: the caller's handle and the registered set. */
    qf_coord_member *m = member_alloc(c, MEMBER_TASK, name, "member", 2, 0);
    if (!m)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_member_new: out of memory");
    member_link(c, m);
    *ret_m = m;
    return QF_OK;
}

qf_code qf__coord_member_new_ext(qf_coord *c, const char *name, size_t extra,
                                 qf_coord_member **ret_m, void **ret_extra, const char **ret_name)
{
    /* Three references: the handle, the registered set, the extra's owner. */
    qf_coord_member *m = member_alloc(c, MEMBER_TASK, name, "member", 3, extra ? extra : 1);
    if (!m)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_member_new: out of memory");
    *ret_extra = (char *)m + MEMBER_EXTRA_OFF;
    *ret_name = m->name;
    member_link(c, m);
    *ret_m = m;
    return QF_OK;
}

void qf__coord_member_release(qf_coord_member *m)
{
    if (m)
        member_unref(m);
}

void qf__coord_member_mark_hosted(qf_coord_member *m)
{
    if (m)
        atomic_store_explicit(&m->hosted, true, memory_order_relaxed);
}

/* Thread exit hooks: a thread-specific value listing the members the
 * thread reports at its end. glibc runs the destructor both on return
 * from the start routine and on pthread_exit. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int exit_key_err;

static void exit_hook(void *p)
{
    for (qf_coord_member *m = p, *n; m; m = n) {
        n = m->tls_next;
        qf_coord_member_done(m);
    }
}

static void make_exit_key(void)
{
    exit_key_err = pthread_key_create(&exit_key, exit_hook);
}

/* Make the calling thread report `m` (holding one reference) at its end. */
static bool hook_current_thread(qf_coord_member *m)
{
    pthread_once(&exit_once, make_exit_key);
    if (exit_key_err)
        return false;
    m->tls_next = pthread_getspecific(exit_key);
    return pthread_setspecific(exit_key, m) == 0;
}

qf_code qf_coord_register_thread(qf_coord *c, pthread_t t, const char *name)
{
    if (!c)
        return null_coord("qf_coord_register_thread: coordinator (c) is NULL");
    bool self = pthread_equal(t, pthread_self());
    qf_coord_member *m = member_alloc(c, self ? MEMBER_THREAD_HOOKED : MEMBER_THREAD_FOREIGN, name,
                                      "thread", self ? 2 : 1, 0);
    if (!m)
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED,
                                    "qf_coord_register_thread: out of memory");
    m->thread = t;
    if (self && !hook_current_thread(m)) {
        /* No exit hook: join will join it like a foreign thread. */
        m->kind = MEMBER_THREAD_FOREIGN;
        atomic_store_explicit(&m->refs, 1, memory_order_relaxed);
    }
    member_link(c, m);
    return QF_OK;
}

struct trampoline {
    qf_coord_member *m;
    void *(*fn)(void *);
    void *arg;
};

static void *thread_main(void *p)
{
    struct trampoline t = *(struct trampoline *)p;
    free(p);
    if (hook_current_thread(t.m))
        return t.fn(t.arg); /* the exit hook reports the end */
    void *r = t.fn(t.arg);
    qf_coord_member_done(t.m);
    return r;
}

qf_code qf_coord_thread_create(qf_coord *c, const char *name, void *(*fn)(void *), void *arg,
                               pthread_t *ret_thread)
{
    if (!c)
        return null_coord("qf_coord_thread_create: coordinator (c) is NULL");
    if (!fn || !ret_thread)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_thread_create: fn or ret_thread is NULL");
    /* References: the registered set and the thread's exit hook. */
    qf_coord_member *m = member_alloc(c, MEMBER_THREAD_HOOKED, name, "thread", 2, 0);
    struct trampoline *tr = m ? malloc(sizeof(*tr)) : NULL;
    if (!tr) {
        free(m); /* the name is inside */
        return qf__set_error_static(QF_RESOURCE_EXHAUSTED, "qf_coord_thread_create: out of memory");
    }
    tr->m = m;
    tr->fn = fn;
    tr->arg = arg;
    pthread_t t;
    int err = pthread_create(&t, NULL, thread_main, tr);
    if (err) {
        free(tr);
        free(m);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "qf_coord_thread_create: pthread_create: %s",
                            strerror(err));
    }
    /* The thread may already have ended: its record stays valid (the
     * set's reference), and join will see it done. */
    m->thread = t;
    member_link(c, m);
    *ret_thread = t;
    return QF_OK;
}

/* ------------------------------------------------------------------------
 * join
 */

void qf_coord_join_report_clear(qf_coord_join_report *r)
{
    if (!r)
        return;
    qf_status_free(r->status);
    for (size_t i = 0; r->finished && i < r->n_finished; i++)
        free(r->finished[i]);
    for (size_t i = 0; r->running && i < r->n_running; i++)
        free(r->running[i]);
    free(r->finished);
    free(r->running);
    memset(r, 0, sizeof(*r));
}

/* pthread_timedjoin_np takes CLOCK_REALTIME; the grace deadline is
 * monotonic. Convert the remaining time per call and re-check the
 * monotonic deadline after a timeout, so a wall-clock step can at worst
 * lengthen one wait. (pthread_clockjoin_np would avoid the conversion,
 * but ThreadSanitizer does not intercept it and would lose the join's
 * happens-before edge.) */
static int timedjoin_mono(pthread_t t, qf_deadline deadline)
{
    if (deadline == QF_FOREVER)
        return pthread_join(t, NULL);
    for (;;) {
        int64_t left = deadline - qf_now_ns();
        if (left <= 0)
            return ETIMEDOUT;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + left % 1000000000;
        ts.tv_sec += (time_t)(left / 1000000000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        int r = pthread_timedjoin_np(t, NULL, &ts);
        if (r != ETIMEDOUT)
            return r;
    }
}

/* Whether `m` has finished, without blocking (except to reap a hooked
 * thread that has already reported its end). */
static bool member_poll(qf_coord_member *m)
{
    if (m->finished || m->skip)
        return true;
    switch (m->kind) {
    case MEMBER_TASK:
        m->finished = atomic_load_explicit(&m->done, memory_order_acquire) != 0;
        break;
    case MEMBER_THREAD_HOOKED:
        if (atomic_load_explicit(&m->done, memory_order_acquire)) {
            /* It ran its exit hook; what remains of its exit is short. */
            pthread_join(m->thread, NULL);
            m->finished = true;
        }
        break;
    case MEMBER_THREAD_FOREIGN:
        /* EBUSY: still running. Anything else (joined, or not joinable)
         * means there is nothing left to wait for. */
        m->finished = pthread_tryjoin_np(m->thread, NULL) != EBUSY;
        break;
    }
    return m->finished;
}

static void member_name(const qf_coord_member *m, char *buf, size_t cap, const char **out)
{
    if (m->name) {
        *out = m->name;
    } else {
        snprintf(buf, cap, "thread-%zu", m->extra_index);
        *out = buf;
    }
}

/* Names of the members with finished == want, or NULL when out of memory. */
static char **collect_names(qf_coord_member **ms, size_t n, bool want, size_t count)
{
    if (count == 0)
        return NULL;
    char **names = calloc(count, sizeof(*names));
    if (!names)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n && k < count; i++) {
        if (ms[i]->skip || ms[i]->finished != want)
            continue;
        char buf[48];
        const char *name;
        member_name(ms[i], buf, sizeof(buf), &name);
        names[k] = strdup(name);
        if (!names[k]) {
            while (k--)
                free(names[k]);
            free(names);
            return NULL;
        }
        k++;
    }
    return names;
}

/* The names of the members still running, separated by single spaces
 * (spec 117), in a new string; NULL when out of memory. */
static char *running_names(qf_coord_member **ms, size_t n)
{
    size_t len = 1;
    char buf[48];
    const char *name;
    for (size_t i = 0; i < n; i++) {
        if (ms[i]->skip || ms[i]->finished)
            continue;
        member_name(ms[i], buf, sizeof(buf), &name);
        len += strlen(name) + 1;
    }
    char *names = malloc(len), *p = names;
    for (size_t i = 0; names && i < n; i++) {
        if (ms[i]->skip || ms[i]->finished)
            continue;
        member_name(ms[i], buf, sizeof(buf), &name);
        p += sprintf(p, "%s%s", p == names ? "" : " ", name);
    }
    if (names)
        *p = '\0';
    return names;
}

/* "... (tasks of a runtime with 0 workers ...)" when a laggard is one:
 * the usual reason such a task lags is that nobody drives its loop. */
static const char *hosted_hint(qf_coord_member **ms, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ms[i]->skip && !ms[i]->finished &&
            atomic_load_explicit(&ms[i]->hosted, memory_order_relaxed))
            return " (tasks of a runtime with 0 workers run only while the host drives its "
                   "loop: join with qf_runtime_join_coord())";
    return "";
}

/* QF_COORD_LAGGARD_PREFIX + names (spec 117), and the hint when it applies. */
static qf_status *laggard_status(qf_coord_member **ms, size_t n)
{
    char *names = running_names(ms, n);
    qf_status *st =
        qf_status_new(QF_DEADLINE_EXCEEDED, "%s%s%s", QF_COORD_LAGGARD_PREFIX,
                      names ? names : "(names lost: out of memory)", hosted_hint(ms, n));
    free(names);
    return st;
}

/* join_until's deadline passed before any stop. */
static qf_status *still_running_status(const char *what, qf_coord_member **ms, size_t n)
{
    char *names = running_names(ms, n);
    qf_status *st =
        qf_status_new(QF_DEADLINE_EXCEEDED,
                      "%s: the deadline passed before a stop was requested; still "
                      "running: %s%s",
                      what, names ? names : "(names lost: out of memory)", hosted_hint(ms, n));
    free(names);
    return st;
}

/* How one join waits, and for how long. */
typedef struct join_args {
    const char *what; /* the public call, for messages */
    const pthread_t *extra;
    size_t n_extra;
    /* until: `deadline` bounds the whole call; else the grace period
     * starts when join observes a stop (TensorFlow's join). */
    bool until;
    qf_deadline deadline;
    double grace_secs;
    bool ignore_live;
    qf_coord_join_report *report;
    const qf__join_driver *drv; /* NULL: sleep on the event count */
} join_args;

/* Give the members join took back to the registered set, in front and in
 * their order, for the next join: those still running keep their place,
 * those that finished are released (hooked threads among them have been
 * reaped). */
static void members_put_back(qf_coord *c, qf_coord_member **ms, size_t n_reg)
{
    qf_coord_member *head = NULL, *tail = NULL;
    for (size_t i = 0; i < n_reg; i++) {
        qf_coord_member *m = ms[i];
        if (m->finished && !m->skip) {
            member_unref(m);
            continue;
        }
        m->next = NULL;
        if (tail)
            tail->next = m;
        else
            head = m;
        tail = m;
    }
    if (!head)
        return;
    pthread_mutex_lock(&c->lock);
    tail->next = c->members_head;
    if (!c->members_head)
        c->members_tail = tail;
    c->members_head = head;
    pthread_mutex_unlock(&c->lock);
}

static qf_code join_impl(qf_coord *c, const join_args *a)
{
    const qf__join_driver *drv = a->drv;
    if (qf__in_task())
        return qf__blocking_in_task_error(a->what);
    int jfd = -1;
    if (drv) {
        /* One driven join at a time: the join fd has one reader. */
        uint32_t zero = 0;
        if (!atomic_compare_exchange_strong_explicit(&c->driven_joins, &zero, 1,
                                                     memory_order_seq_cst, memory_order_relaxed))
            return qf_set_error(QF_FAILED_PRECONDITION,
                                "%s: another thread is already driving a join of this coordinator",
                                a->what);
        jfd = fd_get(&c->join_fd);
        if (jfd < 0) {
            atomic_store_explicit(&c->driven_joins, 0, memory_order_seq_cst);
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "%s: eventfd: %s", a->what, strerror(errno));
        }
    }

    /* Take the registered set (spec 120 empties it; members registered
     * from now on are left for the next join). */
    pthread_mutex_lock(&c->lock);
    qf_coord_member *head = c->members_head, *tail = c->members_tail;
    c->members_head = c->members_tail = NULL;
    pthread_mutex_unlock(&c->lock);
    size_t n_reg = 0;
    for (qf_coord_member *m = head; m; m = m->next)
        n_reg++;

    size_t n_extra = a->n_extra;
    qf_coord_member **ms = malloc((n_reg + n_extra + 1) * sizeof(*ms));
    qf_coord_member *xs = n_extra ? calloc(n_extra, sizeof(*xs)) : NULL;
    if (!ms || (n_extra && !xs)) {
        free(ms);
        free(xs);
        if (head) { /* put them back in front, order kept */
            pthread_mutex_lock(&c->lock);
            tail->next = c->members_head;
            if (!c->members_head)
                c->members_tail = tail;
            c->members_head = head;
            pthread_mutex_unlock(&c->lock);
        }
        if (drv)
            atomic_store_explicit(&c->driven_joins, 0, memory_order_seq_cst);
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "%s: out of memory", a->what);
    }
    size_t n = 0;
    for (qf_coord_member *m = head; m; m = m->next)
        ms[n++] = m;
    for (size_t i = 0; i < n_extra; i++) {
        qf_coord_member *x = &xs[i];
        x->c = c;
        x->kind = MEMBER_THREAD_FOREIGN;
        x->thread = a->extra[i];
        x->extra_index = i;
        ms[n++] = x;
    }
    /* A thread registered twice, or also passed as extra, is one member
     * (a set union in TensorFlow, spec 115) and must be joined once. */
    size_t n_members = 0;
    for (size_t i = 0; i < n; i++) {
        ms[i]->finished = false;
        ms[i]->skip = false;
        if (ms[i]->kind != MEMBER_TASK) {
            for (size_t j = 0; j < i; j++) {
                if (!ms[j]->skip && ms[j]->kind != MEMBER_TASK &&
                    pthread_equal(ms[i]->thread, ms[j]->thread)) {
                    ms[i]->skip = true;
                    break;
                }
            }
        }
        n_members += !ms[i]->skip;
    }

    bool stopped = false, grace_expired = false, timed_out = false;
    qf_code drv_rc = QF_OK;
    qf_deadline limit = a->until ? a->deadline : QF_FOREVER;
    for (;;) {
        /* Prepare before looking: a member_done or a stop after this
         * ticket (or, driven, after this drain) ends the wait below at
         * once. */
        uint32_t ticket = 0;
        if (drv)
            fd_drain(jfd);
        else
            ticket = qf_eventcount_prepare(&c->ec);
        size_t left = 0;
        qf_coord_member *foreign = NULL;
        bool wakeable = false;
        for (size_t i = 0; i < n; i++) {
            if (member_poll(ms[i]))
                continue;
            left++;
            if (ms[i]->kind == MEMBER_THREAD_FOREIGN) {
                if (!foreign)
                    foreign = ms[i];
            } else {
                wakeable = true;
            }
        }
        bool look_again = false;
        if (left > 0 && !stopped) {
            uint32_t w = load_word(c);
            if (w & STOP) {
                stopped = true;
                if (!a->until) /* spec 117: the grace period starts now */
                    limit = qf_deadline_in_s(a->grace_secs);
                settle(c, w); /* actions may be what unblocks the members */
                look_again = true;
            }
        }
        if (left == 0 || look_again || qf_deadline_passed(limit)) {
            if (!drv)
                qf_eventcount_cancel(&c->ec);
            if (left == 0)
                break;
            if (look_again)
                continue;
            if (stopped)
                grace_expired = true;
            else
                timed_out = true;
            break;
        }
        if (drv) {
            /* Run what is runnable; sleep (poll(2) on the runtime's fd and
             * the join fd) only when something can announce its end. */
            bool ran = false;
            drv_rc = drv->drive(drv->ctx, wakeable, limit, jfd, &ran);
            if (drv_rc != QF_OK)
                break;
            if (wakeable || ran)
                continue;
        } else if (wakeable) {
            qf_eventcount_wait_until(&c->ec, ticket, limit);
            continue;
        } else {
            qf_eventcount_cancel(&c->ec);
        }
        /* Only threads that cannot announce their end are left: join them.
         * Before a stop that is a plain pthread_join (documented: a later
         * stop is noticed when it returns); after, bounded by the limit. */
        int r = timedjoin_mono(foreign->thread, stopped || a->until ? limit : QF_FOREVER);
        if (r != ETIMEDOUT)
            foreign->finished = true;
    }
    if (drv)
        atomic_store_explicit(&c->driven_joins, 0, memory_order_seq_cst);

    size_t n_finished = 0, n_running = 0;
    for (size_t i = 0; i < n; i++) {
        if (ms[i]->skip)
            continue;
        if (ms[i]->finished)
            n_finished++;
        else
            n_running++;
    }

    if (drv_rc != QF_OK || timed_out) {
        /* The join did not happen: nothing is recorded as joined, and the
         * members still running stay registered for the next join. */
        qf_code code = drv_rc;
        qf_status *st = NULL;
        if (timed_out) {
            st = still_running_status(a->what, ms, n);
            code = qf_set_error(QF_DEADLINE_EXCEEDED, "%s", qf_status_message(st));
        } else {
            st = qf_last_status();
        }
        if (a->report) {
            memset(a->report, 0, sizeof(*a->report));
            a->report->code = code;
            a->report->status = st;
            st = NULL;
            a->report->n_members = n_members;
            a->report->n_finished = n_finished;
            a->report->finished = collect_names(ms, n, true, n_finished);
            a->report->n_running = n_running;
            a->report->running = collect_names(ms, n, false, n_running);
        }
        qf_status_free(st);
        members_put_back(c, ms, n_reg);
        free(xs);
        free(ms);
        return code;
    }

    /* A stop that came in while the members were finishing (or with no
     * members at all) still gets its stop work from this call. */
    uint32_t w_end = load_word(c);
    if (w_end & STOP)
        settle(c, w_end);

    /* spec 119-120: the recorded status wins; then the laggards. */
    pthread_mutex_lock(&c->lock);
    atomic_store_explicit(&c->joined, 1, memory_order_release);
    qf_status *result = c->recorded ? qf_status_copy(c->recorded) : NULL;
    uint64_t dropped = c->dropped;
    pthread_mutex_unlock(&c->lock);

    if (!result && n_running && !a->ignore_live)
        result = laggard_status(ms, n);
    qf_code code = QF_OK;
    if (result)
        code = qf_set_error(qf_status_code(result), "%s", qf_status_message(result));

    if (a->report) {
        qf_coord_join_report *r = a->report;
        memset(r, 0, sizeof(*r));
        r->code = code;
        r->status = result;
        result = NULL;
        r->stop_requested = stopped || (w_end & STOP);
        r->grace_expired = grace_expired;
        r->n_members = n_members;
        r->n_finished = n_finished;
        r->finished = collect_names(ms, n, true, n_finished);
        r->n_running = n_running;
        r->running = collect_names(ms, n, false, n_running);
        r->n_dropped = dropped;
    }
    qf_status_free(result);

    for (size_t i = 0; i < n_reg; i++)
        member_unref(ms[i]);
    free(xs);
    free(ms);
    return code;
}

qf_code qf_coord_join(qf_coord *c, const pthread_t *extra_threads, size_t n_extra,
                      double stop_grace_period_secs, bool ignore_live_threads,
                      qf_coord_join_report *ret_report)
{
    if (!c)
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_coord_join: the coordinator is NULL");
    if (n_extra && !extra_threads)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_join: extra_threads is NULL with n_extra > 0");
    if (qf__in_task())
        return qf__blocking_in_task_error("qf_coord_join");
    if (!(stop_grace_period_secs >= 0))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_join: stop_grace_period_secs must be >= 0 (got %g)",
                            stop_grace_period_secs);
    join_args a = {.what = "qf_coord_join",
                   .extra = extra_threads,
                   .n_extra = n_extra,
                   .grace_secs = stop_grace_period_secs,
                   .ignore_live = ignore_live_threads,
                   .report = ret_report};
    return join_impl(c, &a);
}

qf_code qf_coord_join_until(qf_coord *c, const pthread_t *extra_threads, size_t n_extra,
                            qf_deadline deadline, bool ignore_live_threads,
                            qf_coord_join_report *ret_report)
{
    if (!c)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_join_until: the coordinator is NULL");
    if (n_extra && !extra_threads)
        return qf__set_error_static(QF_INVALID_ARGUMENT,
                                    "qf_coord_join_until: extra_threads is NULL with n_extra > 0");
    if (deadline < QF_FOREVER)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_coord_join_until: deadline %lld is not a deadline (>= 0, or "
                            "QF_FOREVER)",
                            (long long)deadline);
    join_args a = {.what = "qf_coord_join_until",
                   .extra = extra_threads,
                   .n_extra = n_extra,
                   .until = true,
                   .deadline = deadline,
                   .ignore_live = ignore_live_threads,
                   .report = ret_report};
    return join_impl(c, &a);
}

qf_code qf__coord_join_driven(qf_coord *c, const char *what, bool until, qf_deadline deadline,
                              double grace_secs, bool ignore_live_threads,
                              qf_coord_join_report *ret_report, const qf__join_driver *drv)
{
    join_args a = {.what = what,
                   .until = until,
                   .deadline = deadline,
                   .grace_secs = grace_secs,
                   .ignore_live = ignore_live_threads,
                   .report = ret_report,
                   .drv = drv};
    return join_impl(c, &a);
}
