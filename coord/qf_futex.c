/* qf_futex.c - futex(2) wrappers. */
#include "qf_futex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "qf_status.h"
#include "qf_status-impl.h"
#include "qf_futex-impl.h"
#include "qf_lock-impl.h"

#ifndef NDEBUG
_Thread_local qf__held_locks qf__held;
#endif

qf_code qf_futex_wait_until(_Atomic uint32_t *word, uint32_t expected, qf_deadline deadline)
{
    return qf__futex_wait_bits(word, expected, FUTEX_BITSET_MATCH_ANY, deadline);
}

int qf__futex_wait_bits(_Atomic uint32_t *word, uint32_t expected, uint32_t bits,
                        qf_deadline deadline)
{
    struct timespec ts, *tsp = NULL;
    if (!word) /* the kernel would answer EFAULT: a caller's loop would spin */
        return qf__set_error_static(QF_INVALID_ARGUMENT, "qf_futex_wait_until: word is NULL");
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
                     tsp, NULL, bits);
    if (r == -1 && errno == ETIMEDOUT)
        return QF_DEADLINE_EXCEEDED;
    return QF_OK; /* woken, EAGAIN (value changed), EINTR: all "re-check" */
}

int qf_futex_wait(_Atomic uint32_t *word, uint32_t expected, qf_deadline deadline)
{
    return qf_futex_wait_until(word, expected, deadline);
}

int qf_futex_wake(_Atomic uint32_t *word, int n)
{
    if (!word || n <= 0)
        return 0; /* async-signal-safe: nothing recorded */
    long r =
        syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, NULL, NULL, 0);
    return r < 0 ? 0 : (int)r;
}

int qf__futex_wake_bits(_Atomic uint32_t *word, int n, uint32_t bits)
{
    long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, n, NULL,
                     NULL, bits);
    return r < 0 ? 0 : (int)r;
}
