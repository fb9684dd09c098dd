/* qf_queue.h - queues of elements: the FIFOQueue and the common interface.
 *
 * A queue holds elements (tuples of tensors, qf_tensor.h) with a fixed list
 * of component dtypes and, optionally, shapes and names. Producers enqueue,
 * consumers dequeue; a full queue holds producers back, an empty one holds
 * consumers back, and close() ends the stream: once a closed queue is
 * drained every dequeue fails with QF_OUT_OF_RANGE, the ordinary end-of-data
 * signal of an input pipeline.
 *
 * Storage. Elements travel through a Concurrency Kit ring (ck_ring) of
 * pointer-sized slots. A queue of one scalar QF_PTR component is in *inline
 * mode*: the pointer itself sits in the slot, and the _ptr calls below move
 * it with no allocation at all. Other queues store an element pointer per
 * slot.
 *
 * Three forms of every call that may wait (STYLE: names say whether a call
 * blocks; messages name the queue, formatted only when qf_last_message()
 * is called, so a try form polled in a loop formats nothing):
 *     qf_queue_try_X(...)             never blocks; QF_UNAVAILABLE if it would
 *     qf_queue_X_until(..., deadline) waits at most until the absolute deadline
 *                                     (qf_time.h); QF_DEADLINE_EXCEEDED after,
 *                                     and the queue is still usable (spec 38)
 *     qf_queue_X(...)                 waits until it can finish, the queue is
 *                                     closed, or pending enqueues are cancelled
 * and a poll form for tasks (qf_queue_poll_X) that never blocks: when the
 * call cannot finish it registers a waker (qf_waker.h) and returns
 * QF_PENDING; the queue wakes it when the call may succeed.
 *
 * Ownership. Elements move: a successful enqueue takes the element, a
 * successful dequeue gives one. A call that fails leaves the caller's
 * element with the caller (nothing is lost), with one documented exception
 * (enqueue_many after partial progress, see there). Freeing a queue releases
 * what it still holds (and runs the pointer destructor on inline QF_PTR
 * values).
 *
 * Synchronization table
 *   enqueue / dequeue forms   any number of threads concurrently, unless the
 *                             queue was created single-producer or
 *                             single-consumer (then one thread at a time on
 *                             that side).
 *   close, size, is_closed    any thread, any time.
 *   qf_queue_unref            the last reference needs quiescence: nothing
 *                             may be blocked in or calling the queue.
 *
 * Progress. The fast path (room/elements available) is one ck_ring
 * operation (a CAS on the producer or consumer index, or a plain store on a
 * single-producer/consumer side) plus a read of a state word that only slow
 * paths write; no counter is shared between producers and consumers.
 * ck_ring's multi-producer enqueue publishes in reservation order, so
 * enqueue on a multi-producer queue is NOT lock-free under preemption: a
 * producer that stops between reserving and publishing delays later
 * producers (qflow parks them on a futex instead of spinning).
 * Single-producer enqueue and every dequeue are lock-free in the ring
 * itself; a dequeuer can still find "an element is reserved but not yet
 * published" and then waits for it. Waiting (full/empty) blocks on futexes
 * only, after an adaptive spin; nothing polls with sleeps.
 *
 * Ordering. A successful enqueue happens-before the dequeue that returns
 * that element (release/acquire through the ring). Elements of one producer
 * leave in the order that producer enqueued them.
 *
 * Differences from TensorFlow (documented in the README):
 *   - waiters are served roughly, not strictly, in arrival order (spec 28):
 *     a blocked dequeue_many does not hold back later dequeues, and an
 *     enqueue_many that has to wait for space may be interleaved with other
 *     producers' elements;
 *   - a plain close() takes effect at once instead of waiting behind blocked
 *     enqueues (spec 25, 30); enqueues already blocked when it happens still
 *     complete (so the same elements arrive, in the same order), and
 *     dequeuers see end-of-data only after those have finished. This holds
 *     for the thread forms; a task parked in a poll-form enqueue is refused
 *     with QF_CANCELLED "... is closed." when it polls again after the close
 *     (a QueueRunner closes its own queue only after its tasks retired, so
 *     its own close never meets its own parked enqueue);
 *   - a PriorityQueue's dequeue_many(n) with n above the capacity is refused
 *     (QF_INVALID_ARGUMENT) instead of waiting for ever (spec 103: it takes
 *     a batch only when n elements are present at once);
 *   - a shared name requested with component names must name them as the
 *     queue does (TensorFlow keeps names in each Python wrapper).
 *
 * Bad input. A NULL queue (or other NULL argument the contract does not
 * give a meaning) makes a call that returns a qf_code fail with
 * QF_INVALID_ARGUMENT naming the argument, with nothing changed; the
 * attribute calls return a neutral value for a NULL queue (NULL, 0, false,
 * QF_DT_INVALID, QF_QUEUE_FIFO) and record the same error. qf_queue_ref,
 * qf_queue_unref and qf_queue_list_free accept NULL quietly.
 */
#ifndef QF_QUEUE_H
#define QF_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qf_export.h"
#include "qf_status.h"
#include "qf_tensor.h"
#include "qf_time.h"
#include "qf_waker.h"

QF_BEGIN_DECLS

/* Returned only by the poll forms: the call could not finish now, the
 * waker is registered and will be woken. Not a status code. */
#define QF_PENDING ((qf_code)-1)

typedef struct qf_queue qf_queue;

