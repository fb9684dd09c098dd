/* qf_queue_trusted-impl.h - internal: queue calls for the layers above
 * (runtime/pipeline's batching) that skip what the public calls check,
 * because the caller proved it once when it was built. Never installed;
 * not exported from libqflow.so. Defined in qf_queue_element.c. */
#ifndef QF_QUEUE_TRUSTED_IMPL_H
#define QF_QUEUE_TRUSTED_IMPL_H

#include <stddef.h>

#include "qf_queue.h"
#include "qf_waker.h"

/* Make a queue on the FIFO engine pair full fences on both sides instead of
 * the asymmetric pair (see qf__ring_set_symmetric()). Only before anyone
 * else can use the queue; no effect on other kinds. */
void qf__queue_use_symmetric_fences(qf_queue *q);

/* Lay the ring of a queue on the FIFO engine out in index order, where a
 * queue's ring keeps neighbouring indices on different lines
 * (qf_ring-impl.h note 8): for a queue whose producers put runs and whose
 * consumers take batches, which then read and write whole lines in order.
 * Only before anyone else can use the queue; no effect on other kinds. */
void qf__queue_lay_in_order(qf_queue *q);

/* Batches of q made only of rows of string-block runs (a reader's records)
 * get n empty strings as their keys instead of the "<file>:<n>" strings,
 * which cost a copy of ~20-30 bytes per record to make: for a consumer that
 * never reads the keys (qflow-lines without --keys). Batches with any
 * other element, and single dequeues, keep their keys. Only before anyone
 * else can use the queue. */
void qf__queue_rows_without_keys(qf_queue *q);

/* The consumers of q read every value by its length, never as a C string
 * (qflow-lines' writer): a reader feeding q through a batch runner then
 * leaves each row's value ended by its source's terminator ('\n', or the
 * '\r' of "\r\n") instead of writing a NUL over it, and the batches'
 * string values lent from those rows are not NUL-terminated, against
 * qf_string's convenience. qf__strings_keep_ends() tells a consumer
 * whether a batch's values lie so. Only before anyone else can use the
 * queue. qf__queue_takes_bare_rows(): whether it was called. */
void qf__queue_rows_by_length(qf_queue *q);
bool qf__queue_takes_bare_rows(const qf_queue *q);

/* Room for about how many more elements q has now, for a producer that
 * sizes its next pull by it: the capacity less what it holds, where slots
 * reserved and not yet published count as held, so the guess may state
 * too little room but not more than there was at some moment of the call
 * (it can be stale when it returns), and is never below 0. On the FIFO
 * engine two index loads (c_head with acquire, then p_head) and two
 * counters, where qf_queue_size() counts the published run mark by mark;
 * other kinds use their size call. Any thread; wait-free on the FIFO
 * engine. */
int64_t qf__queue_room_guess(const qf_queue *q);

/* qf_queue_poll_enqueue() minus the per-element validation, for n slots at
 * once (elements or rows of string-block runs, each one example; *ret_done
 * of them went in, whatever the code). Only for slots known to match the
 * queue's components (dtypes, shapes, no names, no QF_PTR) and a queue that
 * is not inline. */
qf_code qf__queue_poll_enqueue_trusted(qf_queue *q, void *const *slots, size_t n, qf_waker *wk,
                                       size_t *ret_done);

#endif
