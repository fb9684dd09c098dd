/* qf_serve.h - a dynamic batcher for inference servers: requests in, batches
 * out, with deadlines, priority levels, admission control, a clean drain
 * and metrics.
 *
 * Request handlers submit requests (a user pointer plus a deadline, a
 * priority level and a completion); a model takes them as batches. A batch
 * closes when it holds max_batch_size requests, when its oldest request
 * has waited max_queue_delay, or early at a preferred size when nothing
 * more is queued. Every request submit accepts is answered exactly once:
 *
 *     QF_OK                 handed to the model, and the executor returned
 *                           QF_OK for its batch (an executor error is passed
 *                           on as the request's status instead);
 *     QF_DEADLINE_EXCEEDED  its deadline passed while it was queued: it is
 *                           answered when a batch is formed and never
 *                           reaches the model;
 *     QF_UNAVAILABLE        admission refused it (full, or draining), or it
 *                           was dropped to make room (DROP_OLDEST);
 *     QF_CANCELLED          still queued when a drain's deadline passed, or
 *                           when the batcher was freed.
 *
 * through its callback, or, for a request without one, through its
 * waitable handle (qf_serve_request_wait*(), and qf_serve_request_poll()
 * for tasks).
 *
 *     static qf_code run_model(void *model, qf_serve_request *const *reqs, size_t n)
 *     {
 *         for (size_t i = 0; i < n; i++)
 *             infer(model, reqs[i]->user);    // the handler's data
 *         return QF_OK;                       // every request answered QF_OK
 *     }
 *
 *     qf_serve_options o = {.name = "resnet", .max_batch_size = 32,
 *                           .max_queue_delay_ns = 500000, .max_queued = 4096,
 *                           .coord = coord};  // a stop request drains it
 *     qf_serve *s;
 *     qf_serve_new(&o, &s);
 *     qf_serve_spawn(s, qf_runtime_default(), run_model, model, NULL, NULL);
 *
 *     // in a request handler (any thread):
 *     qf_serve_request r;
 *     qf_serve_request_init(&r, &my_data, qf_deadline_in_s(0.05), 0, NULL, NULL);
 *     qf_serve_submit(s, &r);
 *     qf_code st;
 *     qf_serve_request_wait(&r, &st);         // QF_OK: my_data has the answer
 *
 *     // at shutdown: hand out what is queued, cancel the rest after 2 s
 *     qf_serve_report rep;
 *     qf_serve_drain(s, qf_deadline_in_s(2.0), &rep);
 *     qf_serve_free(s);
 *
 * Priority levels. A request's priority is a level 0..priority_levels-1;
 * level 0 is the most urgent (TensorFlow Serving's and Triton's convention,
 * and the PriorityQueue's smallest-first). A batch takes the most urgent
 * levels first and each level in arrival order. With max_bypass = k, a
 * level that had requests waiting while k batches in a row filled up
 * without taking any of them is served first by the next batch, so low
 * levels are not starved.
 *
 * Structure. Each level is a qflow pointer queue (a lock-free ring). A
 * submit is an admission CAS on one word (depth and the drain flag), the
 * ring enqueue, and one atomic add on a ready count; it makes a wake
 * syscall only when a consumer sleeps and the batch it waits for can now
 * close. The consumer side (forming batches) holds a short futex mutex
 * while it moves requests out of the rings and decides, never while it
 * sleeps, runs the model or calls a completion. Waiting uses qflow wakers:
 * a thread sleeps on a futex, a task parks with its timer armed at the
 * batch's close time.
 *
 * Synchronization table
 *   qf_serve_submit / try / poll          any number of threads or tasks;
 *                                         lock-free except waiting (BLOCK)
 *   qf_serve_next_batch* / complete       any number of consumers (usually
 *                                         one model thread or task); batch
 *                                         formation is serialised by the
 *                                         consumer mutex
 *   qf_serve_begin_drain                  any thread, stop actions
 *                                         included; never blocks
 *   qf_serve_drain, stats, metrics        any thread
 *   qf_serve_request_wait* / poll         any number of waiters per request
 *   qf_serve_free                         quiescence (see there)
 */
#ifndef QF_SERVE_H
#define QF_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qf_coordinator.h"
#include "qf_export.h"
#include "qf_runtime.h"
#include "qf_status.h"
#include "qf_thread.h"
#include "qf_time.h"
#include "qf_waker.h"

QF_BEGIN_DECLS

typedef struct qf_serve qf_serve;
typedef struct qf_serve_request qf_serve_request;

/* Limits checked by qf_serve_new(). */
#define QF_SERVE_MAX_BATCH 65536
#define QF_SERVE_MAX_LEVELS 64
/* Drain grace of a stop requested through the Coordinator, by default. */
#define QF_SERVE_DEFAULT_DRAIN_GRACE_NS 5000000000LL

/* A completion callback. Runs exactly once per accepted request, on the
 * thread that settles it: the executor's (OK, executor errors,
 * DEADLINE_EXCEEDED, CANCELLED), the submitting thread (refusals at
 * submit), another submitter (DROP_OLDEST victims) or a draining thread
 * (CANCELLED). From its first instruction the request is the caller's
 * again: the callback may free it or submit it anew. It must not block for
 * long, and must not call qf_serve_drain(), qf_serve_free() or the
 * next_batch calls of the same batcher. */
typedef void (*qf_serve_done_fn)(qf_serve_request *req, qf_code status, void *arg);

/* A request. Caller-owned storage (no allocation per request): put it on
 * the stack of a handler that waits for it, or inside the handler's own
 * object. Set up with qf_serve_request_init(); the public fields may be
 * read at any time and written only while the request is not submitted.
 * Fields starting with qf__ belong to the batcher. */
struct qf_serve_request {
    void *user;            /* the caller's data, what the model works on */
    qf_deadline deadline;  /* absolute CLOCK_MONOTONIC ns; QF_FOREVER: none */
    uint32_t priority;     /* 0 .. priority_levels-1; 0 is most urgent */
    qf_serve_done_fn done; /* NULL: a waitable request */
    void *done_arg;
    int64_t qf__admit_ns; /* when admission accepted it */
    qf_serve_request *qf__next;
    QF_ATOMIC(uint32_t) qf__state;
    QF_ATOMIC(int32_t) qf__status;
    qf_waitlist qf__waiters;
    /* per-priority policy, cost batching, adaptive delay (issue 30) */
    uint64_t qf__cost;   /* its cost (cost_fn), taken at submit */
    int64_t qf__due_ns;  /* its level's timeout, absolute; INT64_MAX: none */
    int64_t qf__hand_ns; /* when it was handed out */
    uint32_t qf__level;  /* the level it is queued at (demotion moves it) */
};

