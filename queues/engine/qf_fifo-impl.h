/* qf_fifo-impl.h - internal: the FIFO engine (qf_fifo.c: reserve, publish,
 * take, close; qf_fifo_wait.c: waiting and waking). It works on a qf__fifo
 * that the queue embeds (struct qf_queue in queues/qf_queue-impl.h) and
 * sees coord/ and the engine primitives only, never the queue API: slots
 * are opaque (element pointers or inline values). Never installed. */
#ifndef QF_FIFO_IMPL_H
#define QF_FIFO_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_deque-impl.h"
#include "qf_engine-impl.h"
#include "qf_ring-impl.h"
#include "qf_status.h"
#include "qf_waker.h"

/* A put request: an enqueue that waits in line (the waiting thread's
 * stack, or a task's ticket, queues/qf_queue_put-impl.h). A consumer that
 * frees a slot puts the oldest request's slots there itself (qf_fifo_wait.c,
 * "A put request" and "Refill"). */
typedef struct qf__put_req {
    /* Ordered so that what a completion and the owner's next look touch
     * comes first: a runner's request shares a cache line with the start
     * of its ticket (qf_queue_runner-impl.h). */
    _Atomic uint32_t state; /* QF__REQ_* */
    bool linked;            /* on the queue's list; req_lock */
    /* The request holds a pending count of the queue (a task's request:
     * dropped by whoever takes it off the list). */
    bool owns_pending;
    qf_waker *waker; /* NULL: a thread sleeping on `state` */
    /* Doubly linked so that an owner taking its request back (a deadline,
     * or room seen right after linking, the common case with thousands of
     * producer tasks in line) unlinks it in O(1), not by a walk from the
     * head under req_lock: with 10,000 runners in line that walk was most
     * of the time of runners.tput.task.10000. */
    struct qf__put_req *next, *prev; /* req_lock */
    void *const *slots;
    size_t n;
    size_t done; /* slots[0..done) are in the queue; req_lock */
    struct qf__put_req *finished_next;
} qf__put_req;

enum {
    QF__REQ_WAITING = 0,
    QF__REQ_DONE = 1,      /* every slot went in */
    QF__REQ_CANCELLED = 2, /* close(cancel_pending_enqueues) */
};

/* What the queue asks of its engine (qf__fifo_init()). */
typedef struct qf__fifo_config {
    const char *kind_name; /* the queue's kind and name, for messages; */
    const char *name;      /* they must outlive the engine */
    int64_t capacity;      /* INT32_MAX when unbounded */
    bool unbounded;
    bool single_producer, single_consumer;
    int64_t spin_ns; /* spin before sleeping at most */
    /* 0: a slot is a pointer (or an inline value) that the engine moves.
     * Else each value is this many bytes that the ring stores in place
     * (qf_ring-impl.h, note 9), when the ring is small enough to hold
     * them (qf__fifo_cells() says whether it does): a put's slots[i]
     * point to the bytes (read during the call, in whole 8-byte words),
     * a take's ret_slots[i] must on entry point to buffers of value_bytes
     * rounded up to 8, which it fills, and may come back permuted. */
    size_t value_bytes;
} qf__fifo_config;

/* The engine state, embedded in the queue. */
typedef struct qf__fifo {
    /* Read-only after qf__fifo_init(). */
    const char *kind_name;
    const char *name;
    int64_t capacity;   /* INT32_MAX when unbounded */
    bool unbounded_cap; /* no limit */
    bool spill;         /* the ring is smaller than the capacity: overflow list */
    bool single_producer, single_consumer;
    bool put_one; /* a one-element put may take put_one_now() (qf_fifo.c) */
    int64_t spin_ns;
    /* Room a consumer thread may leave to a returning runner (qf_fifo_wait.c,
     * "Room left for a returning task"): less than this, 1 when none. */
    uint32_t owed_max;

    qf__ring ring;
    size_t ring_bytes; /* the ring's allocation (ring_alloc() in qf_fifo.c) */

    /* The state word (qf_engine-impl.h). */
    _Alignas(64) _Atomic uint64_t state;
    /* adaptive spin budget in ns, and of yields after it; a task poll's
     * looks again before it parks (qf_fifo.c) */
    _Alignas(64) _Atomic int32_t spin_dyn;
    _Atomic int32_t yield_dyn;
    _Atomic int32_t look_dyn;
    /* A consumer thread's wait for a stretch before it takes (qf_fifo.c,
     * "Slip"): empty waits left before the next try, and tries in a row
     * that timed out. Hints, relaxed; written by consumers only. */
    _Alignas(64) _Atomic int32_t slip_skip;
    _Atomic int32_t slip_fails;
    /* The same for a producer thread's wait for room (qf_fifo.c, "Slip"),
     * on a line of its own: producers write it. */
    _Alignas(64) _Atomic int32_t room_skip;
    _Atomic int32_t room_fails;

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
    /* Task requests finished with their wake held back (qf_fifo_wait.c,
     * "Held wakes"), oldest first through finished_next; req_lock. Counted
     * in reqs_n until their wakes go out. */
    struct qf__put_req *held_head, **held_last;
    uint32_t held_n, held_passes;

    /* Slots consumer threads freed and have not seen filled, and the tasks
     * told a final state that have not seen it yet (qf_fifo_wait.c, "Room
     * left for a returning task"). Apart from req_lock's line: a consumer
     * thread adds to the first at every take with requests in line, the
     * workers' tasks count the second down and read the first. */
    _Alignas(64) _Atomic uint32_t room_owed;
    _Atomic uint32_t returning;
    /* Thread requests in line: changed under req_lock, read without it. */
    _Atomic uint32_t thread_reqs;

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
} qf__fifo;

