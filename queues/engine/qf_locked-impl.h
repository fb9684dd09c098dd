/* qf_locked-impl.h - internal: the locked engine behind the
 * RandomShuffleQueue and the PriorityQueue (qf_locked.c). It sees coord/
 * and the engine primitives only, never the queue API; the queue API's
 * operations table for it is queues/qf_locked_queue.c.
 *
 * A ring cannot remove a random element or keep elements sorted, so these
 * two kinds keep their elements in a kind-specific structure (an array for
 * the shuffle queue, a binary heap for the priority queue) guarded by one
 * small futex mutex (qf__lock). The engine owns everything else: capacity,
 * the waiting rules of qf__wait (TRY / DEADLINE / POLL), close and cancel,
 * "pending" enqueues that outlive a plain close, put-backs, growth, and
 * whom to wake. The kinds supply the storage through qf__locked_storage.
 *
 * Synchronization table
 *   every field below `lock`      written and read only with `lock` held,
 *                                 except size_pub (atomic, read anywhere),
 *                                 spin_dyn (a relaxed hint)
 *                                 and the read-only configuration.
 *   storage callbacks             always called with `lock` held, except
 *                                 key() (called before the lock is taken,
 *                                 but under it for the rows of a blocked
 *                                 producer that a take inserts) and
 *                                 slot_at() (teardown, quiescent).
 *   the wait lists                registration happens with `lock` held;
 *                                 wakes happen after it is released (a
 *                                 task's wake function must not run under a
 *                                 queue lock).
 *
 * Cost of a put or take that neither waits nor wakes: one CAS to take the
 * lock, the storage operation, one relaxed store of size_pub, one exchange
 * to release the lock. No allocation, no system call, no fence; a sleeping
 * partner costs one qf_waitlist_wake() after the lock is released.
 */
#ifndef QF_LOCKED_IMPL_H
#define QF_LOCKED_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_engine-impl.h"
#include "qf_status.h"
#include "qf_waker.h"

typedef struct qf__locked qf__locked;

/* What a kind stores and how. All callbacks except key() and slot_at() run
 * with the engine lock held and must not allocate or block. */
typedef struct qf__locked_storage {
    /* Bytes per stored entry; the engine allocates and grows `buf`. */
    size_t entry_size;
    /* true: a take of n removes nothing until n elements are present at
     * once (PriorityQueue, spec 103); false: while open, a take leaves
     * min_after_dequeue behind (RandomShuffleQueue, spec 66): it waits until
     * it can take its batch at once, or, for a batch that can never be there
     * at once, removes one element at a time and holds what it took. */
    bool whole_batches;
    /* An ordering key for a slot, computed before the lock is taken (NULL:
     * the kind has none and 0 is passed to insert); also under it, for the
     * rows of a blocked producer: it must not block or allocate. */
    int64_t (*key)(void *slot);
    /* Store a slot: L->n < L->alloc on entry; increments L->n. */
    void (*insert)(qf__locked *L, void *slot, int64_t key);
    /* Remove the next slot by the kind's rule: L->n > 0 on entry;
     * decrements L->n. */
    void *(*remove)(qf__locked *L);
    /* The slot stored in entry i < L->n (teardown only). */
    void *(*slot_at)(const qf__locked *L, size_t i);
} qf__locked_storage;

/* What the queue asks of its engine (qf__locked_init()). */
typedef struct qf__locked_config {
    const char *kind_name; /* the queue's kind and name, for messages; */
    const char *name;      /* they must outlive the engine */
    int64_t capacity;      /* INT32_MAX when unbounded */
    size_t floor_open;     /* min_after_dequeue (0 for kinds without one) */
    int64_t spin_ns;       /* spin before sleeping at most */
    /* Where a close publishes QF__CLOSED and QF__CANCELLED for readers
     * outside the lock (the queue's state word, qf_engine-impl.h). */
    _Atomic uint64_t *state_word;
} qf__locked_config;

/* The engine state. A kind embeds it as the FIRST member of the struct that
 * q->impl points to (so q->impl is also a qf__locked *), and allocates that
 * struct with 64-byte alignment. */