/**
 * qf_serve_request_init() - prepare a request (not submitted, no answer).
 *
 * @user:       the caller's data; never dereferenced by the batcher.
 * @deadline:   absolute deadline (qf_deadline_in_s()); QF_FOREVER for none.
 *              A request still queued at its deadline is answered
 *              QF_DEADLINE_EXCEEDED instead of being batched.
 * @priority:   its level; checked against the batcher at submit.
 * @done:       completion callback, or NULL to wait on the request itself.
 * Ownership:   nothing is taken; `req` must stay valid from submit until it
 *              is answered.
 * Blocking:    never.  Concurrency: not while the request is submitted.
 * A NULL req records QF_INVALID_ARGUMENT and does nothing else.
 */
QF_API void qf_serve_request_init(qf_serve_request *req, void *user, qf_deadline deadline,
                                  uint32_t priority, qf_serve_done_fn done, void *done_arg);

/**
 * qf_serve_request_wait() / _until() / qf_serve_request_try_wait() - wait
 * for a waitable request's answer.
 *
 * Blocking:    plain form until answered; _until until `deadline`; try
 *              never. Thread forms: inside a task they return
 *              QF_FAILED_PRECONDITION (use qf_serve_request_poll()).
 * Concurrency: any number of waiters on one request.
 * Ordering:    acquire: what the executor wrote (into req->user, say)
 *              before its batch was completed is visible on QF_OK.
 * Returns:     QF_OK with the answer in *ret_status; QF_DEADLINE_EXCEEDED
 *              (_until: not answered yet); QF_UNAVAILABLE (try: not answered
 *              yet); QF_INVALID_ARGUMENT for NULL arguments, a request never
 *              submitted or one with a callback (its answer goes there).
 *              *ret_status untouched unless QF_OK.
 */
QF_API qf_code qf_serve_request_wait(qf_serve_request *req, qf_code *ret_status);
QF_API qf_code qf_serve_request_wait_until(qf_serve_request *req, qf_deadline deadline,
                                           qf_code *ret_status);
QF_API qf_code qf_serve_request_try_wait(qf_serve_request *req, qf_code *ret_status);

/**
 * qf_serve_request_poll() - the task form: the answer, or QF_PENDING with
 * `w` registered on the request (the answer wakes it).
 *
 * Ownership:   the request borrows `w` until it is woken or withdrawn
 *              (qf_serve_request_cancel_poll()).
 * Blocking:    never.  Concurrency: as the wait forms.
 * Returns:     QF_OK with *ret_status; QF_PENDING; QF_INVALID_ARGUMENT as
 *              the wait forms, or a NULL waker.
 */
QF_API qf_code qf_serve_request_poll(qf_serve_request *req, qf_waker *w, qf_code *ret_status);

/** qf_serve_request_cancel_poll() - withdraw a waker left by a pending
 *  poll. True when it had not been woken. Owner of `w` only; never sleeps
 *  (a wake under way is waited out by spinning: a list walk). A waker that
 *  is not on this request's list (never registered, already withdrawn or
 *  woken, a poll that found the answer at once, or registered on something
 *  else) gives false at once and is left as it is. NULL arguments: false,
 *  QF_INVALID_ARGUMENT recorded. */
QF_API bool qf_serve_request_cancel_poll(qf_serve_request *req, qf_waker *w);

/* ---------------------------------------------------------------- batchers */

/* What happens to a request that arrives when max_queued are queued. */
typedef enum qf_serve_admission {
    /* Refuse it at once: answered QF_UNAVAILABLE. */
    QF_SERVE_REJECT = 0,
    /* Wait for room until the request's deadline (or a drain); then
     * refuse it with QF_UNAVAILABLE. */
    QF_SERVE_BLOCK = 1,
    /* Drop the oldest queued request of the least urgent level holding any
     * (not more urgent than the newcomer): it is answered QF_UNAVAILABLE
     * and the newcomer takes its place. When every queued request is more
     * urgent, or all are already being formed into a batch, the newcomer is
     * refused instead. */
    QF_SERVE_DROP_OLDEST = 2,
} qf_serve_admission;

/* Why a batch closed (qf_serve_stats.batches_by_reason, metrics). */
typedef enum qf_serve_close_reason {
    QF_SERVE_CLOSE_FULL = 0,      /* max_batch_size reached */
    QF_SERVE_CLOSE_DELAY = 1,     /* the oldest waited max_queue_delay */
    QF_SERVE_CLOSE_PREFERRED = 2, /* a preferred size, nothing more queued */
    QF_SERVE_CLOSE_DRAIN = 3,     /* draining: queued requests go at once */
} qf_serve_close_reason;
#define QF_SERVE_CLOSE_REASONS 4

/* per-priority policy, cost batching, adaptive delay (issue 30) */

/* What a level's timeout does to a request still queued when it fires. */
typedef enum qf_serve_timeout_action {
    /* Answer it with the level's timeout_code (QF_DEADLINE_EXCEEDED by
     * default); it never reaches the model. */
    QF_SERVE_TIMEOUT_REJECT = 0,
    /* Move it to the next less urgent level (level + 1), behind what that
     * level holds, with that level's timeout starting afresh; from the last
     * level, or into a level at its queue limit, it is rejected instead. */
    QF_SERVE_TIMEOUT_DEMOTE = 1,
} qf_serve_timeout_action;

/* The policy of one priority level (qf_serve_options.level_policy). All
 * zero: no limit of its own, no timeout. */