typedef enum qf_queue_kind {
    QF_QUEUE_FIFO = 0,
    QF_QUEUE_RANDOM_SHUFFLE = 1,
    QF_QUEUE_PADDING_FIFO = 2,
    QF_QUEUE_PRIORITY = 3,
} qf_queue_kind;

/* Creation flags. */
enum {
    /* At most one thread enqueues at a time: use ck_ring's single-producer
     * entry points (wait-free enqueue). Several threads may take turns.
     * Breaking the promise is detected, in every build: an enqueue call
     * (any form) made while another one runs on the queue, blocked ones
     * included, fails with QF_FAILED_PRECONDITION ("<Kind> '<name>' was
     * created single-producer ...") and puts nothing in; what the running
     * call puts in is kept. The check is an exchange on a cache line only
     * producers touch, on this flag's path only. FIFO engine kinds (FIFO,
     * PaddingFIFO); the locked kinds ignore the flag. */
    QF_QUEUE_SINGLE_PRODUCER = 1u << 0,
    /* At most one thread dequeues at a time; the same detection for
     * dequeue calls ("... was created single-consumer ..."). */
    QF_QUEUE_SINGLE_CONSUMER = 1u << 1,
};

/* Default spin before a blocking call sleeps, in ns (see qf_queue_options). */
#define QF_QUEUE_DEFAULT_SPIN_NS 25000

/* Everything a queue is made from. Zero-initialise, then fill in. */
typedef struct qf_queue_options {
    /* Maximum number of elements; negative means unbounded (spec 6). */
    int64_t capacity;
    /* Component dtypes: 1 <= num_components <= 4096 entries (what an
     * element holds; 4095 for a PriorityQueue, which adds one) (spec 7). */
    size_t num_components;
    const qf_dtype *dtypes;
    /* NULL, or one fully defined shape per component (spec 7-8). Without
     * shapes, dequeue_many and dequeue_up_to are refused (spec 20). */
    const qf_shape *shapes;
    /* NULL, or one distinct non-empty name per component (spec 15-16). */
    const char *const *names;
    /* The queue's name, used in every message ("FIFOQueue 'q' is closed.").
     * NULL gives the default op name ("fifo_queue"). Copied. */
    const char *name;
    /* QF_QUEUE_SINGLE_PRODUCER, QF_QUEUE_SINGLE_CONSUMER; other bits are
     * refused (QF_INVALID_ARGUMENT). */
    unsigned flags;
    /* Inline QF_PTR queues: destroys objects the queue still holds when it
     * is freed, and becomes the destructor of tensors the element API
     * returns. NULL: the queue never frees user objects. */
    qf_ptr_dtor ptr_dtor;
    /* How long a blocking call spins, re-checking, before it sleeps: a futex
     * hand-off costs microseconds, so catching a partner that is about to
     * act is cheaper (no spin on one CPU). After the spin, a thread's
     * blocking call on a FIFO queue also yields the CPU up to 16 times,
     * re-checking, which runs a partner waiting for a core (on one CPU
     * too): with any positive spin_ns, and so beyond it. A yield that kept
     * the CPU away over 20 us (another process's busy thread: a yield can
     * cost it a time slice) turns yielding off for the queue until quick
     * yields are seen again. A task's poll-form dequeue on a FIFO queue
     * (which never blocks) that finds the queue empty looks again up to 8
     * times, a few pauses apart (about a microsecond in all), before it
     * parks, when its worker has no task waiting in its next slot and
     * another worker may be producing; looks that keep finding nothing are
     * cut back for the queue, one that pays restores them. On a FIFO
     * queue of capacity 256 or more, a thread's blocking dequeue of one
     * element (or up to n) that finds it empty first waits until a
     * stretch of elements is published, and a thread's blocking enqueue
     * of up to 63 rows that finds no room for them first waits for room
     * for a stretch: the two threads then cross the cores a stretch of
     * the ring at a time instead of one element at a time (a pair of
     * threads near empty 1.1x as fast with stretches of 64 as without,
     * 1.1-1.25x again with 256; 5-9x when the queue stays full). The
     * stretch is a quarter of the capacity in whole steps of 64, at most
     * 256; a wait lasts at most 4 us a step of 64 (16 us from a capacity
     * of 1,024), or spin_ns when smaller, and not past the call's
     * deadline, and ends after 4 us when its partner has not done a step
     * of 64 in that time (and so on for each step). A wait that sees no
     * step (a producer's: fewer than 9 slots free at its last look)
     * backs off for the next 64 to 4,096 waits of its side, so a
     * ping-pong pays 4 us once in 4,096 rounds; one that sees a stream,
     * or a burst of 64 or more, may delay its first element by up to
     * 16 us (4 us past the burst's end).
     * 0 selects QF_QUEUE_DEFAULT_SPIN_NS; negative: never spin, wait for
     * a stretch, yield or look again. */
    int64_t spin_ns;
    /* Shared queues (spec 9-11): non-NULL makes creation return the queue
     * already registered under this name in `registry` (after checking
     * that capacity, dtypes, shapes, min_after_dequeue and seeds agree), or
     * create and register a new one. */
    const char *shared_name;
    /* The scope that shared names live in; NULL: the process-wide default
     * (qf_queue_registry_default()). */
    struct qf_queue_registry *registry;
    /* RandomShuffleQueue only: 0 <= min_after_dequeue < capacity (spec 63). */
    int64_t min_after_dequeue;
    /* RandomShuffleQueue only: seed and seed2 both 0 means "seed randomly"
     * (spec 72); any other pair gives a fixed order for a fixed sequence of
     * operations from one thread. */
    int64_t seed;
    int64_t seed2;
} qf_queue_options;

