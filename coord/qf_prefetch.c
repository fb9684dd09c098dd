/* qf_prefetch.c - whether this processor has PREFETCHW (see
 * qf_prefetch-impl.h). */
#include "qf_prefetch-impl.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

_Atomic bool qf__prefetchw_ok;

/* Extended leaf 0x80000001: ECX bit 8 is 3DNowPrefetch (PREFETCHW on
 * Intel and AMD); EDX bit 31 is 3DNow!, whose AMD processors had PREFETCHW
 * before the ECX bit existed. At the first constructor priority a program
 * may use, so it runs before the program's own default-priority ones also
 * when the library is linked statically (its constructors then run in
 * link order, after the program's); one that runs earlier and uses a
 * queue reads false, a correct answer that only costs the faster
 * prefetch. */
__attribute__((constructor(101))) static void detect_prefetchw(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d))
        atomic_store_explicit(&qf__prefetchw_ok, (c & (1u << 8)) != 0 || (d & (1u << 31)) != 0,
                              memory_order_relaxed);
}
#endif