typedef struct qf_serve_level_policy {
    /* Most requests queued at this level (admitted, not yet handed out or
     * answered); 0: no limit of its own (max_queued still bounds the sum).
     * A submit beyond it is refused with QF_RESOURCE_EXHAUSTED (answered),
     * whatever the admission policy: a full level never blocks and never
     * drops another request. */
    int64_t max_queued;
    /* Queue timeout of every request of the level, counted from when it
     * entered the level (its admission, or its demotion into it), in ns;
     * 0: none. It is separate from the request's own deadline, which still
     * answers QF_DEADLINE_EXCEEDED. A timer acts on it while the model is
     * busy, within the timer's wake-up lateness (tens of microseconds on an
     * idle machine); a request handed out before the timer acted is not
     * timed out. */
    int64_t timeout_ns;
    qf_serve_timeout_action on_timeout;
    /* The answer of a rejected request: 0 selects QF_DEADLINE_EXCEEDED;
     * otherwise a canonical code other than QF_OK. */
    qf_code timeout_code;
} qf_serve_level_policy;

/* The cost of a request (qf_serve_options.cost_fn): tokens, pixels, bytes.
 * Called once per submit, on the submitting thread, before admission; it
 * must not block and must not call the batcher. */
typedef uint64_t (*qf_serve_cost_fn)(void *arg, const qf_serve_request *req);

/* Everything a batcher is made from. Zero-initialise, then fill in. */
typedef struct qf_serve_options {
    /* Names the batcher in messages and metrics ("batcher" label). NULL:
     * "batcher". Copied. */
    const char *name;
    /* Largest batch handed to the model: 1..QF_SERVE_MAX_BATCH. */
    size_t max_batch_size;
    /* Longest a batch waits for more requests, counted from its oldest
     * request's admission, in ns: >= 0 (0: hand out what is there). A close
     * time past the clock's range (INT64_MAX, say) means none: the batch
     * waits until it is full, a preferred size with nothing more queued, or
     * a drain. */
    int64_t max_queue_delay_ns;
    /* Optional sizes (each 1..max_batch_size) at which a batch closes
     * before its delay when nothing more is queued; the batch then takes
     * the largest preferred size it can fill and the rest waits for the
     * next one. Copied. */
    const size_t *preferred_batch_sizes;
    size_t num_preferred;
    /* Priority levels, 1..QF_SERVE_MAX_LEVELS; 0 means 1. */
    uint32_t priority_levels;
    /* Anti-starvation: 0 off; k >= 1: see the top of this file. */
    uint32_t max_bypass;
    /* Bound on requests queued (admitted and not yet handed out or
     * answered); 0: unbounded. */
    int64_t max_queued;
    qf_serve_admission admission;
    /* Optional: a stop requested on this Coordinator (a SIGTERM handler's
     * qf_coord_request_stop_from_signal(), say) begins a drain of this
     * batcher with drain_grace_ns of grace (qf_serve_begin_drain()). */
    qf_coord *coord;
    /* Grace of that drain in ns: 0 selects QF_SERVE_DEFAULT_DRAIN_GRACE_NS;
     * negative is invalid. */
    int64_t drain_grace_ns;
    /* per-priority policy, cost batching, adaptive delay (issue 30) */
    /* Optional: priority_levels entries (level 0 first), copied; NULL: no
     * per-level limits or timeouts. With a timeout on any level the batcher
     * runs a timer thread of its own (qf_serve_new() starts it,
     * qf_serve_free() joins it). It wakes only while some request is queued
     * at a level with a timeout: an idle batcher costs no wake-ups. */
    const qf_serve_level_policy *level_policy;
    /* Optional batching by cost: with cost_fn set and max_batch_cost > 0, a
     * batch also closes (as full) when the next request in line would take
     * its summed cost past max_batch_cost; max_batch_size still bounds the
     * count. A request whose cost alone exceeds max_batch_cost is refused at
     * submit with QF_INVALID_ARGUMENT (nothing happened, no answer: it can
     * never be served). Levels are still taken most urgent first, each in
     * order: a request that does not fit ends the batch, no smaller one
     * behind it jumps ahead. cost_fn without a budget (or a budget without
     * cost_fn) is invalid. */
    qf_serve_cost_fn cost_fn;
    void *cost_arg;
    uint64_t max_batch_cost;
    /* Adaptive mode: > 0 turns it on. The batcher then chooses the batching
     * delay (0 .. min(max_queue_delay_ns, target), max_queue_delay_ns 0
     * meaning the target) and the batch size cap (1 .. max_batch_size) on
     * its own, to keep the p99 of the latency from admission to completion
     * (qf_serve_complete()) under this target in ns, while batching as much
     * as that allows. The algorithm (qf_serve_adaptive.c): completions feed
     * a windowed latency histogram and a fit of model time against batch
     * size, t(b) = a + c*b (exponentially forgetting least squares); every
     * window (>= 50 ms and >= 200 completions, or 1 s) the p99 of the window
     * drives an AIMD step with a dead band, as Clipper does: above 0.8 x
     * target the delay is halved (and the size cap cut by 10% when t(cap)
     * is over half the target); below 0.6 x target the cap grows by one
     * and the delay by target/40 when the model was busy over half the
     * window (otherwise it shrinks by as much: an idle model gains nothing
     * from bigger batches). The fit bounds both at every step:
     * the cap to the largest b with t(b) <= target/2, but never below what
     * keeps the model under 50% busy at the measured arrival rate (nor
     * below max_batch_size while more than two batches are queued); the
     * delay to target - 2 t(cap) - target/10 (a request may wait for the
     * batch in service and then ride its own). qf_serve_get_policy_stats()
     * shows what it chose. */
    int64_t p99_target_ns;
    /* completion fd, end of input, metrics (issue 30) */
    /* Bucket upper bounds in ns (each > 0, strictly increasing, at most
     * QF_SERVE_MAX_TIME_BUCKETS; a +Inf bucket is added) of the time
     * histograms kept per priority level: queue delay (admission to
     * hand-off), model time (hand-off to completion) and end-to-end latency
     * (admission to the answer of a request the model ran). NULL with 0:
     * the default, 10 us to 10 s in 1-2.5-5 steps (the bounds of
     * qf_serve_delay_bucket_bound_ns()). Copied. */
    const int64_t *delay_buckets_ns;
    size_t num_delay_buckets;
    const int64_t *model_buckets_ns;
    size_t num_model_buckets;
    const int64_t *latency_buckets_ns;
    size_t num_latency_buckets;
} qf_serve_options;

