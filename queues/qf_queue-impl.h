/* qf_queue-impl.h - internal: the queue object, and what differs between
 * queue kinds (the operations table). The engines it sits on are in
 * queues/engine/: the FIFO engine (qf_fifo-impl.h), embedded in every queue
 * as `fifo` (the state word in it is every kind's), and the locked engine
 * (qf_locked-impl.h) behind the shuffle and priority queues.
 */
#ifndef QF_QUEUE_IMPL_H
#define QF_QUEUE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qf_engine-impl.h"
#include "qf_fifo-impl.h"
#include "qf_queue.h"
#include "qf_waker.h"

/* What differs between queue kinds. The element and pointer APIs
 * (qf_queue_element.c, qf_queue_ptr.c and the other files of
 * qf_queue_ops-impl.h) validate, convert and then call these with opaque
 * slots (element pointers, or values in inline mode). Every kind implements
 * the same waiting rules (qf__wait) and close/cancel semantics. */
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
    /* The queue is being freed: hand every remaining slot to
     * release(ctx, slot). */
    void (*drain_all)(qf_queue *q, qf__release_fn release, void *ctx);
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
    int64_t capacity;  /* INT32_MAX when unbounded */
    bool unbounded;    /* capacity was negative (no limit) */
    bool inline_mode;  /* slots hold values, not qf_element pointers */
    bool ptr_queue;    /* inline_mode with one QF_PTR component: the _ptr calls */
    bool rows_no_keys; /* qf__queue_rows_without_keys() */
    bool rows_bare;    /* qf__queue_rows_by_length() */
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

    /* The FIFO engine (queues/engine/qf_fifo-impl.h): the ring, the state
     * word, the side storage, the put requests and the wait lists. Queues
     * of other kinds use only its state word (their ring is freed at
     * creation). */
    qf__fifo fifo;
};

/* The FIFO engine's operations (qf_fifo_queue.c). */
extern const qf__queue_ops qf__fifo_ops;

/* Shared by every kind's constructor (qf_queue.c): validates the options,
 * allocates the queue with its FIFO engine (a kind on another engine frees
 * the engine's ring: qf__fifo_free_ring()), copies dtypes/shapes/names. */
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
