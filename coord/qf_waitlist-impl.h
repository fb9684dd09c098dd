/* qf_waitlist-impl.h - internal: wait list operations whose ordering is
 * the caller's business. Never installed.
 */
#ifndef QF_WAITLIST_IMPL_H
#define QF_WAITLIST_IMPL_H

#include "qf_waker.h"

/**
 * qf__waitlist_register_unfenced() - qf_waitlist_register() without its
 * closing full fence. Only for a waiter that next runs a seq_cst
 * read-modify-write of one word W (a queue setting its wait bit; other
 * atomics may come between) before its seq_cst re-check, where every
 * notifier of the list RMWs W, or loads it seq_cst, after making the
 * condition true and before it looks at the count or the list. The
 * notifier's look at W then either reads the waiter's RMW or a later one
 * (every write of W being an RMW, it synchronizes with it and sees the
 * registration) or precedes it in the seq_cst order (and the waiter's
 * re-check sees the condition). A full fence costs as much as the RMW
 * again, once per wait of a parked task. Same arguments, blocking and
 * errors as qf_waitlist_register().
 */
void qf__waitlist_register_unfenced(qf_waitlist *wl, qf_waker *w);

/**
 * qf__waitlist_count_sc() - qf_waitlist_count() by a seq_cst load, for a
 * notifier whose change of the condition is a seq_cst RMW of another word
 * and that has no fence before its look at the count. Against a waiter
 * that registers (qf_waitlist_register(), whose full fence follows the
 * count's change) and then re-checks with a seq_cst load: a count read
 * from before the registration precedes the waiter's fence in the seq_cst
 * order, and so does the notifier's RMW before it, which the re-check
 * then sees. A relaxed load gives no such order (C11; on AArch64 without
 * LSE atomics the load can pass the RMW's store). Wait-free; on x86 the
 * same instruction as a relaxed load.
 */
uint32_t qf__waitlist_count_sc(qf_waitlist *wl);

/* Inlined forms for the queues' per-element paths, whose callers know
 * the pointers are not NULL (a call each was about 10 instructions of a
 * pointer queue's put or take, measured with callgrind). */

/* qf_waitlist_count(): relaxed, a hint after the caller's own ordering. */
static inline uint32_t qf__waitlist_count_fast(const qf_waitlist *wl)
{
    return atomic_load_explicit(&((qf_waitlist *)wl)->qf__count, memory_order_relaxed);
}

/* qf_waker_state(): acquire. */
static inline uint32_t qf__waker_state_fast(const qf_waker *w)
{
    return atomic_load_explicit(&((qf_waker *)w)->qf__state, memory_order_acquire);
}

/* qf_waker_consumed(): the call only when a wake is under way (CLAIMED),
 * which it waits out; else what it would do then. */
static inline void qf__waker_consumed_fast(qf_waker *w)
{
    if (qf__waker_state_fast(w) == QF_WAKER_CLAIMED) {
        qf_waker_consumed(w);
        return;
    }
    __atomic_store_n(&w->qf__woken_from, NULL, __ATOMIC_RELAXED);
}

#endif