/**
 * qf_serve_new() - create a batcher (its level queues, its registration
 * for metrics, and the Coordinator stop action when opts->coord is set).
 *
 * Ownership:   the caller owns *ret_s; pair with qf_serve_free().
 *              opts->coord is borrowed and must outlive the batcher.
 * Blocking:    never (allocates).  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT naming the field for a NULL opts
 *              or ret_s, max_batch_size 0 or above QF_SERVE_MAX_BATCH,
 *              max_queue_delay_ns < 0, a preferred size of 0 or above
 *              max_batch_size (or a NULL list with num_preferred > 0),
 *              priority_levels above QF_SERVE_MAX_LEVELS, max_queued < 0,
 *              an unknown admission policy, drain_grace_ns < 0;
 *              QF_RESOURCE_EXHAUSTED. *ret_s untouched on failure.
 */
QF_API qf_code qf_serve_new(const qf_serve_options *opts, qf_serve **ret_s);

/**
 * qf_serve_free() - drain with no grace (requests still queued are
 * answered QF_CANCELLED), remove the stop action, forget the batcher for
 * metrics and free it. NULL-safe.
 *
 * Needs quiescence: no executor runs on it any more (qf_serve_run()
 * returned, a spawned task finished), no call on it is in progress or will
 * be made, and no handed-out batch is still waiting for qf_serve_complete().
 * Requests posted (qf_serve_post_complete()) and not collected are
 * answered here, on this thread; the completion fd is closed.
 * Blocking:    only for a stop action of the batcher running on another
 *              thread, and for metrics writers reading it.
 */
QF_API void qf_serve_free(qf_serve *s);

/** qf_serve_name() - the batcher's name (owned by it). Wait-free. */
QF_API const char *qf_serve_name(const qf_serve *s);
/** qf_serve_max_batch_size() - max_batch_size, to size arrays for
 *  qf_serve_next_batch(). Wait-free. */
QF_API size_t qf_serve_max_batch_size(const qf_serve *s);
/** qf_serve_depth() - requests queued now (admitted, not yet handed out or
 *  answered). Wait-free; a snapshot. */
QF_API int64_t qf_serve_depth(const qf_serve *s);
/** qf_serve_is_draining() - true once a drain began. Wait-free; acquire.
 *
 * For a NULL batcher these four return NULL, 0 or false and record
 * QF_INVALID_ARGUMENT. */
QF_API bool qf_serve_is_draining(const qf_serve *s);

/**
 * qf_serve_submit() / qf_serve_try_submit() - hand a request to the
 * batcher.
 *
 * On QF_OK the request was admitted and will be answered exactly once
 * later. Any other code except QF_INVALID_ARGUMENT is the answer itself,
 * already delivered through the request's completion before the call
 * returns (so a handler has one response path): QF_UNAVAILABLE (admission
 * refused it: full under REJECT, still full at its deadline under BLOCK,
 * nothing to drop under DROP_OLDEST, or the batcher is draining) or
 * QF_DEADLINE_EXCEEDED (its deadline had already passed).
 * Ownership:   from the call on the batcher holds `req` until it is
 *              answered (the completion may come on another thread before
 *              submit returns); the caller must not touch it meanwhile,
 *              except through the wait forms. On QF_INVALID_ARGUMENT
 *              nothing happened and the request stays the caller's.
 * Blocking:    only under QF_SERVE_BLOCK while full: the plain form waits
 *              until there is room, the request's deadline or a drain (the
 *              request's deadline is the bound, so there is no _until form);
 *              the try form never waits (refuses as REJECT does). Inside a
 *              task the plain form refuses to wait (QF_FAILED_PRECONDITION,
 *              nothing happened): use qf_serve_poll_submit().
 * Concurrency: any number of submitters.
 * Progress:    lock-free when it does not wait (a CAS loop on the admission
 *              word and a multi-producer ring enqueue, see qf_queue.h).
 * Ordering:    release: what the caller wrote to req->user before submit is
 *              visible to the executor.
 * Returns:     QF_OK; QF_UNAVAILABLE; QF_DEADLINE_EXCEEDED (both answered,
 *              see above); QF_INVALID_ARGUMENT for a NULL batcher or
 *              request, a priority out of range, or a request already
 *              submitted and not yet answered; QF_FAILED_PRECONDITION.
 */
QF_API qf_code qf_serve_submit(qf_serve *s, qf_serve_request *req);
QF_API qf_code qf_serve_try_submit(qf_serve *s, qf_serve_request *req);

/**
 * qf_serve_poll_submit() - the task form of qf_serve_submit(): where the
 * plain form would wait for room (BLOCK), it registers `w`, leaves the
 * request the caller's (not submitted, not answered) and returns
 * QF_PENDING; room, a drain or nothing at all (spurious) wakes `w`, and
 * the task polls again with the same request. The request's deadline still
 * applies: a poll after it refuses the request (QF_UNAVAILABLE, answered).
 * qf_serve_cancel_poll() withdraws `w` when the task gives up.
 * Returns:     as qf_serve_submit(), plus QF_PENDING; QF_INVALID_ARGUMENT
 *              for a NULL waker.
 */
QF_API qf_code qf_serve_poll_submit(qf_serve *s, qf_serve_request *req, qf_waker *w);

/** qf_serve_cancel_poll() - withdraw a waker that a pending
 *  qf_serve_poll_submit() or qf_serve_poll_next_batch() left. True when it
 *  had not been woken. Owner of `w` only; never sleeps. NULL arguments:
 *  false, QF_INVALID_ARGUMENT recorded. */
QF_API bool qf_serve_cancel_poll(qf_serve *s, qf_waker *w);

/**
 * qf_serve_next_batch() / _until() / qf_serve_try_next_batch() - take the
 * next batch: 1..max_batch_size requests in ret_reqs[0..*ret_n), most
 * urgent level first, each level in admission order.
 *
 * Waits until a batch closes (full; its oldest request waited
 * max_queue_delay; a preferred size with nothing more queued; or, while
 * draining, at once with what is queued). Requests found past their
 * deadline are answered QF_DEADLINE_EXCEEDED on the way and never handed
 * out. The requests handed out count as batched and as in flight until
 * qf_serve_complete() answers them.
 * Ownership:   on QF_OK the requests are the caller's to run and must be
 *              passed to qf_serve_complete() exactly once. ret_reqs must
 *              have room for qf_serve_max_batch_size() pointers.
 * Blocking:    plain form until a batch or the end of a drain; _until until
 *              `deadline` as well; try never (QF_UNAVAILABLE when no batch
 *              is due now). Inside a task the blocking forms return
 *              QF_FAILED_PRECONDITION (use qf_serve_poll_next_batch()).
 * Concurrency: any number of consumers; formation is serialised.
 * Ordering:    acquire: what submitters wrote before submit is visible.
 * Returns:     QF_OK; QF_OUT_OF_RANGE once drained (draining and nothing
 *              left: the consumer's clean end, as for a closed queue; after
 *              qf_serve_end_input() its message says the input ended);
 *              QF_DEADLINE_EXCEEDED; QF_UNAVAILABLE (try);
 *              QF_INVALID_ARGUMENT for NULL arguments;
 *              QF_FAILED_PRECONDITION. Outputs untouched on failure.
 */