/**
 * qf_fifo_queue_new() - create a FIFOQueue.
 *
 * Ownership:   the caller holds the only reference (*ret_q).
 * Blocking:    never (allocates the ring).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for no components ("Empty
 *              component types for queue"), an invalid dtype, a shapes list
 *              whose shapes are not fully defined ("All shapes must be fully
 *              defined"), duplicate or empty names, more components than
 *              an element holds, unknown flag bits, a capacity of 0 or
 *              above INT32_MAX, a NULL opts or ret_q, a shared name whose
 *              queue differs from the request (kind, capacity, dtypes,
 *              shapes, component names when the request gives them, ...);
 *              QF_RESOURCE_EXHAUSTED when memory runs out. *ret_q is
 *              untouched on failure.
 */
QF_API qf_code qf_fifo_queue_new(const qf_queue_options *opts, qf_queue **ret_q);

/**
 * qf_random_shuffle_queue_new() - create a RandomShuffleQueue: each dequeue
 * removes a uniformly chosen element (spec 71); while open, dequeues leave
 * at least min_after_dequeue elements behind (spec 66-70).
 *
 * Returns:     as qf_fifo_queue_new(), plus QF_INVALID_ARGUMENT
 *              "min_after_dequeue X must be >= 0" or "min_after_dequeue X
 *              must be < capacity Y" (spec 63). Default name
 *              "random_shuffle_queue".
 */
QF_API qf_code qf_random_shuffle_queue_new(const qf_queue_options *opts, qf_queue **ret_q);

/**
 * qf_padding_fifo_queue_new() - create a PaddingFIFOQueue: FIFO order; shapes
 * are required (spec 85) and may leave dimensions unknown
 * (QF_UNKNOWN_DIM); dequeue returns elements as enqueued, dequeue_many and
 * dequeue_up_to pad every unknown dimension to the largest in the batch
 * (0, false, NULL or "") (spec 89-93). Default name "padding_fifo_queue".
 */
QF_API qf_code qf_padding_fifo_queue_new(const qf_queue_options *opts, qf_queue **ret_q);

/**
 * qf_priority_queue_new() - create a PriorityQueue: opts describe the
 * components *after* the priority; the queue's component 0 is an int64
 * scalar priority that the queue adds (spec 97), so its elements have
 * num_components + 1 components. Smallest priority first; dequeue_many(n)
 * takes a batch only when n elements are present at once (spec 103), so
 * dequeue_many(n) with n above the capacity is refused with
 * QF_INVALID_ARGUMENT (it could never complete on an open queue; TensorFlow
 * waits for ever). Default name "priority_queue".
 */
QF_API qf_code qf_priority_queue_new(const qf_queue_options *opts, qf_queue **ret_q);

/* ------------------------------------------------------- shared queues
 *
 * A registry maps shared names to queues (TensorFlow's container of shared
 * resources). Lookups take no lock (an RCU lock-free hash table); a
 * registered queue stays alive while the registry or any handle holds it.
 */
typedef struct qf_queue_registry qf_queue_registry;

/** qf_queue_registry_new() - an empty registry. Caller owns it. */
QF_API qf_code qf_queue_registry_new(qf_queue_registry **ret_reg);
/** qf_queue_registry_free() - drop the registry's references to its queues
 *  and free it. Not concurrently with other use of the registry. NULL-safe. */
QF_API void qf_queue_registry_free(qf_queue_registry *reg);
/** qf_queue_registry_default() - the process-wide registry (never freed). */
QF_API qf_queue_registry *qf_queue_registry_default(void);
/** qf_queue_registry_lookup() - the queue registered as `shared_name`, with
 *  a new reference for the caller, or NULL. Lock-free; any thread. */
QF_API qf_queue *qf_queue_registry_lookup(qf_queue_registry *reg, const char *shared_name);
/** qf_queue_registry_remove() - forget `shared_name` (the queue lives on
 *  while handles hold it). Returns true when it was registered. */
QF_API bool qf_queue_registry_remove(qf_queue_registry *reg, const char *shared_name);
/** The shared name a queue was created with, or NULL. */
QF_API const char *qf_queue_shared_name(const qf_queue *q);
/** RandomShuffleQueue attributes (0 for other kinds). */
QF_API int64_t qf_queue_min_after_dequeue(const qf_queue *q);

/**
 * qf_ptr_queue_new() - shorthand for the zero-allocation queue: one QF_PTR
 * scalar component (inline mode), FIFO order.
 *
 * `dtor` destroys objects still in the queue when it is freed (may be
 * NULL). Same returns as qf_fifo_queue_new().
 */
QF_API qf_code qf_ptr_queue_new(int64_t capacity, const char *name, unsigned flags,
                                qf_ptr_dtor dtor, qf_queue **ret_q);

/** qf_queue_ref() - another reference; returns q. Lock-free; NULL-safe. */
QF_API qf_queue *qf_queue_ref(qf_queue *q);
/** qf_queue_unref() - drop a reference; the last one frees the queue and
 *  what it holds. Needs quiescence for the last reference. NULL-safe. */
QF_API void qf_queue_unref(qf_queue *q);

/* Attributes: fixed at creation, wait-free, any thread. Pointers stay valid
 * while a reference is held. */