/* --- qf_fifo.c --------------------------------------------------------- */

/* Set up f (zeroed memory) with a ring of the right size: the next power of
 * two holding the capacity, or a fixed ring plus an overflow list for huge
 * or unbounded queues. False when out of memory (qf__fifo_destroy() then
 * frees what was made). */
bool qf__fifo_init(qf__fifo *f, const qf__fifo_config *c);
/* Whether the values are stored in the ring's cells (value_bytes). */
static inline bool qf__fifo_cells(const qf__fifo *f)
{
    return f->ring.cell_words != 0;
}

/* Free the ring early: a queue kind on another engine never uses it. */
void qf__fifo_free_ring(qf__fifo *f);
/* Free the engine's storage (after qf__fifo_drain_all(); or after a failed
 * or skipped qf__fifo_init() on zeroed memory). */
void qf__fifo_destroy(qf__fifo *f);

/* The queue operations (qf__queue_ops in qf_queue-impl.h calls them with
 * the queue's engine). `slots` are element pointers or inline values. */
qf_code qf__fifo_put(qf__fifo *f, void *const *slots, size_t n, const qf__wait *w,
                     size_t *ret_done);
qf_code qf__fifo_take(qf__fifo *f, size_t min, size_t max, bool up_to, const qf__wait *w,
                      void **ret_slots, size_t *ret_n);
int64_t qf__fifo_size(const qf__fifo *f);
/* The stretch a thread's wait at either end of f's ring waits for
 * (qf_fifo.c, "Slip"): a quarter of its capacity in whole steps of 64,
 * at most 256; 0 under a capacity of 256 (no such wait). */
unsigned qf__fifo_slip_stretch(const qf__fifo *f);
void qf__fifo_give_back(qf__fifo *f, void *const *slots, size_t n);
qf_code qf__fifo_close(qf__fifo *f, bool cancel);
bool qf__fifo_cancel_poll(qf__fifo *f, qf_waker *w);
/* Hand what the engine still holds to release(ctx, slot) (the queue is
 * being freed). */
void qf__fifo_drain_all(qf__fifo *f, qf__release_fn release, void *ctx);

/* --- qf_fifo.c: for qf_fifo_wait.c, and for the put-request path of the
 * queue API (tickets, qf_queue_line.c) --------------------------------- */

/* Put what fits now of slots[0..n) (all or nothing when `all`): the ring,
 * or the overflow list of a spilling queue. `pending`: this enqueue was
 * blocked before a plain close and may still complete after it.
 * `arrive` (NULL: never; a producer thread that may block): when what
 * goes in fills the queue with rows still to come, the caller is counted
 * as arriving (qf__fifo_arrive()) before they become visible, *arrive is
 * set, and the put stops there: the rest goes in through a put request
 * (qf__fifo_wait_request(arrived = true)). Returns how many went in. *ret_err: QF_OK, or why
 * nothing more can go in (closed or cancelled; any slots reserved meanwhile were published as
 * tombstones). *ret_published: ring slots published (elements and
 * tombstones, this call's and earlier producers' it carried) and overflow
 * slots pushed, for qf__fifo_wake_consumers(), which the caller runs once
 * it holds no lock. Never blocks. */
size_t qf__fifo_put_now(qf__fifo *f, void *const *slots, size_t n, bool pending, bool all,
                        bool *arrive, qf_code *ret_err, size_t *ret_published);

/* A pending enqueue has ended (the last one after a plain close wakes the
 * consumers: end-of-data may have come). become_pending: false (and
 * *ret_err) when the queue is closed or cancelled. */
void qf__fifo_drop_pending(qf__fifo *f);
bool qf__fifo_become_pending(qf__fifo *f, qf_code *ret_err);

/* QF_QUEUE_SINGLE_PRODUCER: claim the producer side for one call (QF_OK),
 * or QF_FAILED_PRECONDITION naming the queue when another producer call is
 * running (nothing of the caller's went in); release it after. Only for
 * queues created single-producer. */
qf_code qf__fifo_sp_claim(qf__fifo *f);
void qf__fifo_sp_release(qf__fifo *f);

/* The verdict of state word `s` for a producer. */
qf_code qf__fifo_closed_for(const qf__fifo *f, uint64_t s, bool pending);

/* Errors the engine reports. */
qf_code qf__fifo_err_enqueue_cancelled(void);
qf_code qf__fifo_err_timeout(void);

/* --- qf_fifo_wait.c ---------------------------------------------------- */

/* Elements a consumer could take now: published ring slots (tombstones
 * included: an overstatement only causes a spurious wake), the put-back
 * stash and the overflow list. seq_cst loads: a waiter's re-check. */
