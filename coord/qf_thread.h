/* qf_thread.h - asking the kernel to run a latency-critical thread on time.
 *
 * On a busy machine a thread that sleeps most of the time (a batcher's
 * executor, an event loop, a timer) is not run the moment it wakes: Linux's
 * fair scheduler (EEVDF, Linux 6.6 and later) lets the thread on the CPU
 * finish its slice first unless the woken one's deadline comes sooner, and
 * a CPU-bound neighbour's slice is a millisecond or more. Since Linux 6.12
 * a thread may ask for a shorter slice of its own (sched_setattr()'s
 * sched_runtime; no privilege needed). Its deadlines then come sooner, so
 * its wake-ups preempt threads with longer slices, while its share of the
 * CPU stays what its nice value gives it: it runs more often, for less time
 * each turn. Timed waits end up to the thread's timer slack late (50 us by
 * default); a latency-critical thread wants that small too.
 *
 * qf_serve_run() does both for its thread while it runs
 * (qf_serve_set_exec_slice() in qf_serve.h changes or turns that off), and
 * a batcher's level-timeout thread does for itself (always 100 us).
 */
#ifndef QF_THREAD_H
#define QF_THREAD_H

#include <stdint.h>

#include "qf_export.h"
#include "qf_status.h"

QF_BEGIN_DECLS

/* The slices the kernel accepts, in ns (it clamps to these). */
#define QF_THREAD_SLICE_MIN_NS ((int64_t)100000)
#define QF_THREAD_SLICE_MAX_NS ((int64_t)100000000)
/* The timer slack qf_thread_prefer_latency() sets, in ns. */
#define QF_THREAD_LATENCY_TIMER_SLACK_NS ((int64_t)1000)

/* What a thread had before qf_thread_prefer_latency(), for
 * qf_thread_restore_sched(). Caller-allocated; filled by the prefer call.
 * slice_changed says whether the slice was set (a SCHED_NORMAL or
 * SCHED_BATCH thread on Linux 6.12 or later); the other members are for
 * the restore call only. */
typedef struct qf_thread_sched {
    int32_t tid;               /* the thread it belongs to */
    int32_t slice_changed;     /* 1: the slice was set; 0: left alone */
    int32_t slice_was_default; /* the thread followed the kernel's default */
    int32_t reserved0;
    uint64_t slice_ns;       /* the slice in force before */
    uint64_t timer_slack_ns; /* the timer slack before */
    uint64_t reserved[2];
} qf_thread_sched;

/**
 * qf_thread_prefer_latency() - give the calling thread a scheduling slice
 * of slice_ns and a timer slack of QF_THREAD_LATENCY_TIMER_SLACK_NS, so that
 * its wake-ups preempt CPU-bound threads with longer slices and its timed
 * waits end on time.
 *
 * Only the calling thread changes; its policy, nice value and
 * reset-on-fork flag stay. The slice is set where the kernel has one to
 * give: a SCHED_NORMAL or SCHED_BATCH thread on Linux 6.12 or later. On an
 * older kernel, or for a SCHED_IDLE, real-time or deadline thread, the
 * slice is left alone (ret_saved->slice_changed is 0) and only the timer
 * slack is set (the kernel ignores it for real-time and deadline threads,
 * whose timers have no slack). Not an error: the call does what this
 * thread and kernel allow.
 *
 * Threads created while it is in force inherit both the slice (unless the
 * thread has reset-on-fork) and the timer slack, which becomes their
 * default for good: a thread pool started later by code running on this
 * thread (a model's BLAS or OpenMP workers) would run with them. Start
 * such pools first, or keep this call away from threads that start them.
 *
 * Ownership:   *ret_saved (may be NULL: nothing to restore later) is the
 *              caller's; it is written only on QF_OK.
 * Blocking:    never (a few system calls).
 * Concurrency: any thread, for itself. Async-signal-safe: no.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for slice_ns outside
 *              [QF_THREAD_SLICE_MIN_NS, QF_THREAD_SLICE_MAX_NS];
 *              QF_PERMISSION_DENIED when a sandbox (seccomp, a container's
 *              policy) refuses the calls; QF_INTERNAL for another refusal.
 *              Nothing changes on failure.
 */
QF_API qf_code qf_thread_prefer_latency(int64_t slice_ns, qf_thread_sched *ret_saved);

/**
 * qf_thread_restore_sched() - put back the timer slack and the slice that
 * `saved` (from qf_thread_prefer_latency() on this thread) records. A
 * thread that followed the kernel's default slice follows it again (the
 * default moves with the number of online CPUs); one with a slice of its
 * own gets that value. A thread whose policy has since changed to one
 * without a slice (real-time, SCHED_IDLE) keeps what it has.
 *
 * Blocking:    never.  Concurrency: the thread `saved` belongs to.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL;
 *              QF_FAILED_PRECONDITION when called on another thread (nothing
 *              changes); QF_PERMISSION_DENIED or QF_INTERNAL when the kernel
 *              refuses the slice (the timer slack is restored either way).
 */
QF_API qf_code qf_thread_restore_sched(const qf_thread_sched *saved);

QF_END_DECLS

#endif
