/* qf_fence-impl.h - internal: asymmetric fences for Dekker-style hand-offs.
 *
 * Implementation notes.
 *
 * The queues' fast paths publish an index and then look at a state word
 * for sleepers; a waiter sets its bit in the state word and then looks at
 * the index. Each side needs a full fence between its store and its load,
 * or both can miss each other and the waiter sleeps through. The fast side
 * runs once per element, the waiting side once per sleep, so qflow makes
 * the fence asymmetric:
 *
 *   fast side:   store; qf__fence_light(); load     (a compiler barrier)
 *   slow side:   store; qf__fence_heavy(); load     (membarrier(2))
 *
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) makes every running thread
 * of the process execute a full barrier (and a thread that is not running
 * passes one when it is scheduled), so at the heavy fence each light side
 * is split at some point: what it stored before is visible to the slow
 * side's load, and its loads after see what the slow side stored before.
 * This is the pairing liburcu's membarrier flavour and folly's
 * asymmetricHeavyBarrier rely on.
 *
 * When the kernel (or a seccomp filter, or valgrind) refuses membarrier,
 * or under ThreadSanitizer (which models fences, not membarrier), both
 * fences are plain seq_cst fences: correct, a little slower on the fast
 * path. The choice is made once, before the first queue exists.
 */
#ifndef QF_FENCE_IMPL_H
#define QF_FENCE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "qf_tsan-impl.h"

/* Set once by qf__fence_init(); read on every fast path. */
extern _Atomic bool qf__fence_asym;
#ifdef QF_TSAN
extern _Atomic unsigned qf__fence_tsan_word;
#endif

/* Decide (once, thread-safe) whether the asymmetric pair is available.
 * Call before the first fast path can run: queue creation does. */
void qf__fence_init(void);

static inline void qf__fence_light(void)
{
#ifdef QF_TSAN
    /* GCC's TSan does not instrument fences (-Wtsan); a seq_cst RMW is a
     * full barrier on the hardware and an edge TSan understands. */
    atomic_fetch_add_explicit(&qf__fence_tsan_word, 0, memory_order_seq_cst);
#else
    if (__builtin_expect(atomic_load_explicit(&qf__fence_asym, memory_order_relaxed), 1))
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* A full fence whatever the mode: what both sides of a symmetric pair
 * run (under TSan the RMW form qf__fence_light() uses). */
static inline void qf__fence_full(void)
{
#ifdef QF_TSAN
    atomic_fetch_add_explicit(&qf__fence_tsan_word, 0, memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* The slow side's fence: a system call when asymmetric. */
void qf__fence_heavy(void);

#endif