size_t qf__fifo_available(qf__fifo *f);
/* Room for one more element now (seq_cst loads: a waiter's re-check). */
bool qf__fifo_room(qf__fifo *f);
/* Elements the capacity counts now: ring slots reserved (published or
 * not) and not consumed, the stash and the overflow list. `exact`: seq_cst
 * loads, for a waiter's re-check (qf__fifo_room()); else a guess from
 * cheap loads (c_head before p_head, with acquire, so p_head never falls
 * behind it): a wrong guess may only cost a spin or a wait. */
static inline uint64_t qf__fifo_used(qf__fifo *f, bool exact)
{
    if (exact)
        return (uint64_t)qf__ring_reserved(&f->ring) +
               atomic_load_explicit(&f->stash_n, memory_order_seq_cst) +
               atomic_load_explicit(&f->overflow_n, memory_order_seq_cst);
    unsigned c = QF__LD(&f->ring.ring.c_head, ACQUIRE);
    unsigned p = QF__LD(&f->ring.ring.p_head, RELAXED);
    return (uint64_t)(p - c) + atomic_load_explicit(&f->stash_n, memory_order_relaxed) +
           atomic_load_explicit(&f->overflow_n, memory_order_relaxed);
}
/* Closed, and nothing more can arrive: no enqueue pending, no reservation
 * in flight, no consumer but the caller (`holder`) holding elements it may
 * give back. */
bool qf__fifo_settled_closed(qf__fifo *f, bool holder);
/* Closed, no enqueue pending and no reservation in flight: only consumers
 * holding elements (*ret_holders of them) can still change what is there. */
bool qf__fifo_closed_quiet(qf__fifo *f, uint32_t *ret_holders);

/* After publishing k elements (or tombstones): wake the consumers that may
 * now finish; after a close, all of them (end-of-data may have come). */
void qf__fifo_wake_consumers(qf__fifo *f, size_t k);
/* After consuming k ring slots: finish blocked producer threads' enqueues
 * with the room (oldest first), then wake producer tasks if room is left. */
void qf__fifo_wake_producers(qf__fifo *f, size_t k);
/* Everyone on every list re-checks (close, end-of-data). */
void qf__fifo_wake_all(qf__fifo *f);
/* close(cancel_pending_enqueues): fail every blocked producer thread. */
void qf__fifo_cancel_requests(qf__fifo *f);

/* A consumer waits until `need` elements are available or the queue
 * settles closed. `holder`: the caller holds elements it may give back.
 * QF_OK: re-try now (woken, or the re-check succeeded); QF_PENDING (poll
 * form: the waker is registered); QF_DEADLINE_EXCEEDED; or the error of a
 * blocking call made inside a task. */
qf_code qf__fifo_wait_elements(qf__fifo *f, size_t need, bool holder, const qf__wait *w);

/* A producer thread blocked on a full queue with slots[*done..n) left:
 * enlist them as a request and sleep until consumers have put them all in
 * (QF_OK, *done = n), the deadline passes (QF_DEADLINE_EXCEEDED), the
 * enqueue is cancelled (QF_CANCELLED), or room or a close showed up while
 * enlisting (QF_OK with *done < n: re-try; never when `arrived`). *done is
 * updated in every case. The caller is pending (a plain close does not
 * refuse it). `arrived`: the caller is counted as arriving (put_now's
 * `arrive`); it stops arriving once its request is linked. */
qf_code qf__fifo_wait_request(qf__fifo *f, void *const *slots, size_t n, size_t *done,
                              qf_deadline deadline, bool arrived);

/* Count the caller as a producer arriving at the list (before elements
 * that fill the queue become visible), and the undo for one that then did
 * not have to wait after all. */
void qf__fifo_arrive(qf__fifo *f);
void qf__fifo_arrive_undo(qf__fifo *f);

/* A producer task waits for room: QF_OK (re-try now) or QF_PENDING. */
qf_code qf__fifo_wait_room_poll(qf__fifo *f, qf_waker *wk);

/* A task's request (pending, owns_pending set) joins the line: QF_PENDING,
 * or QF_OK when room or a cancel showed up meanwhile (the request is then
 * off the list again and its pending count dropped: re-try). */
qf_code qf__fifo_enlist(qf__fifo *f, qf__put_req *r);
/* Take a request back: true when it was still on the list (its pending
 * count, if it owns one, is dropped); false when a consumer or the closer
 * has it (its final state is on its way: a held wake goes out now). */
bool qf__fifo_withdraw(qf__fifo *f, qf__put_req *r);
/* Send the held wakes of finished task requests (qf_fifo_wait.c, "Held
 * wakes"): their final states and wakes. A close does this. */
void qf__fifo_release_held(qf__fifo *f);
/* The owner of a task request has seen its final state (DONE or
 * CANCELLED, stored by finish_request()): it is back, and may owe the line
 * the room a consumer thread left for it (qf_fifo_wait.c, "Room left for a
 * returning task"). Call once per final state seen, before the request is
 * used again. */
void qf__fifo_task_returned(qf__fifo *f);

#endif
