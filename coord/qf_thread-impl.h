/* qf_thread-impl.h - internal: the thread calls of qf_thread.h with a
 * choice of recording errors. quiet: return the code only, leaving the
 * thread's last error as it was (for callers that go on either way). */
#ifndef QF_THREAD_IMPL_H
#define QF_THREAD_IMPL_H

#include <stdbool.h>

#include "qf_thread.h"

qf_code qf__thread_prefer_latency(int64_t slice_ns, qf_thread_sched *ret_saved, bool quiet);
qf_code qf__thread_restore_sched(const qf_thread_sched *saved, bool quiet);

#endif
