/* qf_lock-impl.h - internal: a small futex mutex and a CPU pause.
 *
 * Used only on slow paths (a wait list being linked while something is
 * about to sleep). Three states, after Drepper's "Futexes Are Tricky":
 * 0 free, 1 locked, 2 locked with possible sleepers. Spins briefly first,
 * because the critical sections it guards are a few pointer writes.
 */
#ifndef QF_LOCK_IMPL_H
#define QF_LOCK_IMPL_H

#include <stdatomic.h>
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

static inline void qf__lock(_Atomic uint32_t *l)
{
    uint32_t c = 0;
    if (atomic_compare_exchange_strong_explicit(l, &c, 1, memory_order_acquire,
                                                memory_order_relaxed))
        return;
    for (int i = 0; i < 128; i++) {
        qf__cpu_relax();
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

static inline void qf__unlock(_Atomic uint32_t *l)
{
    if (atomic_exchange_explicit(l, 0, memory_order_release) == 2)
        qf_futex_wake(l, 1);
}

#endif
