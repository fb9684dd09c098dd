/* qf_prefetch-impl.h - internal: asking for a cache line before writing it.
 *
 * A hand-off between cores writes lines that the other core read or wrote
 * last (a block a consumer freed and the producer fills next). A store to
 * such a line waits for the line to be fetched and the other copy to be
 * invalidated, and the next locked instruction (the ring's reservation)
 * waits for that store: measured here, most of a typed element's put.
 * A read prefetch brings the line in shared, so the store still waits for
 * the invalidation; PREFETCHW asks for it in the owned state at once.
 *
 * GCC's __builtin_prefetch(p, 1) emits PREFETCHW only when the target is
 * compiled for it (-mprfchw), which a distribution's generic x86-64 build
 * is not; so it is written out here. Not every x86-64 processor has it:
 * early 64-bit Intel ones (NetBurst) raise an invalid-opcode fault on it,
 * later Intel ones before Broadwell run it as a NOP. So it is used only
 * where CPUID says it exists (qf__prefetchw_ok, set at load by
 * qf_prefetch.c: 3DNowPrefetch, or AMD's 3DNow!), else the read
 * prefetch. A prefetch never faults on its address, so p may be any
 * address, also one past the end. */
#ifndef QF_PREFETCH_IMPL_H
#define QF_PREFETCH_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
/* Whether this processor has PREFETCHW: set by an early constructor
 * (qf_prefetch.c); read relaxed, since a program's own constructor may run
 * queues before it (then the read prefetch is used). */
extern _Atomic bool qf__prefetchw_ok;
#endif

static inline void qf__prefetch_for_write(const void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (atomic_load_explicit(&qf__prefetchw_ok, memory_order_relaxed)) {
        __asm__("prefetchw %0" ::"m"(*(const char *)p));
        return;
    }
#endif
    __builtin_prefetch(p, 1);
}

/* The first n lines (64 bytes each) from p, as qf__prefetch_for_write(),
 * with the processor's answer looked up once. */
static inline void qf__prefetch_lines_for_write(const void *p, size_t n)
{
    const char *c = p;
#if defined(__x86_64__) && defined(__GNUC__)
    if (atomic_load_explicit(&qf__prefetchw_ok, memory_order_relaxed)) {
        for (size_t i = 0; i < n; i++)
            __asm__("prefetchw %0" ::"m"(c[i * 64]));
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        __builtin_prefetch(c + i * 64, 1);
}

#endif
