/* qf_fence.c - the heavy half of the asymmetric fence (qf_fence-impl.h). */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qf_fence-impl.h"

_Atomic bool qf__fence_asym;
#ifdef QF_TSAN
_Atomic unsigned qf__fence_tsan_word;
#endif

static int membarrier(int cmd)
{
    return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static void decide(void)
{
#ifndef QF_TSAN
    /* A process whose queues mostly park (few elements per sleep) pays a
     * membarrier per park for nothing it needs: let it opt out. */
    const char *mode = getenv("QF_FENCES");
    if (mode && strcmp(mode, "symmetric") == 0)
        return;
    int cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        return;
    /* Registration is per process and must precede the first use. */
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        return;
    /* A filter could allow registration and refuse the command itself:
     * try it once, so the heavy fence can never fail later. */
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
        return;
    atomic_store_explicit(&qf__fence_asym, true, memory_order_release);
#endif
}

void qf__fence_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, decide);
}

void qf__fence_heavy(void)
{
#ifdef QF_TSAN
    atomic_fetch_add_explicit(&qf__fence_tsan_word, 0, memory_order_seq_cst);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
    if (atomic_load_explicit(&qf__fence_asym, memory_order_relaxed) &&
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
        /* Registered, so this cannot fail short of a kernel bug; a fence
         * that did not happen must not pass silently. */
        abort();
    }
}
