/* qf_engine-impl.h - internal: what both wait engines (the FIFO engine,
 * qf_fifo-impl.h, and the locked engine, qf_locked-impl.h) share with the
 * queue API above them: how a call waits, and the bits of the state word
 * that say a queue is closed. Never installed.
 *
 * The state word. One 64-bit atomic carries what enqueues and dequeues must
 * agree on besides the FIFO engine's ring indices. It is written only on
 * slow paths (closing, a waiter announcing itself, a blocked enqueue
 * becoming pending, a consumer gathering a batch larger than the capacity),
 * so on the fast path every side only reads it and the cache line stays
 * shared:
 *
 *   bits  0..19  holders: consumers gathering a batch larger than the
 *                capacity, holding elements they may have to give back
 *   bit   32     CLOSED
 *   bit   33     CANCELLED (close with cancel_pending_enqueues)
 *   bit   34     DEQ_WAIT: some consumer registered a waker (sticky hint)
 *   bit   35     ENQ_WAIT: some producer waits for room (sticky hint)
 *   bits 40..63  pending: enqueues that were blocked (or multi-row) before
 *                a plain close and may still complete after it
 *
 * The FIFO engine uses all of it (qf__fifo.state; the wait/wake protocol
 * built on it is written down at the top of qf_fifo_wait.c and
 * model-checked in tests/model/). The locked engine decides everything
 * under its lock and only publishes CLOSED and CANCELLED into the word it
 * is given, for readers outside its lock (qf_queue_is_closed()).
 */
#ifndef QF_ENGINE_IMPL_H
#define QF_ENGINE_IMPL_H

#include <stdint.h>

#include "qf_status.h"
#include "qf_time.h"
#include "qf_waker.h"

/* A poll form could not finish now: its waker is registered. The public
 * spelling is qf_queue.h's (and qf_runtime.h's), with the same value; the
 * engines see neither. */
#ifndef QF_PENDING
#define QF_PENDING ((qf_code)-1)
#endif

#define QF__HOLDER_ONE ((uint64_t)1)
#define QF__HOLDER_MASK ((uint64_t)0xfffff)
#define QF__CLOSED ((uint64_t)1 << 32)
#define QF__CANCELLED ((uint64_t)1 << 33)
#define QF__DEQ_WAIT ((uint64_t)1 << 34)
#define QF__ENQ_WAIT ((uint64_t)1 << 35)
#define QF__PENDING_SHIFT 40
#define QF__PENDING_ONE ((uint64_t)1 << QF__PENDING_SHIFT)

static inline uint64_t qf__holders(uint64_t s)
{
    return s & QF__HOLDER_MASK;
}
static inline uint64_t qf__pending(uint64_t s)
{
    return s >> QF__PENDING_SHIFT;
}

/* How a call waits when it cannot finish at once. */
typedef enum qf__wait_mode {
    QF__WAIT_TRY,      /* never: QF_UNAVAILABLE */
    QF__WAIT_DEADLINE, /* thread: until the deadline (QF_FOREVER allowed) */
    QF__WAIT_POLL,     /* task: register the waker, QF_PENDING */
} qf__wait_mode;

typedef struct qf__wait {
    qf__wait_mode mode;
    qf_deadline deadline;
    qf_waker *waker;
} qf__wait;

/* Hands each slot an engine still holds to its owner when the queue is
 * freed (drain_all). */
typedef void (*qf__release_fn)(void *ctx, void *slot);

#endif
