/* qf_queue-impl.h - internal: the queue object and the FIFO engine.
 *
 * The state word. One 64-bit atomic carries what enqueues and dequeues must
 * agree on besides the ring indices. It is written only on slow paths
 * (closing, a waiter announcing itself, a blocked enqueue becoming pending,
 * a consumer gathering a batch larger than the capacity), so on the fast
 * path every side only reads it and the cache line stays shared:
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
 * The wait/wake protocol built on it is written down at the top of
 * qf_fifo_wait.c and model-checked in tests/model/.
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

typedef struct qf__wait qf__wait;

/* What differs between queue kinds. The element and pointer APIs in
 * qf_queue.c validate, convert and then call these with opaque slots
 * (element pointers, or values in inline mode). Every kind implements the
 * same waiting rules (qf__wait) and close/cancel semantics. */
typedef struct qf__queue_ops {
    qf_code (*put)(qf_queue *q, void *const *slots, size_t n, const qf__wait *w, size_t *ret_done);
    /* Take between min (>= 1) and max elements: wait until min can be
     * taken, then take what is there up to max. Once the queue is closed
     * and nothing more can arrive: with up_to, 1..max of what is left;
     * else QF_OUT_OF_RANGE (spec 35, 56). */
    qf_code (*take)(qf_queue *q, size_t min, size_t max, bool up_to, const qf__wait *w,
                    void **ret_slots, size_t *ret_n);
    int64_t (*size)(const qf_queue *q);
    qf_code (*close)(qf_queue *q, bool cancel);
    bool (*cancel_poll)(qf_queue *q, qf_waker *w);
    /* The queue is being freed: hand every remaining slot to release(). */
    void (*drain_all)(qf_queue *q, void (*release)(qf_queue *q, void *slot));
    /* Free kind-specific storage (q->impl); may be NULL. */
    void (*destroy)(qf_queue *q);
    /* Return slots a consumer took but cannot deliver (out of memory while
     * building the result) to the front; never fails. NULL: use put. */
    void (*give_back)(qf_queue *q, void *const *slots, size_t n);
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
    int64_t capacity;   /* INT32_MAX when unbounded */
    bool unbounded;     /* capacity was negative (no limit) */
    bool unbounded_cap; /* same, read by the engine */
    bool spill;         /* the ring is smaller than the capacity: overflow list */
    bool inline_mode;   /* slots hold values, not qf_element pointers */
    bool rows_no_keys;  /* qf__queue_rows_without_keys() */
    /* NULL, or slots are blocks of the components' values, not elements
     * (qf_queue_packed-impl.h). */
    struct qf__packed *packed;
    bool single_producer, single_consumer;
    size_t ncomp;
    qf_dtype *dtypes;
    qf_shape *shapes; /* NULL: no shapes */
    char **names;     /* NULL: no names */
    qf_ptr_dtor ptr_dtor;
    int64_t spin_ns;
    /* Shared queues (qf_queue_registry.c). shared_name: NULL when not
     * shared, else points into this allocation. shared_reg: where it is
     * published (read only until then). published: registered under
     * shared_name, so other handles may use it; set before the queue
     * becomes visible and never cleared. min_after_dequeue and the
     * seeds are RandomShuffleQueue's as requested (0 for other kinds);
     * they exist so an attaching request can be checked (spec 11, 83). */
    const char *shared_name;
    qf_queue_registry *shared_reg;
    bool published;
    int64_t min_after_dequeue;
    int64_t seed, seed2;

    qf__ring ring;

    _Alignas(64) _Atomic uint64_t state;
    /* adaptive spin budget in ns (qf_fifo_queue.c) */
    _Alignas(64) _Atomic int32_t spin_dyn;

    /* Side storage: put-backs (front) and unbounded overflow (back). */
    _Alignas(64) _Atomic uint32_t stash_n;
    _Atomic uint32_t overflow_n;
    _Atomic uint32_t side_lock;
    qf__deque stash;
    qf__deque overflow;

    /* Producer threads blocked on a full queue, oldest first: consumers
     * that free room finish their enqueues (qf_fifo_wait.c). Guarded by
     * req_lock; reqs_n is read without it. */
    _Alignas(64) _Atomic uint32_t req_lock;
    _Atomic uint32_t reqs_n; /* requests linked, plus producers arriving */
    /* Producer threads whose enqueue_many has just filled the queue and
     * that are on their way onto the list (qf_fifo_wait.c, "Refill"). */
    _Atomic uint32_t arriving;
    struct qf__put_req *req_head, *req_tail;

    /* QF_QUEUE_SINGLE_PRODUCER / _CONSUMER: set while a producer (consumer)
     * call runs, claimed with an exchange, so that a second one at the same
     * time is refused instead of corrupting the ring (qf_queue.h). Each on
     * its side's own line: only that side touches it. */
    _Alignas(64) _Atomic uint32_t sp_busy;
    _Alignas(64) _Atomic uint32_t sc_busy;

    /* Consumers waiting for one element (or any, while gathering), and
     * consumers waiting for a batch of many_need or more (the smallest
     * batch any of them waits for; UINT32_MAX: none). */
    _Alignas(64) qf_waitlist deq_waiters;
    qf_waitlist deq_many_waiters;
    _Atomic uint32_t many_need;
    /* Producer tasks (poll forms) waiting for room. */
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

/* Shared queues (qf_queue_registry.c).
 *
 * With opts->shared_name, qf__queue_new() first looks the name up: an
 * existing queue is checked against the request and returned as it is
 * (q->published is true: a kind constructor must return it untouched).
 * Otherwise it creates a fresh queue. Queues on the FIFO engine
 * (qf__fifo_ops) need nothing more and are published at once; a kind that
 * initialises more after qf__queue_new() (q->impl) must end its
 * constructor with `return qf__queue_publish(q, ret_q);`, which registers
 * the queue, or, when another thread registered the name first, checks
 * that queue, frees q and returns the other. For a queue that is not
 * shared it just sets *ret_q = q. On failure q has been freed. */
qf_code qf__queue_publish(qf_queue *q, qf_queue **ret_q);
/* The queue registered as o->shared_name in o->registry (NULL: the
 * default), checked against the request (kind, capacity, dtypes, shapes,
 * compatible ones when `padded`, min_after_dequeue and seeds): QF_OK and a
 * new reference in *ret_q (NULL when the name is not registered), or
 * QF_INVALID_ARGUMENT naming what differs. */
qf_code qf__queue_find_shared(const qf_queue_options *o, qf_queue_kind kind, const char *kind_name,
                              bool padded, qf_queue **ret_q);

qf_code qf__fifo_put(qf_queue *q, void *const *slots, size_t n, const qf__wait *w,
                     size_t *ret_done);
qf_code qf__fifo_take(qf_queue *q, size_t min, size_t max, bool up_to, const qf__wait *w,
                      void **ret_slots, size_t *ret_n);
int64_t qf__fifo_size(const qf_queue *q);
void qf__fifo_give_back(qf_queue *q, void *const *slots, size_t n);
qf_code qf__fifo_close(qf_queue *q, bool cancel);
bool qf__fifo_cancel_poll(qf_queue *q, qf_waker *w);
/* Release what the queue still holds (the queue is being freed). */
void qf__fifo_drain_all(qf_queue *q, void (*release)(qf_queue *q, void *slot));

/* Validation (qf_queue_validate.c). All set the thread's last error. */
qf_code qf__validate_element(const qf_queue *q, qf_element *e);
/* True when e passes qf__validate_element() and the move check with nothing
 * to reorder or report: no names on either side, the right count, every
 * component present with the queue's dtype and exact shape (not a padding
 * queue), none owning pointers. Records nothing; false says only "take
 * the full checks", which report the reason. A few field reads per
 * component: the typed enqueue's common case. */
bool qf__element_plainly_fits(const qf_queue *q, const qf_element *e);
/* Checks a batch; *ret_rows gets the 0th dimension. */
qf_code qf__validate_batch(const qf_queue *q, qf_element *batch, int64_t *ret_rows);
qf_code qf__check_many_allowed(const qf_queue *q, int64_t n, bool up_to);

#endif
