/* qf_thread-impl.h - internal: the thread calls of qf_thread.h with a
 * choice of recording errors. quiet: return the code only, leaving the
 * thread's last error as it was (for callers that go on either way). */
#ifndef QF_THREAD_IMPL_H
#define QF_THREAD_IMPL_H

#include <stdbool.h>

#include "qf_thread.h"

/* A slice the kernel accepts (QF_THREAD_SLICE_MIN_NS..MAX_NS), or 0 where a
 * setter takes 0 as "leave the threads alone". */
static inline bool qf__slice_or_zero_ok(int64_t slice_ns)
{
    return slice_ns == 0 ||
           (slice_ns >= QF_THREAD_SLICE_MIN_NS && slice_ns <= QF_THREAD_SLICE_MAX_NS);
}

qf_code qf__thread_prefer_latency(int64_t slice_ns, qf_thread_sched *ret_saved, bool quiet);
qf_code qf__thread_restore_sched(const qf_thread_sched *saved, bool quiet);

#endif