QF_API qf_code qf_serve_next_batch(qf_serve *s, qf_serve_request **ret_reqs, size_t *ret_n);
QF_API qf_code qf_serve_next_batch_until(qf_serve *s, qf_deadline deadline,
                                         qf_serve_request **ret_reqs, size_t *ret_n);
QF_API qf_code qf_serve_try_next_batch(qf_serve *s, qf_serve_request **ret_reqs, size_t *ret_n);

/**
 * qf_serve_poll_next_batch() - the task form: a batch, or QF_PENDING with
 * `w` registered (an arrival that can close the batch, or a drain, wakes
 * it) and *ret_wake_at set to when the open batch closes by its delay (or
 * the drain deadline; QF_FOREVER when nothing is queued): the task must
 * also be polled again then (qflow tasks: qf_task_sleep_until()).
 * Returns:     as qf_serve_try_next_batch() with QF_PENDING instead of
 *              QF_UNAVAILABLE; QF_INVALID_ARGUMENT for a NULL waker.
 *              *ret_wake_at is written only with QF_PENDING.
 */
QF_API qf_code qf_serve_poll_next_batch(qf_serve *s, qf_waker *w, qf_serve_request **ret_reqs,
                                        size_t *ret_n, qf_deadline *ret_wake_at);

/**
 * qf_serve_complete() - answer the requests of a handed-out batch with
 * `status` (QF_OK when the model ran them; an error otherwise) and end
 * their time in flight.
 *
 * Only requests handed out by a next_batch call and not yet completed are
 * accepted: each is claimed atomically, so of completes naming the same
 * request (racing, or one late) at most one answers it, and exactly one
 * when they list the same requests in the same order (two completes of one
 * batch); a request that is still queued, already answered, submitted
 * again after its answer, or never submitted is refused. All or nothing:
 * when one request of the call is refused, none is answered and the
 * others stay handed out. A request handed out by another batcher is not
 * told apart (requests do not record their batcher).
 * Ownership:   the requests go back to their submitters (through their
 *              completions); the array stays the caller's.
 * Blocking:    never, apart from the completion callbacks it runs.
 * Concurrency: any thread; once per handed-out request.
 * Progress:    lock-free (a CAS per request).
 * Ordering:    release: what the caller wrote before is visible to each
 *              request's waiter or callback.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL batcher, array or
 *              request, or a code that is not canonical;
 *              QF_FAILED_PRECONDITION for more requests than are in flight
 *              or a request that is not handed out (the message names it by
 *              its index and says what it is doing: still queued, already
 *              answered, being completed by another call or listed twice,
 *              never submitted).
 */
QF_API qf_code qf_serve_complete(qf_serve *s, qf_serve_request *const *reqs, size_t n,
                                 qf_code status);

/* ---------------------------------------------------------------- executors */

/* Runs the model on one batch; returns the status every request of the
 * batch is answered with (QF_OK, or an error). A value that is not a
 * canonical code (QF_PENDING, QF_YIELD, 99) cannot be an answer: the
 * executor answers the batch QF_INVALID_ARGUMENT instead (its thread's last
 * error, which a completion callback can read, names the value), serves
 * on, and ends with QF_INVALID_ARGUMENT naming it (as the scheduler ends a
 * task that returns one). The function must not complete the batch
 * itself. */
typedef qf_code (*qf_serve_execute_fn)(void *arg, qf_serve_request *const *reqs, size_t n);

/**
 * qf_serve_run() - run the executor on the calling thread: take batches
 * (qf_serve_next_batch()), call fn on each, complete them, until the
 * batcher is drained.
 *
 * While it runs, the thread has the batcher's executor slice and a 1 us
 * timer slack (qf_thread_prefer_latency(); qf_serve_set_exec_slice()), so
 * that on a busy machine it takes a batch at its close time rather than
 * after a CPU-bound neighbour's slice; both are put back when it returns
 * (before Linux 6.12 only the timer slack is set). A sandbox that refuses
 * them changes nothing and is not an error. Threads that fn starts inherit
 * both (see qf_thread_prefer_latency()).
 *
 * Ownership:   `arg` is borrowed for the call.
 * Blocking:    until the batcher is drained (begin a drain to end it).
 * Concurrency: any number of executors per batcher.
 * Returns:     QF_OK once drained; QF_INVALID_ARGUMENT (NULL s or fn, or,
 *              once drained, fn returned a value that is not a code, see
 *              qf_serve_execute_fn); QF_FAILED_PRECONDITION (inside a task:
 *              use qf_serve_spawn()); QF_RESOURCE_EXHAUSTED.
 */
QF_API qf_code qf_serve_run(qf_serve *s, qf_serve_execute_fn fn, void *arg);

/* The slice qf_serve_run() gives its thread unless told otherwise. */
#define QF_SERVE_DEFAULT_EXEC_SLICE_NS ((int64_t)100000)

/**
 * qf_serve_set_exec_slice() - the scheduling slice qf_serve_run() asks the
 * kernel for on its thread while it runs (qf_thread_prefer_latency()), and
 * qf_serve_spawn() for the runtime's workers when their slice was never set
 * (qf_runtime_set_worker_slice()), from their next call on:
 * QF_THREAD_SLICE_MIN_NS..QF_THREAD_SLICE_MAX_NS, or 0 to leave the executor's thread as it is (its
 * slice and timer slack). The default is QF_SERVE_DEFAULT_EXEC_SLICE_NS. A model that computes on
 * the executor's thread while CPU-bound threads share its cores is preempted more often with a
 * short slice (its share of the CPU is unchanged), and threads it starts from there (a lazily
 * started BLAS or OpenMP pool) inherit the slice and the timer slack: give it a longer slice, or 0.
 * The batcher's level-timeout thread keeps its own 100 us whatever this says.
 *
 * Blocking:    never; wait-free.  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL batcher or a slice
 *              that is neither 0 nor in the kernel's range (nothing
 *              changes).
 */
