/* impl_qflow.h - what the qflow benchmark implementations share
 * (impl_qflow.c, impl_qflow_i64.c, impl_qflow_kinds.c). */
#ifndef IMPL_QFLOW_H
#define IMPL_QFLOW_H

#include "baseline.h"
#include "qflow.h"

/* 0 for QF_OK, -1 for `end` (the end-of-stream code the caller expects);
 * any other status stops the benchmark with `what` and the message. */
int bq_qflow_check(qf_code c, qf_code end, const char *what);
/* The bq_impl destroy and close of any qflow queue. */
void bq_qflow_destroy(bq *q);
void bq_qflow_close(bq *q);

/* The test knob (QFLOW_BENCH_SLOWDOWN, impl_qflow.c) for benchmarks that
 * call qflow's queues themselves (queue.tput.tasks): the filler values to
 * send before this call's own value (F - 1 on average per call, on this
 * thread; 0 without the knob), and the filler value, which no benchmark
 * sends otherwise and a consumer skips. */
int bq_qflow_fillers_now(void);
void *bq_qflow_filler(void);

#endif
