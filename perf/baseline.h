/* baseline.h - one interface over qflow and the queues it is judged
 * against, so every queue benchmark is written once.
 *
 * All operations move pointer-sized values and block (or spin) until they
 * can finish. The harness never enqueues NULL (GAsyncQueue refuses it).
 *
 * Contract of a bq_impl:
 *   create(capacity, flags)  a queue for `capacity` elements (see each
 *                            impl's note for how exactly it is bounded);
 *                            flags BQ_SINGLE_PRODUCER / BQ_SINGLE_CONSUMER
 *                            promise one thread on that side. NULL when the
 *                            impl cannot make such a queue.
 *   enqueue(q, p)            0, or -1 once the queue is closed.
 *   dequeue(q, &p)           0, or -1 once the queue is closed and drained.
 *   enqueue_many(q, ps, n)   optional (NULL): all n in order, 0 or -1.
 *   dequeue_many(q, ps, n)   optional (NULL): n values; fewer only when the
 *                            queue was closed (what was left); 0 when
 *                            closed and drained.
 *   close(q)                 producers are done: called once, by the last
 *                            producer, after its last enqueue returned.
 *   destroy(q)               after every thread is done with q.
 * Concurrency: enqueue/dequeue forms from any number of threads unless a
 * single-side flag was given; close from any thread.
 */
#ifndef BENCH_BASELINE_H
#define BENCH_BASELINE_H

#include <stddef.h>

enum {
    BQ_SINGLE_PRODUCER = 1u << 0,
    BQ_SINGLE_CONSUMER = 1u << 1,
};

typedef struct bq bq; /* each impl defines its own */

typedef struct bq_impl {
    const char *name; /* impl name in results: "mutex_cond" */
    const char *note; /* how it is bounded or why it behaves as it does */
    bq *(*create)(size_t capacity, unsigned flags);
    void (*destroy)(bq *q);
    int (*enqueue)(bq *q, void *p);
    int (*dequeue)(bq *q, void **ret_p);
    int (*enqueue_many)(bq *q, void *const *ps, size_t n);
    size_t (*dequeue_many)(bq *q, void **ret_ps, size_t n);
    void (*close)(bq *q);
} bq_impl;

extern const bq_impl bq_qflow;          /* impl_qflow.c */
extern const bq_impl bq_qflow_i64;      /* impl_qflow_i64.c: one-int64 element queue */
extern const bq_impl bq_qflow_i64_pair; /* impl_qflow_i64.c: two-int64 element queue */
extern const bq_impl bq_qflow_tuple;    /* impl_qflow_i64.c: (int64, float32 [16]) queue */
/* impl_qflow_i64.c: the same two queues through the _values calls */
extern const bq_impl bq_qflow_i64_pair_values;
extern const bq_impl bq_qflow_tuple_values;
extern const bq_impl bq_mutex_cond;   /* baseline_mutex_cond.c */
extern const bq_impl bq_gasyncqueue;  /* baseline_gasyncqueue.c */
extern const bq_impl bq_ck_ring_spin; /* baseline_ck_ring_spin.c */
extern const bq_impl bq_ck_ring_spsc; /* baseline_ck_ring_spsc.c */
/* baseline_moodycamel.cc, built when libconcurrentqueue-dev is installed
 * (QFB_HAVE_MOODYCAMEL). */
extern const bq_impl bq_moodycamel;
/* baseline_atomic_queue.cc, built when libatomic-queue-dev is installed
 * (QFB_HAVE_ATOMIC_QUEUE). */
extern const bq_impl bq_atomic_queue;

#endif
