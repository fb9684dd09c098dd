/* qf_futex.c - futex(2) wrappers. */
#include "qf_futex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "qf_status.h"

int qf_futex_wait(_Atomic uint32_t *word, uint32_t expected, qf_deadline deadline)
{
    struct timespec ts, *tsp = NULL;
    if (deadline != QF_FOREVER) {
        if (deadline <= 0 || qf_deadline_passed(deadline))
            return QF_DEADLINE_EXCEEDED;
        ts.tv_sec = deadline / 1000000000;
        ts.tv_nsec = deadline % 1000000000;
        tsp = &ts;
    }
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC timeout, which is
     * exactly the library's deadline convention: no conversion to a
     * relative timeout that would drift across retries. */
    long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected,
                     tsp, NULL, FUTEX_BITSET_MATCH_ANY);
    if (r == -1 && errno == ETIMEDOUT)
        return QF_DEADLINE_EXCEEDED;
    return 0; /* woken, EAGAIN (value changed), EINTR: all "re-check" */
}

int qf_futex_wake(_Atomic uint32_t *word, int n)
{
    long r =
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, NULL, NULL, 0);
    return r < 0 ? 0 : (int)r;
}
