/* qf_prefetch.c - whether this processor has PREFETCHW (see
 * qf_prefetch-impl.h). */
#include "qf_prefetch-impl.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

bool qf__prefetchw_ok;

/* Extended leaf 0x80000001: ECX bit 8 is 3DNowPrefetch (PREFETCHW on
 * Intel and AMD); EDX bit 31 is 3DNow!, whose AMD processors had PREFETCHW
 * before the ECX bit existed. Before main() and before any thread: the
 * flag is only read after. */
__attribute__((constructor)) static void detect_prefetchw(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d))
        qf__prefetchw_ok = (c & (1u << 8)) != 0 || (d & (1u << 31)) != 0;
}
#endif