QF_API const char *qf_queue_name(const qf_queue *q);
QF_API qf_queue_kind qf_queue_get_kind(const qf_queue *q);
/** "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue", "PriorityQueue". */
QF_API const char *qf_queue_kind_name(const qf_queue *q);
/** The capacity; INT32_MAX for an unbounded queue (as TensorFlow stores it). */
QF_API int64_t qf_queue_capacity(const qf_queue *q);
QF_API size_t qf_queue_num_components(const qf_queue *q);
QF_API qf_dtype qf_queue_dtype(const qf_queue *q, size_t i);
/** Component i's shape, or NULL when the queue has no shapes. */
QF_API const qf_shape *qf_queue_shape(const qf_queue *q, size_t i);
/** Component i's name, or NULL when the queue has no names. */
QF_API const char *qf_queue_component_name(const qf_queue *q, size_t i);
/** True when the queue stores values in its slots rather than elements:
 *  one scalar component of QF_PTR or of a number or bool type of at most 8
 *  bytes (int64, float64, complex64 and the smaller ones; on 64-bit
 *  little-endian targets). An element enqueued there is freed by the
 *  enqueue and a dequeue makes a new one from the calling thread's caches
 *  (for a number, the element and its tensor in one block, which lives
 *  until both are freed: a tensor taken out of it outlives the element).
 *  The _ptr calls apply to QF_PTR inline queues. Either way the element
 *  API behaves the same. */
QF_API bool qf_queue_is_inline(const qf_queue *q);
/** The destructor the queue runs on QF_PTR objects it still holds when
 *  freed (qf_queue_options.ptr_dtor), or NULL. */
QF_API qf_ptr_dtor qf_queue_ptr_dtor(const qf_queue *q);

/**
 * qf_queue_size() - the number of elements a dequeue could take now
 * (spec 24): elements being inserted or held by a partial dequeue_many do
 * not count. Wait-free; a snapshot.
 */
QF_API int64_t qf_queue_size(const qf_queue *q);

/** qf_queue_is_closed() - true once a close of either kind has happened
 *  (spec 25). Wait-free; acquire. */
QF_API bool qf_queue_is_closed(const qf_queue *q);

/**
 * qf_queue_close() - close the queue: no new enqueues (they fail with
 * QF_CANCELLED "... is closed."), and once drained every dequeue fails with
 * QF_OUT_OF_RANGE.
 *
 * cancel_pending_enqueues false: enqueues already blocked still complete
 *   (see the header's notes on spec 30); a second plain close fails with
 *   QF_CANCELLED "Queue '<name>' is already closed." (spec 2, 34).
 * cancel_pending_enqueues true: blocked enqueues fail at once with
 *   QF_CANCELLED "Enqueue operation was cancelled"; rows an enqueue_many
 *   already inserted stay (spec 32). Succeeds on an already closed queue.
 *
 * Blocking:    never. Concurrency: any thread. Progress: lock-free apart
 *              from waking waiters.
 * Ordering:    release: a dequeuer that observes the close sees everything
 *              enqueued before it.
 */
QF_API qf_code qf_queue_close(qf_queue *q, bool cancel_pending_enqueues);

/* ------------------------------------------------------------ element API */

/**
 * qf_queue_enqueue() / _until() / qf_queue_try_enqueue() - add one element.
 *
 * Ownership:   on QF_OK the queue owns `elem`; on failure the caller keeps it.
 * Blocking:    while the queue is full (see the three forms above).
 * Returns:     QF_OK;
 *              QF_INVALID_ARGUMENT for a NULL element or queue, a wrong
 *                component count ("Wrong number of components in tuple.
 *                Expected 2, got 1"), dtype ("Type mismatch in tuple
 *                component 0. Expected float, got int32"), shape ("Shape
 *                mismatch in tuple component 1. Expected [3,3], got [3,4]")
 *                or names (spec 15, 17-18); the queue is unchanged (spec 12).
 *                These checks come first: such an element gets this code
 *                on a closed queue too;
 *              QF_CANCELLED when closed ("FIFOQueue 'q' is closed.", spec 31)
 *                or cancelled while waiting ("Enqueue operation was
 *                cancelled", spec 32);
 *              QF_FAILED_PRECONDITION on a QF_QUEUE_SINGLE_PRODUCER queue
 *                while another enqueue runs on it (nothing went in; the
 *                same for every enqueue form, _many and _ptr included);
 *              QF_DEADLINE_EXCEEDED ("FIFOQueue 'q': Timed out waiting for
 *                notification");
 *              QF_UNAVAILABLE (try form: "FIFOQueue 'q' is full").
 */
QF_API qf_code qf_queue_enqueue(qf_queue *q, qf_element *elem);
QF_API qf_code qf_queue_enqueue_until(qf_queue *q, qf_element *elem, qf_deadline deadline);
QF_API qf_code qf_queue_try_enqueue(qf_queue *q, qf_element *elem);

/**
 * qf_queue_enqueue_many() / _until() / qf_queue_try_enqueue_many() - add
 * the rows of `batch` (every component split along its first dimension) as
 * separate elements, in order.
 *
 * Ownership:   on QF_OK the queue owns `batch`. On failure the caller keeps
 *              it; if some rows went in before the failure (cancel, close,
 *              deadline), `batch` then holds only the rows that did not, and
 *              *ret_enqueued (when non-NULL) says how many did.
 * Blocking:    inserts what fits at once and waits for room for the rest
 *              (spec 29). A zero-row batch succeeds at once, even on a
 *              closed queue (spec 22).
 * Returns:     as qf_queue_enqueue(), plus QF_INVALID_ARGUMENT for a scalar
 *              component ("... must have rank >= 1") or differing first
 *              dimensions: without shapes "All input tensors must have the
 *              same size in the 0th dimension. Component 1 has 2, and should
 *              have 3" (spec 14, 19); with shapes every component must be
 *              [rows of component 0] + its shape ("Shape mismatch in tuple
 *              component 1. Expected [3], got [2]", spec 18). The try form
 *              inserts nothing unless all rows fit.
 */
