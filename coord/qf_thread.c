/* qf_thread.c - a thread's slice and timer slack (see qf_thread.h).
 *
 * The slice is the fair scheduler's sched_runtime, read and written with
 * sched_getattr()/sched_setattr() (glibc has no wrappers: raw syscalls, and
 * the version-0 layout of struct sched_attr, which every kernel with the
 * calls accepts). A kernel before 6.12 accepts a fair thread's sched_runtime
 * and ignores it, so support is learned by reading the slice back.
 *
 * "The kernel's default" cannot be read: getattr reports the base slice in
 * force, not whether the thread chose it. So a restore first asks for the
 * default (sched_runtime 0) and sets the saved value explicitly only when
 * the default is not what the thread had.
 */
#include "qf_thread.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qf_status-impl.h"

/* The version-0 struct sched_attr (48 bytes). */
typedef struct sched_attr0 {
    uint32_t size;
    uint32_t policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime;
    uint64_t deadline;
    uint64_t period;
} sched_attr0;

#define POLICY_NORMAL 0u
#define POLICY_BATCH 3u
#define POLICY_IDLE 5u
#define FLAG_RESET_ON_FORK 0x01u

static int32_t this_tid(void)
{
    return (int32_t)syscall(SYS_gettid);
}

static bool fair_policy(uint32_t policy)
{
    return policy == POLICY_NORMAL || policy == POLICY_BATCH || policy == POLICY_IDLE;
}

static qf_code sched_error(const char *call, int err)
{
    if (err == ENOSYS)
        return qf_set_error(QF_UNIMPLEMENTED, "%s: this kernel has no such system call", call);
    if (err == EPERM || err == EACCES)
        return qf_set_error(QF_PERMISSION_DENIED, "%s refused (a sandbox's policy?): errno %d",
                            call, err);
    return qf_set_error(QF_INTERNAL, "%s failed: errno %d", call, err);
}

static qf_code get_attr(sched_attr0 *a)
{
    *a = (sched_attr0){0};
    if (syscall(SYS_sched_getattr, 0, a, (unsigned)sizeof(*a), 0u) != 0)
        return sched_error("sched_getattr", errno);
    return QF_OK;
}

/* Set the calling thread's slice, keeping everything else `cur` holds;
 * 0 asks for the kernel's default. */
static qf_code set_slice(const sched_attr0 *cur, uint64_t slice_ns)
{
    sched_attr0 a = {.size = sizeof(a),
                     .policy = cur->policy,
                     .flags = cur->flags & FLAG_RESET_ON_FORK,
                     .nice = cur->nice,
                     .runtime = slice_ns};
    if (syscall(SYS_sched_setattr, 0, &a, 0u) != 0)
        return sched_error("sched_setattr", errno);
    return QF_OK;
}

/* Put the calling thread's slice back to slice_ns, as the kernel's default
 * when that is what the default gives (see the top of the file). */
static qf_code put_slice_back(uint64_t slice_ns)
{
    sched_attr0 cur;
    qf_code rc = get_attr(&cur);
    if (rc == QF_OK)
        rc = set_slice(&cur, 0);
    if (rc == QF_OK)
        rc = get_attr(&cur);
    if (rc == QF_OK && cur.runtime != slice_ns)
        rc = set_slice(&cur, slice_ns);
    return rc;
}

qf_code qf_thread_prefer_latency(int64_t slice_ns, qf_thread_sched *ret_saved)
{
    if (slice_ns < QF_THREAD_SLICE_MIN_NS || slice_ns > QF_THREAD_SLICE_MAX_NS)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "qf_thread_prefer_latency: slice of %lld ns is outside the kernel's "
                            "%lld..%lld ns",
                            (long long)slice_ns, (long long)QF_THREAD_SLICE_MIN_NS,
                            (long long)QF_THREAD_SLICE_MAX_NS);
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (slack < 0)
        return sched_error("prctl(PR_GET_TIMERSLACK)", errno);
    sched_attr0 cur;
    qf_code rc = get_attr(&cur);
    if (rc != QF_OK)
        return rc;
    qf_thread_sched saved = {this_tid(), 0, cur.runtime, (uint64_t)slack};
    if (fair_policy(cur.policy)) {
        if ((rc = set_slice(&cur, (uint64_t)slice_ns)) != QF_OK)
            return rc;
        sched_attr0 now;
        if ((rc = get_attr(&now)) != QF_OK || now.runtime != (uint64_t)slice_ns) {
            (void)put_slice_back(cur.runtime); /* where it did change */
            if (rc != QF_OK)
                return rc;
            return qf_set_error(QF_UNIMPLEMENTED,
                                "qf_thread_prefer_latency: this kernel has no per-thread "
                                "slices (Linux 6.12 or later has them)");
        }
        saved.slice_changed = 1;
    }
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)QF_THREAD_LATENCY_TIMER_SLACK_NS, 0, 0, 0) != 0) {
        int err = errno;
        if (saved.slice_changed)
            (void)qf_thread_restore_sched(&saved);
        return sched_error("prctl(PR_SET_TIMERSLACK)", err);
    }
    if (ret_saved)
        *ret_saved = saved;
    return QF_OK;
}

qf_code qf_thread_restore_sched(const qf_thread_sched *saved)
{
    if (!saved)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_thread_restore_sched: NULL saved");
    if (saved->tid != this_tid())
        return qf_set_error(
            QF_FAILED_PRECONDITION,
            "qf_thread_restore_sched: saved on thread %d, called on another (%d): a "
            "thread restores only itself",
            (int)saved->tid, (int)this_tid());
    /* PR_SET_TIMERSLACK with 0 would mean "the default", not 0: a slack
     * saved as 0 (a real-time thread's) needs no restoring. */
    if (saved->timer_slack_ns)
        (void)prctl(PR_SET_TIMERSLACK, (unsigned long)saved->timer_slack_ns, 0, 0, 0);
    return saved->slice_changed ? put_slice_back(saved->slice_ns) : QF_OK;
}