QF_API qf_code qf_serve_set_exec_slice(qf_serve *s, int64_t slice_ns);

/**
 * qf_serve_spawn() - run the executor as a task on `rt`'s pool: it parks
 * while no batch is due (its timer armed at the batch's close time), runs
 * fn on a worker for each batch, yields to other tasks between batches
 * (several batchers share one pool fairly) and finishes with QF_OK once
 * the batcher is drained. On a runtime whose worker slice was never set
 * (qf_runtime_set_worker_slice(), or an earlier spawn) it sets the
 * batcher's executor slice there, so that the worker it wakes on at a
 * close time runs on time on a busy machine; the setting stays after the
 * executor ends, for every task of that runtime (see
 * qf_runtime_set_worker_slice(), and set 0 there first to keep the workers
 * as they are). When the runtime cancels it (shutdown), it
 * begins a drain with no grace, so queued requests are answered
 * QF_CANCELLED, and finishes with QF_CANCELLED. When fn returned a value
 * that is not a code, it finishes with QF_INVALID_ARGUMENT naming it.
 *
 * @opts:       task options (name, Coordinator membership); NULL: a task
 *              named after the batcher that is a member of the batcher's
 *              Coordinator, if it has one.
 * Ownership:   as qf_task_spawn(): with ret_task the caller holds a
 *              reference (qf_task_join(), qf_task_unref()). `arg` must
 *              outlive the task.
 * Blocking:    never.  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT (NULL s, rt or fn); the codes of
 *              qf_task_spawn(). Nothing is started on failure.
 */
QF_API qf_code qf_serve_spawn(qf_serve *s, qf_runtime *rt, qf_serve_execute_fn fn, void *arg,
                              const qf_task_options *opts, qf_task **ret_task);

/* ---------------------------------------------------------------- drain */

/* Counts since the batcher was created. admitted = batched + expired +
 * dropped + cancelled + (queued now); rejected requests were never
 * admitted. */
typedef struct qf_serve_report {
    uint64_t admitted;  /* accepted by submit */
    uint64_t batched;   /* handed to an executor */
    uint64_t expired;   /* answered DEADLINE_EXCEEDED */
    uint64_t rejected;  /* refused by submit (UNAVAILABLE) */
    uint64_t dropped;   /* admitted, then dropped for room (UNAVAILABLE) */
    uint64_t cancelled; /* answered CANCELLED */
    uint64_t queued;    /* still queued when the report was taken */
    uint64_t in_flight; /* batched and not yet completed */
} qf_serve_report;

/**
 * qf_serve_begin_drain() - stop admitting (submits are refused with
 * QF_UNAVAILABLE from now on) and have consumers hand out what is queued
 * at once, without waiting for fuller batches; what is still queued at
 * `deadline` is answered QF_CANCELLED by the next consumer or drain to
 * look. A second call can only bring the deadline earlier.
 *
 * Blocking:    never (sets the drain flag, wakes consumers and blocked
 *              submitters); suitable for stop actions. Not async-signal-safe
 *              (a SIGTERM handler requests a Coordinator stop instead).
 * Concurrency: any thread. A NULL batcher records QF_INVALID_ARGUMENT.
 */
QF_API void qf_serve_begin_drain(qf_serve *s, qf_deadline deadline);

/**
 * qf_serve_drain() - begin a drain (qf_serve_begin_drain()), wait until
 * every admitted request has been handed out or answered and every
 * handed-out batch completed, or until `deadline`: then answer what is
 * still queued QF_CANCELLED itself. Fills the report.
 *
 * Blocking:    until drained or the deadline (it does not need a consumer:
 *              with none, everything queued is cancelled at the deadline).
 *              Inside a task it does not wait: it behaves as if the
 *              deadline had passed.
 * Concurrency: any thread; concurrent drains each wait.
 * Returns:     QF_OK when nothing is queued or in flight; QF_DEADLINE_EXCEEDED
 *              when batches handed out are still running at the deadline
 *              (report.in_flight says how many requests; they are answered
 *              when their executor completes them); QF_INVALID_ARGUMENT for
 *              a NULL batcher. The report (optional) is filled on both
 *              QF_OK and QF_DEADLINE_EXCEEDED.
 */
QF_API qf_code qf_serve_drain(qf_serve *s, qf_deadline deadline, qf_serve_report *ret_report);

/* ---------------------------------------------------------------- metrics */

/* Histogram buckets: queue delay (admission to hand-off) upper bounds in ns,
 * and batch size upper bounds; the last bucket of each is +Inf. */
#define QF_SERVE_DELAY_BUCKETS 20
#define QF_SERVE_SIZE_BUCKETS 18

/* A snapshot of a batcher's counters (each read atomically, the set not
 * at one instant). */
typedef struct qf_serve_stats {
    qf_serve_report counts;
    uint64_t completed_ok;    /* answered QF_OK by qf_serve_complete() */
    uint64_t completed_error; /* answered with an executor error */
    int64_t depth;            /* queued now */
    uint64_t batches;
    uint64_t batches_by_reason[QF_SERVE_CLOSE_REASONS];
    /* Per-bucket counts (not cumulative) of the queue delay of every
     * request handed out, their sum and the largest. */
    uint64_t delay_buckets[QF_SERVE_DELAY_BUCKETS];
    int64_t delay_sum_ns;
    int64_t delay_max_ns;
    /* Per-bucket counts of batch sizes, and the largest batch. */
    uint64_t size_buckets[QF_SERVE_SIZE_BUCKETS];
    uint64_t size_max;
} qf_serve_stats;

/** qf_serve_delay_bucket_bound_ns() / qf_serve_size_bucket_bound() - the
 *  upper bound of bucket i (INT64_MAX / UINT64_MAX for the last, +Inf).
 *  Pure; any thread. */
QF_API int64_t qf_serve_delay_bucket_bound_ns(size_t i);
QF_API uint64_t qf_serve_size_bucket_bound(size_t i);

/**
 * qf_serve_get_stats() - fill *ret_stats with the batcher's counters.
 * Blocking: never (relaxed atomic loads).  Concurrency: any thread.
 * Returns: QF_OK; QF_INVALID_ARGUMENT for NULL arguments (untouched).
 */
