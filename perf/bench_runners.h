/* bench_runners.h - what the runner benchmarks (bench_runners.c) share
 * with the thread-per-runner baseline (baseline_thread_per_runner.c).
 *
 * One repetition of one (impl, N) case runs in a fork()ed child, so the
 * peak RSS it reports belongs to that case alone. The child:
 *   1. gives freed heap back (malloc_trim), resets the peak RSS to the
 *      current RSS and records it as the base;
 *   2. calls the impl, which starts N runners feeding one queue of
 *      capacity RB_CAPACITY and hands the queue to rb_consume();
 *   3. rb_consume() drains on the calling thread, one element per call:
 *      until every runner's first element has arrived (delivery, not a
 *      call of its op), then a warm-up, then a timed window (throughput),
 *      then reads the peak RSS (growth over the base);
 *   4. the impl stops everything and times request-stop-to-join.
 *
 * Every runner r sends rb_value(r, 1), rb_value(r, 2), ... and produces
 * its next value only after the previous one was enqueued, so while the
 * queue is open the consumer must see each runner's values exactly in
 * that order, without gaps: rb_consume() checks it (a lost, duplicated or
 * misrouted element ends the program). */
#ifndef BENCH_RUNNERS_H
#define BENCH_RUNNERS_H

#include <stdatomic.h>
#include <stdint.h>

#include "bench.h"

#define RB_CAPACITY 1024

typedef struct rb_cfg {
    const char *impl;
    unsigned runners;
    uint64_t warmup_ns, window_ns;
    int64_t rss_base; /* bytes, read by the child before the impl runs */
} rb_cfg;

typedef struct rb_result {
    double tput;         /* elements per second in the window */
    double rss_growth;   /* peak RSS minus the base, bytes; NaN if unknown */
    double stop_join_ns; /* request stop .. every runner joined */
} rb_result;

/* Runs in the child; fills *out (tput and rss_growth via rb_consume). */
typedef void (*rb_impl_fn)(const rb_cfg *cfg, rb_result *out);

/* Takes one element; 0, or -1 when the queue is closed and drained. */
typedef int (*rb_dequeue_fn)(void *q, void **ret_v);

static inline void *rb_value(uint32_t runner, uint32_t seq)
{
    return (void *)(uintptr_t)(((uint64_t)runner + 1) << 32 | seq);
}

/** rb_consume() - steps 3 of the above; sets out->tput, out->rss_growth. */
void rb_consume(const rb_cfg *cfg, rb_dequeue_fn dequeue, void *q, rb_result *out);

/* baseline_thread_per_runner.c */
void rb_run_thread_per_runner(const rb_cfg *cfg, rb_result *out);

#endif
