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
 * is not; so it is written out here. Every x86-64 processor executes the
 * instruction (0F 0D /1): as the prefetch where it has one, as a NOP on
 * Intel processors before Broadwell. Elsewhere, the builtin. A prefetch
 * never faults, so p may be any address, also one past the end. */
#ifndef QF_PREFETCH_IMPL_H
#define QF_PREFETCH_IMPL_H

static inline void qf__prefetch_for_write(const void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __asm__("prefetchw %0" ::"m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

#endif