QF_API qf_code qf_serve_get_stats(const qf_serve *s, qf_serve_stats *ret_stats);

/* per-priority policy, cost batching, adaptive delay (issue 30) */

/* What the policies did, and what adaptive mode chose. qf_serve_new() also
 * refuses (QF_INVALID_ARGUMENT, naming the field and level) a level policy
 * with max_queued or timeout_ns < 0, an unknown on_timeout, a timeout_code
 * of QF_OK or not canonical; cost_fn without max_batch_cost or the
 * reverse; p99_target_ns < 0. */
typedef struct qf_serve_policy_stats {
    uint64_t level_rejected;                  /* refused at a level's queue limit (also in
                                                 counts.rejected) */
    uint64_t timed_out;                       /* rejected by a level timeout (also in
                                                 counts.expired, whatever code answered them) */
    uint64_t demoted;                         /* moved down a level by a timeout */
    uint64_t cost_refused;                    /* refused at submit: cost above the budget */
    uint64_t cost_closed;                     /* batches closed by the cost budget */
    int64_t level_depth[QF_SERVE_MAX_LEVELS]; /* queued per level now */
    /* Adaptive mode (zeros when off): the delay and size cap in force, the
     * p99 of the last window, the fit's model time for one batch at the cap,
     * and how many windows the controller has judged. */
    int64_t adaptive_delay_ns;
    uint64_t adaptive_max_batch;
    int64_t adaptive_p99_ns;
    int64_t adaptive_model_ns;
    uint64_t adaptive_windows;
} qf_serve_policy_stats;

/**
 * qf_serve_get_policy_stats() - fill *ret_stats with what the per-level
 * policies, the cost budget and the adaptive controller did.
 * Blocking:    never (relaxed atomic loads).  Concurrency: any thread; the
 *              fields are each read atomically, the set not at one instant.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments (untouched).
 */
QF_API qf_code qf_serve_get_policy_stats(const qf_serve *s, qf_serve_policy_stats *ret_stats);

/**
 * qf_serve_metrics_write() - write every live batcher's and every live
 * queue's metrics to `f` in the Prometheus text exposition format
 * (version 0.0.4), for a server's /metrics endpoint:
 *
 *   qflow_serve_requests_total{batcher,outcome}   counter: outcome is
 *       admitted, rejected, batched, expired, dropped, cancelled,
 *       completed_ok, completed_error
 *   qflow_serve_batches_total{batcher,reason}     counter: full, delay,
 *       preferred, drain
 *   qflow_serve_queue_depth{batcher}              gauge: requests queued
 *   qflow_serve_in_flight{batcher}                gauge: batched requests
 *       not yet completed
 *   qflow_serve_queue_delay_seconds{batcher,priority}  histogram: admission
 *       to hand-off, per level, buckets as configured (issue 30; it had no
 *       priority label before)
 *   qflow_serve_model_seconds{batcher,priority}   histogram: hand-off to
 *       complete or post
 *   qflow_serve_latency_seconds{batcher,priority} histogram: admission to
 *       the answer of requests the model ran
 *   qflow_serve_batch_size{batcher}               histogram: requests per
 *       batch
 *   qflow_serve_policy_total{batcher,action}      counter: level_rejected,
 *       timed_out, demoted, cost_refused, cost_closed_batch (the counts of
 *       qf_serve_get_policy_stats())
 *   qflow_serve_level_depth{batcher,priority}     gauge: requests queued per
 *       level, for batchers with a level_policy (the family is left out
 *       when none has one)
 *   qflow_serve_adaptive_delay_seconds{batcher}, qflow_serve_adaptive_max_batch,
 *   qflow_serve_adaptive_p99_seconds              gauges: what adaptive mode
 *       has in force and the p99 it last judged, for batchers in adaptive
 *       mode only (left out when none is)
 *   qflow_queue_size{queue,kind}, qflow_queue_capacity{queue,kind},
 *   qflow_queue_closed{queue,kind}                gauges, every live queue
 *       (qf_queue_metrics.h), a batcher's level queues included
 *       ("<batcher>/level<k>")
 *
 * Label values are escaped as the format requires. Names follow the
 * Prometheus conventions (base unit seconds, _total counters); batch size
 * is a dimensionless count, so it carries no unit suffix.
 * Blocking:    takes the batcher registry's and the live-queue set's
 *              mutexes while writing (a batcher or queue being freed
 *              meanwhile waits); stdio may block.
 * Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL f; QF_INTERNAL when
 *              writing to f failed.
 */
QF_API qf_code qf_serve_metrics_write(FILE *f);

/**
 * qf_serve_metrics_text() - the same text in a malloc'd, NUL-terminated
 * buffer.
 * Ownership:   the caller frees *ret_text with free().
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL ret_text;
 *              QF_RESOURCE_EXHAUSTED. Outputs untouched on failure;
 *              ret_len is optional.
 */
QF_API qf_code qf_serve_metrics_text(char **ret_text, size_t *ret_len);

/* ------------------------------------------------------------------------
 * completion fd, end of input, metrics (issue 30)
 * ------------------------------------------------------------------------ */

/**
 * qf_serve_end_input() - the producers' end of input: no request is
 * accepted from now on, and what is queued is served. Consumers hand out
 * what is queued at once (the partial batch does not wait for its delay:
 * it closes as a drain's does, counted under reason "drain") and, once
 * every admitted request is handed out or answered, next_batch and its
 * forms return QF_OUT_OF_RANGE with a message saying the input ended;
 * qf_serve_run() and a spawned executor then finish with QF_OK. Nothing is
 * cancelled: unlike a drain there is no deadline (a later drain may still
 * set one).
 *
 * A submit after it is refused with QF_FAILED_PRECONDITION, its message
 * naming the end of input; as for the other refusals that are not answers
 * (QF_INVALID_ARGUMENT), nothing happened: the request is not answered and
 * stays the caller's. A submit racing with the call is either admitted
 * (and served) or refused so. qf_serve_is_draining() is true after it.
 *
 * Blocking:    never (wakes consumers and blocked submitters). Not
 *              async-signal-safe.
 * Concurrency: any thread, any number of times (idempotent).
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for a NULL batcher.
 */
QF_API qf_code qf_serve_end_input(qf_serve *s);

