/* qf_thread.c - a thread's slice and timer slack (see qf_thread.h).
 *
 * The slice is the fair scheduler's sched_runtime, read and written with
 * sched_getattr()/sched_setattr() (glibc has no wrappers: raw syscalls, and
 * the version-0 layout of struct sched_attr, which every kernel with the
 * calls accepts). Only SCHED_NORMAL and SCHED_BATCH threads have one: the
 * kernel ignores sched_runtime for SCHED_IDLE and the real-time classes. A
 * kernel before 6.12 accepts a fair thread's sched_runtime and ignores it,
 * so support is learned by reading the slice back.
 *
 * "The kernel's default" cannot be read directly: getattr reports the slice
 * in force, not whether the thread chose it, and the default moves with
 * the number of online CPUs. So the prefer call asks for the default first
 * (sched_runtime 0) and compares: a thread whose slice was the default gets
 * the default back (sched_runtime 0 again), whatever it is by then; one
 * with a slice of its own gets that value.
 *
 * Internal callers (the batcher's executor) use the quiet forms, which
 * record no error: they go on either way, and a thread's last error is the
 * last qflow call that failed, which theirs did not.
 */
#include "qf_thread.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qf_thread-impl.h"

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
#define FLAG_RESET_ON_FORK 0x01u

/* An error, recorded unless quiet. */
static qf_code fail(bool quiet, qf_code code, const char *fmt, const char *call, int err)
{
    if (!quiet)
        qf_set_error(code, fmt, call, err);
    return code;
}

static qf_code os_error(bool quiet, const char *call, int err)
{
    if (err == EPERM || err == EACCES)
        return fail(quiet, QF_PERMISSION_DENIED, "%s refused (a sandbox's policy?): errno %d", call,
                    err);
    return fail(quiet, QF_INTERNAL, "%s failed: errno %d", call, err);
}

static int32_t this_tid(void)
{
    return (int32_t)syscall(SYS_gettid);
}

static bool has_slice(uint32_t policy)
{
    return policy == POLICY_NORMAL || policy == POLICY_BATCH;
}

/* The raw prctl: glibc's returns int, and a slack is an unsigned long. */
static long get_slack(void)
{
    return syscall(SYS_prctl, PR_GET_TIMERSLACK, 0L, 0L, 0L, 0L);
}

static int set_slack(uint64_t ns)
{
    return (int)syscall(SYS_prctl, PR_SET_TIMERSLACK, (unsigned long)ns, 0L, 0L, 0L);
}

/* 0, or an errno (ENOSYS: a kernel without the call). */
static int get_attr(sched_attr0 *a)
{
    *a = (sched_attr0){0};
    return syscall(SYS_sched_getattr, 0, a, (unsigned)sizeof(*a), 0u) == 0 ? 0 : errno;
}

/* Set the calling thread's slice, keeping everything else `cur` holds;
 * 0 asks for the kernel's default. 0 or an errno. */
static int set_slice(const sched_attr0 *cur, uint64_t slice_ns)
{
    sched_attr0 a = {.size = sizeof(a),
                     .policy = cur->policy,
                     .flags = cur->flags & FLAG_RESET_ON_FORK,
                     .nice = cur->nice,
                     .runtime = slice_ns};
    return syscall(SYS_sched_setattr, 0, &a, 0u) == 0 ? 0 : errno;
}

/* Put the saved slice back (the default, or the thread's own value), if
 * the thread still has a policy with a slice. 0 or an errno. */
static int put_slice_back(const qf_thread_sched *saved)
{
    sched_attr0 cur;
    int err = get_attr(&cur);
    if (err || !has_slice(cur.policy))
        return err;
    return set_slice(&cur, saved->slice_was_default ? 0 : saved->slice_ns);
}

/* Give a fair thread `slice_ns`. Fills saved->slice_*; 0 or an errno;
 * a kernel without slices (none, or one that ignores sched_runtime) leaves
 * slice_changed 0 and is not an error. */
static int take_slice(uint64_t slice_ns, qf_thread_sched *saved)
{
    sched_attr0 cur, def;
    int err = get_attr(&cur);
    if (err == ENOSYS || (!err && !has_slice(cur.policy)))
        return 0;
    if (err)
        return err;
    if ((err = set_slice(&cur, 0)) || (err = get_attr(&def)))
        return err;
    saved->slice_ns = cur.runtime;
    saved->slice_was_default = cur.runtime == def.runtime;
    if (def.runtime == 0) /* a kernel before 6.12 reports no slice */
        return 0;
    if ((err = set_slice(&cur, slice_ns)) || (err = get_attr(&def))) {
        (void)put_slice_back(saved);
        return err;
    }
    if (def.runtime != slice_ns) {
        (void)put_slice_back(saved);
        return 0;
    }
    saved->slice_changed = 1;
    return 0;
}

qf_code qf__thread_prefer_latency(int64_t slice_ns, qf_thread_sched *ret_saved, bool quiet)
{
    if (slice_ns < QF_THREAD_SLICE_MIN_NS || slice_ns > QF_THREAD_SLICE_MAX_NS) {
        if (!quiet)
            qf_set_error(QF_INVALID_ARGUMENT,
                         "qf_thread_prefer_latency: slice of %lld ns is outside the kernel's "
                         "%lld..%lld ns",
                         (long long)slice_ns, (long long)QF_THREAD_SLICE_MIN_NS,
                         (long long)QF_THREAD_SLICE_MAX_NS);
        return QF_INVALID_ARGUMENT;
    }
    long slack = get_slack();
    if (slack < 0)
        return os_error(quiet, "prctl(PR_GET_TIMERSLACK)", errno);
    qf_thread_sched saved = {.tid = this_tid(), .timer_slack_ns = (uint64_t)slack};
    int err = take_slice((uint64_t)slice_ns, &saved);
    if (err)
        return os_error(quiet, "sched_setattr", err);
    if (set_slack((uint64_t)QF_THREAD_LATENCY_TIMER_SLACK_NS) != 0) {
        err = errno;
        if (saved.slice_changed)
            (void)put_slice_back(&saved);
        return os_error(quiet, "prctl(PR_SET_TIMERSLACK)", err);
    }
    if (ret_saved)
        *ret_saved = saved;
    return QF_OK;
}

qf_code qf__thread_restore_sched(const qf_thread_sched *saved, bool quiet)
{
    if (!saved) {
        if (!quiet)
            qf_set_error(QF_INVALID_ARGUMENT, "qf_thread_restore_sched: NULL saved");
        return QF_INVALID_ARGUMENT;
    }
    if (saved->tid != this_tid()) {
        if (!quiet)
            qf_set_error(QF_FAILED_PRECONDITION,
                         "qf_thread_restore_sched: saved on thread %d, called on another (%d): "
                         "a thread restores only itself",
                         (int)saved->tid, (int)this_tid());
        return QF_FAILED_PRECONDITION;
    }
    /* PR_SET_TIMERSLACK with 0 means "the thread's default", not 0: a
     * slack saved as 0 (a real-time thread's) needs no restoring. */
    if (saved->timer_slack_ns)
        (void)set_slack(saved->timer_slack_ns);
    int err = saved->slice_changed ? put_slice_back(saved) : 0;
    return err ? os_error(quiet, "sched_setattr", err) : QF_OK;
}

qf_code qf_thread_prefer_latency(int64_t slice_ns, qf_thread_sched *ret_saved)
{
    return qf__thread_prefer_latency(slice_ns, ret_saved, false);
}

qf_code qf_thread_restore_sched(const qf_thread_sched *saved)
{
    return qf__thread_restore_sched(saved, false);
}
