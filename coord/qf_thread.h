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
 * qf_serve_run() does both for its thread while it runs, and the batcher's
 * timer thread for itself (qf_serve_set_exec_slice() in qf_serve.h).
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
 * qf_thread_restore_sched(). Caller-allocated; its members are read only by
 * that call. */
typedef struct qf_thread_sched {
    int32_t tid;             /* the thread it belongs to */
    int32_t slice_changed;   /* 0: the slice was left alone */
    uint64_t slice_ns;       /* the slice in force before */
    uint64_t timer_slack_ns; /* the timer slack before */
} qf_thread_sched;

/**
 * qf_thread_prefer_latency() - give the calling thread a scheduling slice
 * of slice_ns and a timer slack of QF_THREAD_LATENCY_TIMER_SLACK_NS, so that
 * its wake-ups preempt CPU-bound threads with longer slices and its timed
 * waits end on time.
 *
 * Only the calling thread changes; its policy, nice value and
 * reset-on-fork flag stay. A thread of a real-time, deadline or sched_ext
 * policy keeps its slice (it is not the fair scheduler's to give); only its
 * timer slack is set. Threads it creates afterwards inherit both settings.
 *
 * Ownership:   *ret_saved (may be NULL: nothing to restore later) is the
 *              caller's; it is written only on QF_OK.
 * Blocking:    never (three or four system calls).
 * Concurrency: any thread, for itself. Async-signal-safe: no.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for slice_ns outside
 *              [QF_THREAD_SLICE_MIN_NS, QF_THREAD_SLICE_MAX_NS];
 *              QF_UNIMPLEMENTED on a kernel without per-thread slices
 *              (before Linux 6.12) or without sched_setattr();
 *              QF_PERMISSION_DENIED when a sandbox (seccomp, a container's
 *              policy) refuses the calls. Nothing changes on failure.
 */
QF_API qf_code qf_thread_prefer_latency(int64_t slice_ns, qf_thread_sched *ret_saved);

/**
 * qf_thread_restore_sched() - put back the slice and timer slack that
 * `saved` (from qf_thread_prefer_latency() on this thread) records. A thread
 * that had the kernel's default slice gets the default back, so it follows
 * later changes of the system-wide setting again.
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