/**
 * qf_serve_completion_fd() - a file descriptor an event loop watches for
 * completions that model threads post with qf_serve_post_complete().
 *
 * The pattern: the loop submits requests (qf_serve_try_submit()); model
 * threads of their own take batches (qf_serve_next_batch()), run them and
 * post the result, which only queues it and makes the fd readable; the
 * loop, woken by the fd, calls qf_serve_collect(), which answers the posted
 * requests on the loop's thread (their callbacks run there, where the
 * loop's sockets are).
 *
 * What a wake means: readable (EPOLLIN/POLLIN) says posts may be waiting;
 * the loop then calls qf_serve_collect(). A wake may be spurious (collect
 * answers nothing). Readiness is level-triggered in effect: the fd is an
 * eventfd that collect reads (resets) before it takes the posts, and that a
 * post writes when it finds nothing uncollected, so the fd is readable
 * whenever posts wait uncollected. A collect that leaves posts behind (its
 * `max`) writes it again, so an edge-triggered watch (EPOLLET) sees a new
 * edge too: after each wake, one collect is enough and none is lost.
 *
 * Ownership:   the batcher owns the fd: do not read, write or close it;
 *              it is closed by qf_serve_free() (take it out of the epoll
 *              set first). The same fd is returned by every call.
 * Blocking:    never (creates the eventfd on the first call).
 * Concurrency: any thread.
 * Returns:     QF_OK with *ret_fd; QF_INVALID_ARGUMENT for NULL arguments;
 *              QF_RESOURCE_EXHAUSTED when no eventfd can be made (errno in
 *              the message). *ret_fd untouched on failure.
 */
QF_API qf_code qf_serve_completion_fd(qf_serve *s, int *ret_fd);

/**
 * qf_serve_post_complete() - qf_serve_complete() in two halves, for a
 * model on threads of its own: this half, on the model's thread, checks and
 * claims the requests exactly as qf_serve_complete() does (all or nothing,
 * the same refusals) and records their model time, then queues them for
 * qf_serve_collect() and makes the completion fd readable; the requests
 * are answered by the collect, on the collecting thread.
 *
 * Posted requests stay in flight until collected (a drain waits for them;
 * qf_serve_free() answers any still uncollected). Posting needs no
 * completion fd: qf_serve_collect() also works polled.
 * Ownership:   as qf_serve_complete(); the requests' qf__next links carry
 *              them until collected.
 * Blocking:    never (a write(2) to the eventfd at most once per batch).
 * Concurrency: any number of posting threads.
 * Progress:    lock-free (a CAS per request, one to queue the batch).
 * Ordering:    release: what the model wrote before posting is visible to
 *              each request's waiter or callback after the collect.
 * Returns:     as qf_serve_complete().
 */
QF_API qf_code qf_serve_post_complete(qf_serve *s, qf_serve_request *const *reqs, size_t n,
                                      qf_code status);

/**
 * qf_serve_collect() - answer requests posted by qf_serve_post_complete(),
 * in the order they were posted (per posting thread), at most `max` of
 * them (0: all there are). Resets the completion fd first; when it leaves
 * posts behind, it makes the fd readable again.
 *
 * Blocking:    never, apart from the completion callbacks it runs (on this
 *              thread; they may submit, post and collect again).
 * Concurrency: any thread; concurrent collects each answer different
 *              requests (a short futex mutex orders who takes what, never
 *              held while a callback runs).
 * Returns:     QF_OK with *ret_n requests answered (0 on a spurious wake;
 *              ret_n is optional); QF_INVALID_ARGUMENT for a NULL batcher.
 */
QF_API qf_code qf_serve_collect(qf_serve *s, size_t max, size_t *ret_n);

/* The time histograms kept per priority level. */
typedef enum qf_serve_hist_kind {
    QF_SERVE_HIST_QUEUE_DELAY = 0, /* admission to hand-off */
    QF_SERVE_HIST_MODEL_TIME = 1,  /* hand-off to complete (or post) */
    QF_SERVE_HIST_LATENCY = 2,     /* admission to the answer, model-run requests */
} qf_serve_hist_kind;
#define QF_SERVE_HIST_KINDS 3
#define QF_SERVE_MAX_TIME_BUCKETS 64
/* qf_serve_get_histogram(): every level summed. */
#define QF_SERVE_ALL_LEVELS UINT32_MAX

/* A snapshot of one time histogram (each bucket read atomically, the set
 * not at one instant: count is the sum of the counts read). */
typedef struct qf_serve_histogram {
    size_t num_buckets;                               /* the +Inf bucket included */
    int64_t bounds_ns[QF_SERVE_MAX_TIME_BUCKETS + 1]; /* last: INT64_MAX (+Inf) */
    uint64_t counts[QF_SERVE_MAX_TIME_BUCKETS + 1];   /* per bucket, not cumulative */
    uint64_t count;
    int64_t sum_ns;
} qf_serve_histogram;

/**
 * qf_serve_get_histogram() - one time histogram of a level (or every
 * level summed: QF_SERVE_ALL_LEVELS), with the batcher's bucket bounds.
 * Blocking:    never (relaxed atomic loads).  Concurrency: any thread.
 * Returns:     QF_OK; QF_INVALID_ARGUMENT for NULL arguments, an unknown
 *              kind or a level out of range (*ret_hist untouched).
 */
QF_API qf_code qf_serve_get_histogram(const qf_serve *s, qf_serve_hist_kind kind, uint32_t level,
                                      qf_serve_histogram *ret_hist);

/**
 * qf_serve_metrics_write_openmetrics() - the metrics of
 * qf_serve_metrics_write() in the OpenMetrics 1.0 text format
 * (Content-Type application/openmetrics-text; version=1.0.0): counter
 * families named without their _total suffix, the time histograms with
 * their unit (seconds) declared, ending with "# EOF". Both formats carry
 * the per-level time histograms:
 *
 *   qflow_serve_queue_delay_seconds{batcher,priority}
 *   qflow_serve_model_seconds{batcher,priority}
 *   qflow_serve_latency_seconds{batcher,priority}
 *
 * (priority is the level, "0" the most urgent; buckets as configured).
 * Blocking, concurrency, returns: as qf_serve_metrics_write().
 */
QF_API qf_code qf_serve_metrics_write_openmetrics(FILE *f);

QF_END_DECLS

#endif