QF_API qf_code qf_queue_enqueue_many(qf_queue *q, qf_element *batch, size_t *ret_enqueued);
QF_API qf_code qf_queue_enqueue_many_until(qf_queue *q, qf_element *batch, qf_deadline deadline,
                                           size_t *ret_enqueued);
QF_API qf_code qf_queue_try_enqueue_many(qf_queue *q, qf_element *batch);

/**
 * qf_queue_dequeue() / _until() / qf_queue_try_dequeue() - take the oldest
 * element.
 *
 * Ownership:   on QF_OK *ret_elem is the caller's (free with
 *              qf_element_free()); it carries the queue's component names.
 * Returns:     QF_OK; QF_OUT_OF_RANGE when closed and drained ("FIFOQueue
 *              'q' is closed and has insufficient elements (requested 1,
 *              current size 0)", spec 35, 53-54); QF_DEADLINE_EXCEEDED;
 *              QF_UNAVAILABLE (try form: "FIFOQueue 'q' is empty"; a try
 *              dequeue_many: "FIFOQueue 'q' has fewer than 4 elements");
 *              QF_FAILED_PRECONDITION on a QF_QUEUE_SINGLE_CONSUMER queue
 *              while another dequeue runs on it (every dequeue form).
 *              *ret_elem untouched on failure.
 */
QF_API qf_code qf_queue_dequeue(qf_queue *q, qf_element **ret_elem);
QF_API qf_code qf_queue_dequeue_until(qf_queue *q, qf_deadline deadline, qf_element **ret_elem);
QF_API qf_code qf_queue_try_dequeue(qf_queue *q, qf_element **ret_elem);

/**
 * qf_queue_dequeue_many() / _until() / qf_queue_try_dequeue_many() - take
 * exactly n elements, stacked: each component of *ret_batch has shape
 * [n] + the component's shape.
 *
 * Needs shapes (QF_INVALID_ARGUMENT "FIFOQueue's DequeueMany and DequeueUpTo
 * require the components to have specified shapes.", spec 20; a PriorityQueue
 * says "PriorityQueue's DequeueMany requires ..." for both forms, spec 105)
 * and n >= 0
 * ("DequeueManyOp requested -1 < 0 elements", spec 21). n == 0 returns an
 * empty batch at once, even on a closed queue (spec 23). Gathers elements
 * as they arrive, so n may exceed the capacity (spec 52). If the queue is
 * closed (or the deadline passes) before n arrive, the elements already
 * taken go back to the front of the queue in their order and the call
 * fails (spec 36, 55-56). The try form takes nothing unless n are there.
 * A component of rank QF_MAX_RANK has no batch shape (the batch adds a
 * dimension): QF_UNIMPLEMENTED (spec 94), and the elements taken go back
 * to the front in their order, whole, for the single dequeues. Out of
 * memory (QF_RESOURCE_EXHAUSTED) gives them back the same way, except
 * while a batch of whole elements is being stacked, when the elements
 * taken are lost (the message says how many) rather than put back with
 * tensors missing.
 */
QF_API qf_code qf_queue_dequeue_many(qf_queue *q, int64_t n, qf_element **ret_batch);
QF_API qf_code qf_queue_dequeue_many_until(qf_queue *q, int64_t n, qf_deadline deadline,
                                           qf_element **ret_batch);
QF_API qf_code qf_queue_try_dequeue_many(qf_queue *q, int64_t n, qf_element **ret_batch);

/**
 * qf_queue_dequeue_up_to() / _until() / qf_queue_try_dequeue_up_to() - like
 * dequeue_many, but once the queue is closed it returns what is left if
 * that is fewer than n (at least 1; spec 57-58); QF_OUT_OF_RANGE only when
 * closed and empty. While the queue is open it waits for n (spec 48).
 * The try form returns between 1 and n elements that are there now.
 * n == 0 returns an empty batch at once, even on a closed queue (spec 23),
 * as dequeue_many does.
 */
QF_API qf_code qf_queue_dequeue_up_to(qf_queue *q, int64_t n, qf_element **ret_batch);
QF_API qf_code qf_queue_dequeue_up_to_until(qf_queue *q, int64_t n, qf_deadline deadline,
                                            qf_element **ret_batch);
QF_API qf_code qf_queue_try_dequeue_up_to(qf_queue *q, int64_t n, qf_element **ret_batch);

/* ------------------------------------------------- inline QF_PTR fast path
 *
 * For queues where qf_queue_is_inline() is true and the component dtype is
 * QF_PTR (qf_ptr_queue_new()). The pointer itself is the element: no
 * allocation, no tensor. Ownership of the pointed-to object moves with it
 * exactly as elements do. QF_INVALID_ARGUMENT on any other queue. Errors,
 * blocking and closing behave exactly as in the element API above.
 */
QF_API qf_code qf_queue_enqueue_ptr(qf_queue *q, void *p);
QF_API qf_code qf_queue_enqueue_ptr_until(qf_queue *q, void *p, qf_deadline deadline);
QF_API qf_code qf_queue_try_enqueue_ptr(qf_queue *q, void *p);

