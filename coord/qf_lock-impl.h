/* qf_lock-impl.h - internal: a small futex mutex and a CPU pause.
 *
 * Used only on slow paths (a wait list being linked while something is
 * about to sleep). Three states, after Drepper's "Futexes Are Tricky":
 * 0 free, 1 locked, 2 locked with possible sleepers. Spins briefly first,
 * because the critical sections it guards are a few pointer writes.
 *
 * Debug builds (no NDEBUG) also keep, per thread, the lock words the thread
 * took, so a `*_locked` helper can assert that its caller holds the lock
 * (QF__ASSERT_HELD). A table per thread rather than an owner field: the
 * word is part of installed structures (qf_waitlist) whose layout is ABI,
 * and the release build keeps the word alone. An entry a thread leaves
 * behind (a lock freed while held) only makes a check pass. Code that takes
 * the word its own way (the locked engine's engine_lock) reports it with
 * qf__lock_acquired(). A mutex of pthreads has no owner to read portably:
 * QF__ASSERT_MUTEX_HELD checks that some thread holds it.
 */
#ifndef QF_LOCK_IMPL_H
#define QF_LOCK_IMPL_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qf_futex.h"

static inline void qf__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Pauses before a wait for another thread's few steps (a waking thread's
 * wake function call, a consumer finishing a request) yields the CPU. When
 * that thread runs, its window is 1-3 us; when it does not, it is usually
 * because the waiter took its CPU (a task woken onto the waker's core
 * preempts it there), and then only a yield ends the wait. 1000 pauses
 * (12.5 us here) before the first yield put 15 us into every such wake
 * (task.wake.p50 24.6 us against 1.6 us for a thread's futex wake). */
#define QF__SPIN_BEFORE_YIELD 64

/* Step i (from 0) of such a wait: pause, then yield. */
static inline void qf__spin_then_yield(unsigned i)
{
    if (i < QF__SPIN_BEFORE_YIELD)
        qf__cpu_relax();
    else
        sched_yield();
}

#ifndef NDEBUG
/* Deeper than the library nests (a queue's lock inside a wait list's, say).
 * A thread that ever holds more stops being checked: from then on its
 * checks give every lock the benefit of the doubt. */
#define QF__HELD_MAX 16

typedef struct qf__held_locks {
    const void *at[QF__HELD_MAX];
    unsigned n;         /* entries of at[] in use */
    unsigned untracked; /* locks taken while at[] was full */
} qf__held_locks;

/* Defined once, in qf_futex.c: one table per thread for every translation
 * unit, since a lock taken in one file is released or checked in another. */
extern _Thread_local qf__held_locks qf__held;

static inline int qf__held_find(const _Atomic uint32_t *l)
{
    for (unsigned i = 0; i < qf__held.n; i++)
        if (qf__held.at[i] == (const void *)l)
            return (int)i;
    return -1;
}

/* True when this thread holds l (or has held more locks than are tracked). */
static inline bool qf__lock_held(const _Atomic uint32_t *l)
{
    return qf__held_find(l) >= 0 || qf__held.untracked > 0;
}

#define QF__ASSERT_HELD(l) assert(qf__lock_held(l) && "the caller must hold the lock")
/* Some thread holds m (trylock of a normal mutex is EBUSY for its owner too). */
#define QF__ASSERT_MUTEX_HELD(m)                                                                   \
    assert(pthread_mutex_trylock(m) == EBUSY && "the caller must hold the mutex")
#else
#define QF__ASSERT_HELD(l) ((void)0)
#define QF__ASSERT_MUTEX_HELD(m) ((void)0)
#endif

/* The calling thread has just taken l (debug builds note it). */
static inline void qf__lock_acquired(const _Atomic uint32_t *l)
{
#ifndef NDEBUG
    if (qf__held.n < QF__HELD_MAX)
        qf__held.at[qf__held.n++] = (const void *)l;
    else
        qf__held.untracked++;
#else
    (void)l;
#endif
}

/* The calling thread is about to release l. A lock missing from the table
 * was taken while it was full, or by code that does not report its locks:
 * nothing to drop. */
static inline void qf__lock_releasing(const _Atomic uint32_t *l)
{
#ifndef NDEBUG
    int i = qf__held_find(l);
    if (i >= 0)
        qf__held.at[i] = qf__held.at[--qf__held.n];
#else
    (void)l;
#endif
}

/* Take the lock word: a CAS, then `spin` pauses of polling before sleeping
 * on the futex (state 2: held with possible sleepers). With `backoff`, the
 * poll interval doubles up to 32 pauses: for locks whose critical sections
 * are short and hot (a queue engine's), where polling after every pause
 * keeps pulling the lock's cache line away from the holder, which then
 * stalls on its own release. */
static inline void qf__lock_word_spin(_Atomic uint32_t *l, int spin, bool backoff)
{
    uint32_t c = 0;
    if (atomic_compare_exchange_strong_explicit(l, &c, 1, memory_order_acquire,
                                                memory_order_relaxed))
        return;
    for (int spent = 0, d = 1; spent < spin; spent += d) {
        for (int k = 0; k < d; k++)
            qf__cpu_relax();
        if (backoff && d < 32)
            d *= 2;
        c = 0;
        if (atomic_load_explicit(l, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(l, &c, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
    }
    c = atomic_exchange_explicit(l, 2, memory_order_acquire);
    while (c != 0) {
        qf_futex_wait_until(l, 2, QF_FOREVER);
        c = atomic_exchange_explicit(l, 2, memory_order_acquire);
    }
}

static inline void qf__lock_word(_Atomic uint32_t *l)
{
    qf__lock_word_spin(l, 128, false);
}

static inline void qf__lock(_Atomic uint32_t *l)
{
    qf__lock_word(l);
    qf__lock_acquired(l);
}

/* qf__lock() for a lock whose holders' critical sections are short and
 * hot, taken by several cores at once (qf__lock_word_spin()'s backoff):
 * the locked engine's lock and the FIFO engine's req_lock. */
static inline void qf__lock_backoff(_Atomic uint32_t *l)
{
    qf__lock_word_spin(l, 128, true);
    qf__lock_acquired(l);
}

/* qf__lock_word()'s release: no held-lock record either (a fork handler
 * that takes every lock of a module uses the pair). */
static inline void qf__unlock_word(_Atomic uint32_t *l)
{
    if (atomic_exchange_explicit(l, 0, memory_order_release) == 2)
        qf_futex_wake(l, 1);
}

static inline void qf__unlock(_Atomic uint32_t *l)
{
    qf__lock_releasing(l);
    qf__unlock_word(l);
}

#endif
