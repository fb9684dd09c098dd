/* bench_kinds.h - the queue-kind benchmarks of issue 6: RandomShuffleQueue,
 * PriorityQueue and PaddingFIFOQueue, each next to a mutex + condvar queue
 * of the same kind written here (baseline_mutex_cond_kinds.c). Both sides
 * sit behind baseline.h, so qb_run_tput() drives them and checks that
 * every value arrived exactly once.
 *
 * Equal work: within a pair, both sides move the same things and do the
 * same per-element work outside the queue, with the helpers below.
 *   shuffle   pointer-sized values, capacity 1024, min_after_dequeue 256,
 *             each dequeue removes a random element. qflow uses its
 *             zero-allocation pointer calls; the baseline stores pointers.
 *   priority  elements (int64 priority, int64 payload), built and opened
 *             by kb_prio_element() / kb_prio_open() on both sides (qflow's
 *             PriorityQueue takes elements, so the baseline carries the
 *             same ones). The priority is a hash of the payload: random
 *             order, reproducible.
 *   padding   elements of one int64 row whose length (1..16) depends on
 *             the value; consumers take batches of 32 padded to the
 *             longest row, and kb_pad_check() reads every cell, padding
 *             included.
 */
#ifndef BENCH_KINDS_H
#define BENCH_KINDS_H

#include <stddef.h>
#include <stdint.h>

#include "baseline.h"
#include "qflow.h"

#define KB_MIN_AFTER_DEQUEUE 256
#define KB_PAD_MAX_LEN 16
#define KB_PAD_BATCH 32

/* The priority of the value v (a bijective 64-bit mix, so ties are rare
 * and both sides order alike). */
int64_t kb_priority(const void *v);

/* (kb_priority(v), v) as an element of two int64 scalars; bench_fail() on
 * out of memory. */
qf_element *kb_prio_element(void *v);
/* The priority stored in component 0. */
int64_t kb_prio_key(const qf_element *e);
/* The payload of an element from kb_prio_element(); frees the element. */
void *kb_prio_open(qf_element *e);

/* The row length for value v: 1..KB_PAD_MAX_LEN. */
size_t kb_pad_len(const void *v);
/* One int64 row of kb_pad_len(v) cells, cell j = v + j; bench_fail() on
 * out of memory. */
qf_element *kb_pad_element(void *v);
/* Check a padded batch of shape [n, w]: each row is a row of
 * kb_pad_element() followed by zeros, and w is the longest row. Stores
 * each row's value in ret_vs[i]; bench_fail() (naming `what`) otherwise. */
void kb_pad_check(const qf_tensor *batch, size_t n, void **ret_vs, const char *what);

extern const bq_impl bq_qflow_shuffle;       /* impl_qflow_kinds.c */
extern const bq_impl bq_qflow_priority;      /* impl_qflow_kinds.c */
extern const bq_impl bq_qflow_padding;       /* impl_qflow_kinds.c */
extern const bq_impl bq_mutex_cond_shuffle;  /* baseline_mutex_cond_kinds.c */
extern const bq_impl bq_mutex_cond_priority; /* baseline_mutex_cond_kinds.c */
extern const bq_impl bq_mutex_cond_padding;  /* baseline_mutex_cond_kinds.c */

#endif