QF_API qf_code qf_queue_dequeue_ptr(qf_queue *q, void **ret_p);
QF_API qf_code qf_queue_dequeue_ptr_until(qf_queue *q, qf_deadline deadline, void **ret_p);
QF_API qf_code qf_queue_try_dequeue_ptr(qf_queue *q, void **ret_p);

/* ------------------------------------------------------- values fast path
 *
 * For FIFOQueues whose elements are a few small dense tensors of fixed
 * shape (qf_queue_takes_values()): an int64 label and a float32 [16]
 * feature row, say. The components' values go into the queue straight from
 * the caller's buffers and come out straight into them: no tensor and no
 * element on either side, and nothing allocated at all where the queue
 * keeps its values in its ring's cells (a bounded queue of at most 248
 * bytes of values; otherwise a put takes one block from the calling
 * thread's block cache, as an element's put does). Such a queue mixes
 * freely with the element API (an element enqueued is dequeued as values
 * and the other way round, in one FIFO order).
 */

/**
 * qf_queue_takes_values() - whether the _values calls apply to q: a
 * FIFOQueue (not padding, shuffle or priority), not inline (one scalar of
 * at most 8 bytes is kept inline: use the element calls), whose components
 * (at most 16) all have a numeric or bool dtype and a fully defined shape
 * of rank below QF_MAX_RANK, with at most 512 bytes of values in all when
 * each component's values are rounded up to 8 bytes. Wait-free; false
 * (and the error recorded) for NULL.
 */
QF_API bool qf_queue_takes_values(const qf_queue *q);

/**
 * qf_queue_enqueue_values() / _until() / qf_queue_try_enqueue_values() /
 * qf_queue_poll_enqueue_values() - add one element given as its
 * components' values.
 *
 * vals[c] points at component c's values: qf_shape_num_elements() of its
 * shape, of its dtype, in row-major order (a bool is one byte, 0 or 1); any
 * alignment. They are copied before the call returns; the caller keeps its
 * buffers. (An array of non-const pointers needs a cast to const void
 * *const *.)
 * Blocking, thread safety, progress: as qf_queue_enqueue() and its forms
 *              (the poll form, for tasks, as qf_queue_poll_enqueue()).
 * Returns:     QF_OK;
 *              QF_INVALID_ARGUMENT for a NULL queue, vals, vals[c] or
 *                waker, or a queue that does not take values
 *                (qf_queue_takes_values() false; the message says which
 *                rule it breaks); nothing went in;
 *              QF_RESOURCE_EXHAUSTED when a queue that keeps its values in
 *                blocks has none left (out of memory); nothing went in;
 *              otherwise as qf_queue_enqueue(): QF_CANCELLED,
 *                QF_FAILED_PRECONDITION, QF_DEADLINE_EXCEEDED,
 *                QF_UNAVAILABLE (and QF_PENDING for the poll form).
 */
QF_API qf_code qf_queue_enqueue_values(qf_queue *q, const void *const *vals);
QF_API qf_code qf_queue_enqueue_values_until(qf_queue *q, const void *const *vals,
                                             qf_deadline deadline);
QF_API qf_code qf_queue_try_enqueue_values(qf_queue *q, const void *const *vals);
QF_API qf_code qf_queue_poll_enqueue_values(qf_queue *q, const void *const *vals, qf_waker *w);

/**
 * qf_queue_dequeue_values() / _until() / qf_queue_try_dequeue_values() /
 * qf_queue_poll_dequeue_values() - take the oldest element into the
 * caller's buffers: component c's values into outs[c] (room for
 * qf_shape_num_elements() of its shape of its dtype; any alignment), as
 * qf_queue_enqueue_values() reads them.
 * Blocking, thread safety, progress: as qf_queue_dequeue() and its forms
 *              (the poll form, for tasks, as qf_queue_poll_dequeue()).
 * Returns:     QF_OK (every outs[c] written);
 *              QF_INVALID_ARGUMENT for a NULL queue, outs, outs[c] or
 *                waker, or a queue that does not take values; nothing was
 *                taken;
 *              otherwise as qf_queue_dequeue(): QF_OUT_OF_RANGE (closed
 *                and drained), QF_DEADLINE_EXCEEDED, QF_UNAVAILABLE,
 *                QF_FAILED_PRECONDITION (and QF_PENDING for the poll
 *                form); no outs[c] written.
 */
QF_API qf_code qf_queue_dequeue_values(qf_queue *q, void *const *outs);
QF_API qf_code qf_queue_dequeue_values_until(qf_queue *q, qf_deadline deadline, void *const *outs);
QF_API qf_code qf_queue_try_dequeue_values(qf_queue *q, void *const *outs);
QF_API qf_code qf_queue_poll_dequeue_values(qf_queue *q, qf_waker *w, void *const *outs);

/**
 * qf_queue_enqueue_many_ptrs() / _until() / qf_queue_try_enqueue_many_ptrs()
 * - enqueue ps[0..n) in order, as enqueue_many does with the rows of a
 * batch.
 *
 * Ownership:   on QF_OK the queue owns every pointed-to object. On failure
 *              after partial progress (close, cancel, deadline) the first
 *              *ret_enqueued (when non-NULL) went in and the rest stay the
 *              caller's. The try form inserts all n or nothing.
 * Blocking:    inserts what fits at once and waits for room for the rest
 *              (the three forms as above). n == 0 succeeds at once.
 * Returns:     as qf_queue_enqueue_many(); QF_INVALID_ARGUMENT for a queue
 *              that is not a pointer queue or ps NULL with n > 0;
 *              QF_UNAVAILABLE (try form: not room for all n).
 */
