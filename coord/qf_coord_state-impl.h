/* qf_coord_state-impl.h - internal to coord/: the Coordinator's record and
 * what its files (qf_coordinator.c, qf_coord_stop.c, qf_coord_signal.c,
 * qf_coord_actions.c, qf_coord_members.c, qf_coord_join.c) share.
 *
 * Only the .c files of coord/ include it: the layers above see the Coordinator through
 * qf_coordinator.h and qf_coordinator-impl.h. The protocol each field
 * takes part in is described in the file that writes it.
 */
#ifndef QF_COORD_STATE_IMPL_H
#define QF_COORD_STATE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_coordinator-impl.h"
#include "qf_coordinator.h"
#include "qf_member_mem-impl.h"
#include "qf_status-impl.h"
#include "qf_waker.h"

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
    uint8_t mem_class; /* qf__member_mem_alloc()'s class of this record */
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
    bool orphan;       /* removed from inside itself: freed when busy drops to 0 */
    uint8_t mem_class; /* qf__member_mem_alloc()'s class of the record */
    /* 48 bytes: one block of the member memory's smallest class (64). */
};

/* A stop action's record, zeroed, and its end. From the member memory
 * (qf_member_mem-impl.h), not malloc(): a start of 10,000 QueueRunners
 * makes 10,000 of them, and from malloc()'s heap, trimmed when the runners
 * before had ended, they faulted in again at each start (README, Measured,
 * "Which thread decides"). NULL when memory is refused. */
static inline qf_coord_action *qf__action_alloc(void)
{
    uint8_t cls;
    qf_coord_action *a = qf__member_mem_alloc(sizeof(*a), &cls);
    if (a)
        a->mem_class = cls;
    return a;
}

static inline void qf__action_free(qf_coord_action *a)
{
    if (a)
        qf__member_mem_free(a, a->mem_class);
}

struct qf_coord {
    /* Read by every should_stop: its own cache line, with the key of the
     * last settled epoch that check_stop reads next to it. */
    _Alignas(64) _Atomic uint32_t word;
    _Atomic uint32_t settled;
    _Atomic uint32_t joined;

    _Alignas(64) qf_eventcount ec;
    /* eventfds, -1 until first asked for: stop_fd is readable while a
     * stop is in effect (qf_coord_stop_fd); join_fd is made readable by a
     * stop or a member's end while a driven join (qf_coord_join.c) sleeps in
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

static inline uint32_t key_of(uint32_t w)
{
    return w & ~(uint32_t)SLEEPERS;
}

static inline uint32_t load_word(const qf_coord *c)
{
    return atomic_load_explicit(&((qf_coord *)c)->word, memory_order_acquire);
}

/* The bad-input answer of calls given a NULL coordinator: a static message
 * (no formatting), so it also suits calls that are otherwise cheap. */
static inline qf_code null_coord(const char *msg)
{
    return qf__set_error_static(QF_INVALID_ARGUMENT, msg);
}

/* ------------------------------------------------------------------------
 * Stop work (qf_coord_actions.c)
 */

/* Wake the wakers and run the stop actions of the stopped epoch `key`. */
void qf__coord_run_stop_work(qf_coord *c, uint32_t key);

/* Stop actions of `c` running on the calling thread. */
unsigned qf__coord_own_frames(const qf_coord *c);

/* Called by every non-signal path that observed `w` with STOP set. The
 * acquire pairs with the release store of `settled` at the end of
 * qf__coord_run_stop_work: skipping the work, it sees the actions' effects. */
static inline void settle(qf_coord *c, uint32_t w)
{
    uint32_t key = key_of(w);
    if (atomic_load_explicit(&c->settled, memory_order_acquire) != key)
        qf__coord_run_stop_work(c, key);
}

/* ------------------------------------------------------------------------
 * Eventfds and wake-ups (qf_coord_signal.c)
 */

/* Make an eventfd readable; async-signal-safe. */
void qf__coord_fd_signal(int fd);
/* Drain an eventfd (nonblocking). */
void qf__coord_fd_drain(int fd);
/* The eventfd in *slot, made on first use; -1 (errno set) on failure. */
int qf__coord_fd_get(_Atomic int *slot);
/* Wake a driven join sleeping in poll(2); async-signal-safe. */
void qf__coord_wake_driven_join(qf_coord *c);
/* The async-signal-safe part of a stop whose fetch_or returned `old`. */
void qf__coord_wake_sleepers(qf_coord *c, uint32_t old);

/* ------------------------------------------------------------------------
 * Members (qf_coord_members.c)
 */

/* Drop one reference; the last frees the record (name and extra inside). */
void qf__coord_member_unref(qf_coord_member *m);

#endif
