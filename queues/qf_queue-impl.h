/* qf_queue-impl.h - internal: the queue object and the FIFO engine.
 *
 * The state word. One 64-bit atomic carries everything an enqueue or a
 * dequeue must agree on, so the fast path pays one RMW on it:
 *
 *   bits  0..31  count: elements in the queue or being inserted (a producer
 *                reserves before it writes the ring; a consumer releases
 *                after it took from the ring). Put-backs count too.
 *   bit   32     CLOSED
 *   bit   33     CANCELLED (close with cancel_pending_enqueues)
 *   bit   34     DEQ_WAIT: some consumer registered a waker (sticky hint)
 *   bit   35     ENQ_WAIT: some producer registered a waker (sticky hint)
 *   bits 40..63  pending: blocked enqueues that started before a plain
 *                close and may still complete after it
 *
 * Why one word: a producer's reservation must fail exactly when the queue
 * is full or closed, and a consumer's "closed and drained" verdict must not
 * miss an element that is being inserted. With count, CLOSED and pending
 * in one word, each decision is a single atomic snapshot. The wait bits let
 * the other side notice a sleeper from the value its own RMW returned: a
 * waiter registers its waker first and then sets the bit with an RMW, so
 * either the notifier's RMW sees the bit, or the waiter's RMW sees the
 * notifier's change and does not sleep. No seq_cst fence on the fast path.
 */
#ifndef QF_QUEUE_IMPL_H
#define QF_QUEUE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qf_deque-impl.h"
#include "qf_queue.h"
#include "qf_ring-impl.h"
#include "qf_waker.h"

#define QF__COUNT_MASK ((uint64_t)0xffffffffu)
#define QF__CLOSED ((uint64_t)1 << 32)
#define QF__CANCELLED ((uint64_t)1 << 33)
#define QF__DEQ_WAIT ((uint64_t)1 << 34)
#define QF__ENQ_WAIT ((uint64_t)1 << 35)
#define QF__PENDING_SHIFT 40
#define QF__PENDING_ONE ((uint64_t)1 << QF__PENDING_SHIFT)

static inline uint64_t qf__count(uint64_t s)
{
    return s & QF__COUNT_MASK;
}
static inline uint64_t qf__pending(uint64_t s)
{
    return s >> QF__PENDING_SHIFT;
}

typedef struct qf__wait qf__wait;

/* What differs between queue kinds. The element and pointer APIs in
 * qf_queue.c validate, convert and then call these with opaque slots
 * (element pointers, or values in inline mode). Every kind implements the
 * same waiting rules (qf__wait) and close/cancel semantics. */
typedef struct qf__queue_ops {
    qf_code (*put)(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                   size_t *ret_done);
    qf_code (*take)(qf_queue *q, size_t n, bool up_to, const qf__wait *w, void **ret_slots,
                    size_t *ret_n);
    int64_t (*size)(const qf_queue *q);
    qf_code (*close)(qf_queue *q, bool cancel);
    bool (*cancel_poll)(qf_queue *q, qf_waker *w);
    /* The queue is being freed: hand every remaining slot to release(). */
    void (*drain_all)(qf_queue *q, void (*release)(qf_queue *q, void *slot));
    /* Free kind-specific storage (q->impl); may be NULL. */
    void (*destroy)(qf_queue *q);
} qf__queue_ops;

struct qf_queue {
    /* Read-mostly after creation. */
    const qf__queue_ops *ops;
    void *impl; /* kind-specific storage (not used by the FIFO engine) */
    /* PaddingFIFOQueue: shapes may have unknown dimensions; elements are
     * checked for compatibility and batches are padded. */
    bool padded;
    _Atomic uint32_t refs;
    qf_queue_kind kind;
    const char *kind_name;
    char *name;
    int64_t capacity; /* INT32_MAX when unbounded */
    bool unbounded;
    bool inline_mode; /* slots hold values, not qf_element pointers */
    bool single_producer, single_consumer;
    size_t ncomp;
    qf_dtype *dtypes;
    qf_shape *shapes; /* NULL: no shapes */
    char **names;     /* NULL: no names */
    qf_ptr_dtor ptr_dtor;
    int64_t spin_ns;

    qf__ring ring;

    _Alignas(64) _Atomic uint64_t state;

    /* Side storage: put-backs (front) and unbounded overflow (back). */
    _Alignas(64) _Atomic uint32_t stash_n;
    _Atomic uint32_t overflow_n;
    _Atomic uint32_t side_lock;
    qf__deque stash;
    qf__deque overflow;

    qf_waitlist deq_waiters;
    qf_waitlist enq_waiters;
};

/* Engine (qf_fifo_queue.c). `slots` are element pointers or inline values. */

/* How a call waits when it cannot finish at once. */
typedef enum qf__wait_mode {
    QF__WAIT_TRY,      /* never: QF_UNAVAILABLE */
    QF__WAIT_DEADLINE, /* thread: until the deadline (QF_FOREVER allowed) */
    QF__WAIT_POLL,     /* task: register the waker, QF_PENDING */
} qf__wait_mode;

struct qf__wait {
    qf__wait_mode mode;
    qf_deadline deadline;
    qf_waker *waker;
};

extern const qf__queue_ops qf__fifo_ops;

/* Shared by every kind's constructor (qf_queue.c): validates the options,
 * allocates the queue with a ring of the right size (kinds that do not use
 * the ring pass capacity_for_ring = 1), copies dtypes/shapes/names. */
qf_code qf__queue_new(const qf_queue_options *o, qf_queue_kind kind, const char *kind_name,
                      const char *default_name, const qf__queue_ops *ops, bool allow_partial,
                      qf_queue **ret_q);

qf_code qf__fifo_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                     size_t *ret_done);
/* up_to: once closed and drained, return what was gathered (>= 1). */
qf_code qf__fifo_take(qf_queue *q, size_t n, bool up_to, const qf__wait *w, void **ret_slots,
                      size_t *ret_n);
int64_t qf__fifo_size(const qf_queue *q);
qf_code qf__fifo_close(qf_queue *q, bool cancel);
bool qf__fifo_cancel_poll(qf_queue *q, qf_waker *w);
/* Release what the queue still holds (the queue is being freed). */
void qf__fifo_drain_all(qf_queue *q, void (*release)(qf_queue *q, void *slot));

/* Validation (qf_queue_validate.c). All set the thread's last error. */
qf_code qf__validate_element(const qf_queue *q, qf_element *e);
/* Checks a batch; *ret_rows gets the 0th dimension. */
qf_code qf__validate_batch(const qf_queue *q, qf_element *batch, int64_t *ret_rows);
qf_code qf__check_many_allowed(const qf_queue *q, int64_t n, bool up_to);

#endif