QF_API qf_code qf_queue_enqueue_many_ptrs(qf_queue *q, void *const *ps, size_t n,
                                          size_t *ret_enqueued);
QF_API qf_code qf_queue_enqueue_many_ptrs_until(qf_queue *q, void *const *ps, size_t n,
                                                qf_deadline deadline, size_t *ret_enqueued);
QF_API qf_code qf_queue_try_enqueue_many_ptrs(qf_queue *q, void *const *ps, size_t n);

/**
 * qf_queue_dequeue_many_ptrs() / _until() / qf_queue_try_dequeue_many_ptrs()
 * - take exactly n pointers into ret_ps[0..n), oldest first (the rules of
 * qf_queue_dequeue_many(); no shapes needed). n == 0 succeeds at once.
 * On failure nothing is taken and ret_ps is untouched (taken pointers go
 * back to the front), but for one case: with other consumers taking at the
 * same moment, a call that lost the race for the slots it had counted may
 * have copied their pointers (which it did not take, and which are not
 * yours) into ret_ps before it failed; so read ret_ps only after QF_OK.
 * Returns:     as qf_queue_dequeue_many(); QF_INVALID_ARGUMENT for a queue
 *              that is not a pointer queue or a NULL ret_ps; QF_UNAVAILABLE
 *              (try form: fewer than n there now).
 */
QF_API qf_code qf_queue_dequeue_many_ptrs(qf_queue *q, size_t n, void **ret_ps);
QF_API qf_code qf_queue_dequeue_many_ptrs_until(qf_queue *q, size_t n, qf_deadline deadline,
                                                void **ret_ps);
QF_API qf_code qf_queue_try_dequeue_many_ptrs(qf_queue *q, size_t n, void **ret_ps);

/**
 * qf_queue_dequeue_up_to_ptrs() / _until() / qf_queue_try_dequeue_up_to_ptrs()
 * - take between 1 and n pointers (the rules of qf_queue_dequeue_up_to()),
 * *ret_n gets the count. The try form takes what is there now (at least
 * one). n == 0 succeeds at once with *ret_n = 0. *ret_n untouched on
 * failure, ret_ps too but for the race of qf_queue_dequeue_many_ptrs()
 * (read it only after QF_OK).
 */
QF_API qf_code qf_queue_dequeue_up_to_ptrs(qf_queue *q, size_t n, void **ret_ps, size_t *ret_n);
QF_API qf_code qf_queue_dequeue_up_to_ptrs_until(qf_queue *q, size_t n, qf_deadline deadline,
                                                 void **ret_ps, size_t *ret_n);
QF_API qf_code qf_queue_try_dequeue_up_to_ptrs(qf_queue *q, size_t n, void **ret_ps, size_t *ret_n);

/* The first spelling of the pointer array calls: one function per call
 * with a deadline argument, where QF_NO_WAIT meant the try form. They keep
 * working exactly as before; the _ptrs calls above replace them. */
QF_API qf_code qf_queue_enqueue_many_ptr(qf_queue *q, void *const *ps, size_t n,
                                         qf_deadline deadline, size_t *ret_enqueued)
    QF_DEPRECATED(
        "use qf_queue_enqueue_many_ptrs(), _ptrs_until() or qf_queue_try_enqueue_many_ptrs()");
QF_API qf_code qf_queue_dequeue_many_ptr(qf_queue *q, size_t n, qf_deadline deadline, void **ret_ps)
    QF_DEPRECATED(
        "use qf_queue_dequeue_many_ptrs(), _ptrs_until() or qf_queue_try_dequeue_many_ptrs()");
QF_API qf_code qf_queue_dequeue_up_to_ptr(qf_queue *q, size_t n, qf_deadline deadline,
                                          void **ret_ps, size_t *ret_n)
    QF_DEPRECATED(
        "use qf_queue_dequeue_up_to_ptrs(), _ptrs_until() or qf_queue_try_dequeue_up_to_ptrs()");

/* ------------------------------------------------ bulk: at least min, at most max
 *
 * The dequeue a server's batching loop wants (moodycamel's
 * wait_dequeue_bulk_timed shape), on every queue kind.
 */

/**
 * qf_queue_dequeue_bulk_ptr() / _until() / qf_queue_try_dequeue_bulk_ptr() /
 * qf_queue_poll_dequeue_bulk_ptr() - take between min and max pointers.
 *
 * Waits until at least `min` can be taken (the try form: until never, the
 * poll form: registers `w` and returns QF_PENDING), then takes, at once,
 * what is there up to `max`, without waiting for more. Nothing is taken
 * while it waits, so a deadline or a close never has anything to give back.
 * Once the queue is closed and nothing more can arrive it returns the 1..max
 * elements left, and QF_OUT_OF_RANGE when there are none. The order is the
 * queue kind's (FIFO; random; smallest priority first, leaving
 * min_after_dequeue behind in an open RandomShuffleQueue).
 *
 * Ownership:   on QF_OK ret_ps[0..*ret_n) are the caller's.
 * Blocking:    plain form until min arrive or the queue ends; _until until
 *              `deadline`; try and poll never.
 * Concurrency: any number of concurrent producers and consumers.
 * Progress:    lock-free for FIFO kinds when it does not wait; blocking
 *              otherwise (see the kinds' notes).
 * Ordering:    acquire: what producers wrote before enqueueing is visible.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT (not a pointer queue, min == 0,
 *              min > max, min > capacity, NULL arrays); QF_DEADLINE_EXCEEDED;
 *              QF_UNAVAILABLE (try: fewer than min there); QF_PENDING (poll);
 *              QF_OUT_OF_RANGE (closed and empty); QF_FAILED_PRECONDITION
 *              (a blocking form called inside a task). *ret_n untouched
 *              on failure, ret_ps too but for the race of
 *              qf_queue_dequeue_many_ptrs() (read it only after QF_OK).
 */