struct qf__locked {
    _Alignas(64) _Atomic uint32_t lock;
    /* --- read-only after qf__locked_init() --- */
    _Alignas(64) const qf__locked_storage *st;
    const char *kind_name, *name; /* for messages */
    _Atomic uint64_t *state_word; /* the close bits go here too */
    size_t cap;                   /* the queue's capacity */
    size_t floor_open;            /* while open, takes leave this many behind */
    int64_t spin_ns;              /* spin before sleeping at most (0 on a single CPU) */
    /* --- guarded by lock. A line apart from the lock word, so that a
     * waiter reading the lock word does not take away the line the holder
     * is writing --- */
    _Alignas(64) bool closed; /* a close of either kind happened */
    bool cancelled;           /* close(cancel_pending_enqueues = true) happened */
    /* Sticky "someone may be registered" hints: set when a waiter
     * registers, cleared when the list is found empty. While clear, a
     * put/take does not even look at the wait list. */
    bool deq_flag, enq_flag, many_flag;
    size_t n;         /* elements present (what size() reports) */
    size_t alloc;     /* entries buf can hold */
    void *buf;        /* alloc * entry_size bytes, kind-specific layout */
    size_t pending;   /* blocked enqueues that may complete after a plain close */
    size_t many_need; /* smallest n among many_waiters (SIZE_MAX: none) */
    /* Producer threads blocked on a full queue, oldest first, with the rows
     * they have left: a take inserts them into the room it made before it
     * unlocks (qf_locked.c, "Refill"). Non-empty only while full. */
    struct qf__locked_req *req_head, *req_tail;
    /* --- atomic snapshot of n, for size() and spinning. A line of its
     * own: spinning waiters poll it, and must not pull the lines above
     * away from the holder --- */
    _Alignas(64) _Atomic int64_t size_pub;
    /* --- spin budget now, adapted to how often spinning pays --- */
    _Alignas(64) _Atomic int32_t spin_dyn;
    /* Consumers (single takes, and every shuffle take) and producer tasks
     * (poll forms) waiting. Whole-batch takes of more than one element wait
     * on many_waiters, apart from single takes, so that a put wakes them
     * only once enough are present. */
    _Alignas(64) qf_waitlist deq_waiters;
    qf_waitlist enq_waiters;
    qf_waitlist many_waiters;
};

/**
 * qf__locked_init() - set up the engine L (zeroed memory). Allocates
 * storage for min(capacity, 65536) entries up front; beyond that storage
 * grows geometrically.
 * Returns QF_OK or QF_RESOURCE_EXHAUSTED (error set).
 */
qf_code qf__locked_init(qf__locked *L, const qf__locked_storage *st, const qf__locked_config *c);

/* The queue operations (queues/qf_locked_queue.c calls them with the
 * queue's engine). A kind may check more before put (the priority queue
 * checks its priorities). destroy frees the storage (not L). */
qf_code qf__locked_put(qf__locked *L, void *const *slots, size_t n, const qf__wait *w,
                       size_t *ret_done);
qf_code qf__locked_take(qf__locked *L, size_t min, size_t max, bool up_to, const qf__wait *w,
                        void **ret_slots, size_t *ret_n);
int64_t qf__locked_size(const qf__locked *L);
qf_code qf__locked_close(qf__locked *L, bool cancel);
bool qf__locked_cancel_poll(qf__locked *L, qf_waker *w);
/* Return slots a consumer took but cannot deliver, whatever the capacity
 * and the close state; they keep their ordering keys. */
void qf__locked_give_back(qf__locked *L, void *const *slots, size_t n);
void qf__locked_drain_all(qf__locked *L, qf__release_fn release, void *ctx);
void qf__locked_destroy(qf__locked *L);

/* Producers waiting for room now: threads in line with rows left, plus
 * registered tasks (tests: a blocked enqueue has got as far as waiting). */
size_t qf__locked_producers_waiting(qf__locked *L);

#endif
