/* bench_queue.h - shared pieces of the queue benchmarks (bench_queue*.c):
 * their configurations and the exactly-once check.
 *
 * Exactly-once: producer p sends the values (p << 48) | seq for seq = 1, 2,
 * ... (never NULL, distinct across producers). Each consumer keeps, per
 * producer, the count, sum and sum of squares of the sequence numbers it
 * received; merged, they must equal those of 1..sent[p] exactly, which a
 * lost or duplicated element (or one from nowhere) cannot satisfy. Each
 * consumer also counts values that arrive out of one producer's order
 * (FIFO promise), reported as a warning.
 */
#ifndef BENCH_QUEUE_H
#define BENCH_QUEUE_H

#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>

#include "baseline.h"
#include "bench.h"

#define QB_CAPACITY 1024
#define QB_MAX_THREADS 16
#define QB_SEQ_BITS 48
#define QB_SEQ_MASK ((UINT64_C(1) << QB_SEQ_BITS) - 1)

typedef struct tput_cfg {
    const bq_impl *impl;
    int producers, consumers;
    unsigned batch;                   /* 1: single calls; > 1: enqueue_many / dequeue_many */
    unsigned flags;                   /* BQ_SINGLE_PRODUCER | BQ_SINGLE_CONSUMER */
    uint64_t items_quick, items_full; /* total per repetition */
    /* Consumers' batch when producers enqueue one at a time (batch 1): the
     * padding queue pads only what dequeue_many stacks. 0: `batch`. */
    unsigned deq_batch;
    /* The kind reorders by design (shuffle, priority): no order warning. */
    bool any_order;
    /* --quick time budget of a repetition, seconds; 0: the default. */
    double budget_quick_s;
} tput_cfg;

typedef struct pingpong_cfg {
    const bq_impl *impl;
    double budget_quick_s; /* as in tput_cfg */
} pingpong_cfg;

typedef struct alloc_cfg {
    const bq_impl *impl;
    int producers, consumers;
} alloc_cfg;

/* What one consumer saw, per producer. Cache-line aligned: one per thread. */
typedef struct qb_seen {
    alignas(64) uint64_t received;
    uint64_t out_of_order;
    uint64_t count[QB_MAX_THREADS];
    uint64_t sum[QB_MAX_THREADS];
    uint64_t sumsq[QB_MAX_THREADS];
    uint64_t last[QB_MAX_THREADS];
} qb_seen;

static inline void *qb_value(int producer, uint64_t seq)
{
    return (void *)(uintptr_t)(((uint64_t)producer << QB_SEQ_BITS) | seq);
}

/* Record one received value; a value no producer sent fails the run. */
static inline void qb_record(qb_seen *s, void *p, int producers, const char *what)
{
    uint64_t v = (uint64_t)(uintptr_t)p;
    uint64_t pr = v >> QB_SEQ_BITS, seq = v & QB_SEQ_MASK;
    if (pr >= (uint64_t)producers || seq == 0)
        bench_fail("%s: received %#llx, which no producer sent", what, (unsigned long long)v);
    s->received++;
    s->count[pr]++;
    s->sum[pr] += seq;
    s->sumsq[pr] += seq * seq;
    s->out_of_order += seq <= s->last[pr];
    s->last[pr] = seq;
}

/* Check that consumers seen[0..consumers) together received exactly
 * 1..sent[p] from each producer p; bench_fail() otherwise. Prints a
 * warning for out-of-order deliveries. */
void qb_verify(const char *what, const uint64_t *sent, int producers, const qb_seen *seen,
               int consumers);

/* Run functions (arg: the matching *_cfg). */
void qb_run_tput(bench_rep *r);
void qb_run_pingpong(bench_rep *r);
void qb_run_alloc(bench_rep *r);

#endif