QF_API qf_code qf_queue_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, void **ret_ps,
                                         size_t *ret_n);
QF_API qf_code qf_queue_dequeue_bulk_ptr_until(qf_queue *q, size_t min, size_t max,
                                               qf_deadline deadline, void **ret_ps, size_t *ret_n);
QF_API qf_code qf_queue_try_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, void **ret_ps,
                                             size_t *ret_n);
QF_API qf_code qf_queue_poll_dequeue_bulk_ptr(qf_queue *q, size_t min, size_t max, qf_waker *w,
                                              void **ret_ps, size_t *ret_n);

/**
 * qf_queue_dequeue_bulk() / _until() / qf_queue_try_dequeue_bulk() /
 * qf_queue_poll_dequeue_bulk() - the element form: between min and max
 * elements, stacked into *ret_batch (each component of shape [k] + the
 * component's shape, k in min..max; padded on a PaddingFIFOQueue). Same
 * rules as the pointer form; needs shapes, like dequeue_many (spec 20).
 */
QF_API qf_code qf_queue_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_element **ret_batch);
QF_API qf_code qf_queue_dequeue_bulk_until(qf_queue *q, int64_t min, int64_t max,
                                           qf_deadline deadline, qf_element **ret_batch);
QF_API qf_code qf_queue_try_dequeue_bulk(qf_queue *q, int64_t min, int64_t max,
                                         qf_element **ret_batch);
QF_API qf_code qf_queue_poll_dequeue_bulk(qf_queue *q, int64_t min, int64_t max, qf_waker *w,
                                          qf_element **ret_batch);

/* ---------------------------------------------------------- poll (task) forms
 *
 * For schedulers (qflow's runtime, or your own). Never block. When the call
 * cannot finish now, `w` is registered with the queue and QF_PENDING is
 * returned; the queue wakes `w` once the call may succeed (an element or
 * room arrived, the queue closed, or enqueues were cancelled), and the
 * caller polls again. A wake may be spurious (another consumer was faster):
 * polling again then returns QF_PENDING and re-registers. A poll that
 * finishes does not leave `w` registered. To abandon a pending poll, call
 * qf_queue_cancel_poll() (returns true when `w` had not been woken).
 * In a task of qflow's runtime that the runtime has cancelled (a shutdown:
 * TensorFlow's session close), a poll that would return QF_PENDING
 * withdraws `w` and returns QF_CANCELLED "Dequeue operation was cancelled"
 * (or "Enqueue operation was cancelled") instead, TensorFlow's words for
 * the ops a session close cancels (spec 37); nothing was taken or put, and
 * an element stays the caller's. A poll that can finish at once still does.
 */
QF_API qf_code qf_queue_poll_enqueue(qf_queue *q, qf_element *elem, qf_waker *w);
QF_API qf_code qf_queue_poll_dequeue(qf_queue *q, qf_waker *w, qf_element **ret_elem);
QF_API qf_code qf_queue_poll_enqueue_ptr(qf_queue *q, void *p, qf_waker *w);
QF_API qf_code qf_queue_poll_dequeue_ptr(qf_queue *q, qf_waker *w, void **ret_p);
QF_API bool qf_queue_cancel_poll(qf_queue *q, qf_waker *w);

/* ------------------------------------------------------------ from_list */

/** A fixed list of compatible queues (TensorFlow's QueueBase.from_list). */
typedef struct qf_queue_list qf_queue_list;

/**
 * qf_queue_list_new() - a list of queues one of which is picked by index
 * at run time (spec 41).
 *
 * Ownership:   the list takes a reference to each queue; free it with
 *              qf_queue_list_free(). The array itself stays the caller's.
 * Blocking:    never. Thread safety: the list is immutable once made, so
 *              any thread may pick from it.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for an empty list, a NULL queue,
 *              or queues whose dtypes or component names differ (the
 *              message names the first queue that differs).
 */
QF_API qf_code qf_queue_list_new(qf_queue *const *queues, size_t n, qf_queue_list **ret_list);
/**
 * qf_queue_list_pick() - the queue at `index`, as a new reference
 * (release it with qf_queue_unref()). Wait-free.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT "Index i is not in the range
 *              [0, n) ..." for an index outside the list (spec 41).
 */
QF_API qf_code qf_queue_list_pick(const qf_queue_list *l, int64_t index, qf_queue **ret_queue);
QF_API size_t qf_queue_list_size(const qf_queue_list *l);
/**
 * qf_queue_list_shape() - component i's static shape merged over the list
 * (spec 42): equal dimensions kept, differing ones QF_UNKNOWN_DIM, a rank
 * difference (or a queue without shapes) QF_UNKNOWN_RANK. NULL when no
 * queue of the list has shapes, or i is out of range.
 */
QF_API const qf_shape *qf_queue_list_shape(const qf_queue_list *l, size_t i);
/** qf_queue_list_free() - drop the list and its references. NULL-safe. */
QF_API void qf_queue_list_free(qf_queue_list *l);

QF_END_DECLS

#endif
