/* qf_serve-impl.h - internal: the batcher object and what its files share.
 *
 * Words and who writes them
 *
 *   adm     admission word: bits 0..61 depth (requests admitted and not yet
 *           handed out or answered, reservations included), bit 62 CANCEL
 *           (the drain deadline passed: whatever is queued is answered
 *           CANCELLED), bit 63 DRAIN (no admission). Submitters CAS depth
 *           up while DRAIN is clear; consumers and drains subtract. Once
 *           DRAIN is set depth never grows again, which is what makes "drained"
 *           (DRAIN and depth 0) final: nothing can slip in behind it.
 *   ready   requests in the level rings: a submitter adds 1 *after* its ring
 *           enqueue, a taker subtracts what it took *after* taking, so it
 *           may dip below zero for a moment, never above what is really
 *           there. Consumers sleep on "ready >= need".
 *   need    how many more ready requests would let the sleeping consumer
 *           close its batch (seq_cst store by the consumer before it
 *           registers; seq_cst load by a submitter after its add).
 *
 * The sleep/wake pair is the wait-list protocol of qf_waker.h: a consumer
 * stores need, registers (full fence), re-checks ready; a submitter adds to
 * ready (seq_cst RMW), then looks at the list and need.
 *
 * The consumer side (pending batch, bypass counters) is guarded by `lock`,
 * a futex mutex held while requests move from the rings into `pending` and
 * a batch is decided, never while anyone sleeps or user code runs.
 */
#ifndef QF_SERVE_IMPL_H
#define QF_SERVE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "qf_queue.h"
#include "qf_serve.h"

#define QF__ADM_DRAIN ((uint64_t)1 << 63)
#define QF__ADM_CANCEL ((uint64_t)1 << 62)
#define QF__ADM_DEPTH ((uint64_t)QF__ADM_CANCEL - 1)

/* Request states (qf__state bits).
 *
 * A submission goes QUEUED -> QUEUED|HANDED (in a batch, in flight with the
 * model) -> QUEUED|COMPLETING (one qf_serve_complete() claimed it) ->
 * ANSWERED|DONE; a request answered without reaching the model (expired,
 * dropped, cancelled, refused) goes from QUEUED to ANSWERED|DONE. Only the
 * claim (a CAS of HANDED into COMPLETING) lets complete answer a request,
 * so of two completes of one request exactly one answers it, and a request
 * still queued, or answered, is refused. WAITERS may be or'ed in at any
 * time by a waiter, which is why every transition is an RMW. */
#define QF__REQ_QUEUED 1u      /* submitted, not answered */
#define QF__REQ_ANSWERED 2u    /* status stored, answer under way */
#define QF__REQ_DONE 4u        /* the answerer is done with the request */
#define QF__REQ_WAITERS 8u     /* a waiter registered on qf__waiters */
#define QF__REQ_HANDED 16u     /* handed out in a batch, not yet completed */
#define QF__REQ_COMPLETING 32u /* claimed by a qf_serve_complete() */

/* completion fd, end of input, metrics (issue 30) */
/* A time histogram per level (qf_serve_hist.c): nb bounds, then +Inf. */
typedef struct qf__serve_hist {
    size_t nb;
    int64_t *bounds;          /* nb, increasing */
    _Atomic uint64_t *counts; /* levels * (nb + 1) */
    _Atomic int64_t *sums;    /* levels */
} qf__serve_hist;

/* The completion channel (qf_serve_fd.c). */
typedef struct qf__serve_fdc {
    _Atomic(qf_serve_request *) posted; /* a stack of posted requests */
    _Atomic int fd;                     /* -1 until qf_serve_completion_fd() */
    _Atomic uint32_t lock;              /* collectors; fd creation */
    qf_serve_request *head, *tail;      /* taken, in post order, not answered yet */
} qf__serve_fdc;

struct qf_serve {
    /* Read-only after creation. */
    char *name;
    size_t max_batch;
    int64_t delay_ns;
    size_t *pref; /* sorted, unique */
    size_t npref;
    uint32_t levels;
    uint32_t max_bypass;
    int64_t bound; /* 0: unbounded */
    qf_serve_admission policy;
    int64_t grace_ns;
    qf_coord *coord;
    qf_coord_action *stop_action;
    qf_queue **q;                  /* one pointer queue per level */
    _Atomic int64_t exec_slice_ns; /* qf_serve_set_exec_slice(); 0: none */

    /* Submitters' line. */
    _Alignas(64) _Atomic uint64_t adm;
    _Atomic uint64_t n_admitted;
    _Atomic uint64_t n_rejected;
    _Atomic uint64_t n_dropped;

    _Alignas(64) _Atomic int64_t ready;
    _Atomic int64_t need;
    _Atomic qf_deadline drain_deadline; /* QF_FOREVER until a drain begins */
    qf_waitlist consumers;              /* consumers waiting for a batch */
    qf_waitlist producers;              /* BLOCK submitters waiting for room */
    qf_eventcount quiet;                /* drains waiting for the end */

    /* Consumer side. */
    _Alignas(64) _Atomic uint32_t lock;
    qf_serve_request **pending; /* max_batch slots; [0, npending) in order */
    size_t npending;
    int64_t oldest_ns; /* admission time of the oldest pending request */
    uint32_t *bypass;  /* per level: batches in a row that left it waiting */
    /* Wake-up lateness (qf_serve_batch.c): a consumer that sleeps until a
     * batch's close time wakes late by the timer slack and the scheduler's
     * delay. late_ns is a moving average of that lateness; a batch closing
     * by its delay is decided that much early (at most a quarter of the
     * delay) so it reaches the model at its close time. armed_at: the wake
     * time last handed to a sleeping consumer (QF_FOREVER: none). */
    int64_t late_ns;
    qf_deadline armed_at;

    /* Counters (relaxed RMWs, read by stats and metrics at any time). */
    _Alignas(64) _Atomic uint64_t n_batched;
    _Atomic uint64_t n_expired;
    _Atomic uint64_t n_cancelled;
    _Atomic uint64_t n_ok;
    _Atomic uint64_t n_error;
    _Atomic uint64_t in_flight;
    _Atomic uint64_t n_batches[QF_SERVE_CLOSE_REASONS];
    _Atomic uint64_t delay_hist[QF_SERVE_DELAY_BUCKETS];
    _Atomic int64_t delay_sum;
    _Atomic int64_t delay_max;
    _Atomic uint64_t size_hist[QF_SERVE_SIZE_BUCKETS];
    _Atomic uint64_t size_max;

    /* per-priority policy, cost batching, adaptive delay (issue 30):
     * qf_serve_policy.c, qf_serve_adaptive.c. `cap` and `delay_ns` above
     * are the batch size cap and delay in force: the adaptive controller
     * moves them under `lock`; otherwise cap is max_batch. */
    size_t cap;
    struct qf__serve_level *lvl; /* per level; NULL: no level policy */
    bool staged;                 /* formation goes through the staged lists (below) */
    qf_serve_cost_fn cost_fn;
    void *cost_arg;
    uint64_t budget;               /* 0: no cost budget */
    uint64_t pending_cost;         /* summed cost of pending[], under lock */
    bool cost_blocked;             /* the last pull stopped at a request that did not fit */
    struct qf__serve_timer *timer; /* NULL: no level timeout */
    struct qf__serve_adapt *ad;    /* NULL: adaptive mode off */
    _Atomic uint64_t n_level_rejected;
    _Atomic uint64_t n_timed_out;
    _Atomic uint64_t n_demoted;
    _Atomic uint64_t n_cost_refused;
    _Atomic uint64_t n_cost_closed;

    /* Registry of live batchers (qf_serve_metrics.c). */
    qf_serve *reg_prev, *reg_next;

    /* completion fd, end of input, metrics (issue 30) */
    qf__serve_hist hist[QF_SERVE_HIST_KINDS];
    _Alignas(64) qf__serve_fdc fdc;
    _Atomic bool input_ended; /* set before the drain flag it implies */
};

/* qf_serve_request.c: answer a request (exactly once per submission). */
void qf__serve_answer(qf_serve_request *r, qf_code status);
/* Answer a list linked through qf__next, every one with `status`. */
void qf__serve_answer_list(qf_serve_request *head, qf_code status);

/* qf_serve_batch.c */
/* Under s->lock: answer every queued request CANCELLED (linked onto
 * *cancelled, answered by the caller after unlocking). */
void qf__serve_cancel_locked(qf_serve *s, qf_serve_request **cancelled);
/* Wake consumers, blocked producers and drain waiters (a state change). */
void qf__serve_wake_all(qf_serve *s);
/* Depth went down by n: wake blocked producers, tell drains. */
void qf__serve_left(qf_serve *s, uint64_t n);

/* qf_serve_metrics.c: the registry of live batchers. */
void qf__serve_register(qf_serve *s);
void qf__serve_unregister(qf_serve *s);
size_t qf__serve_delay_bucket(int64_t ns);
size_t qf__serve_size_bucket(uint64_t n);

/* per-priority policy, cost batching, adaptive delay (issue 30) */

/* One level's policy and its staged list: requests moved out of the
 * level's ring (in ring order) by a consumer or the timer, under `lock`,
 * so the timer can look at the oldest and formation can stop at a request
 * that does not fit the cost budget. `ready` still counts staged requests. */
struct qf__serve_level {
    int64_t limit;      /* 0: none */
    int64_t timeout_ns; /* 0: none */
    qf_serve_timeout_action action;
    qf_code code;
    _Atomic int64_t depth; /* admitted at this level, not handed out/answered */
    qf_serve_request *head, *tail;
};

/* qf_serve_policy.c */
qf_code qf__serve_policy_check(const qf_serve_options *o, const char *name);
qf_code qf__serve_policy_init(qf_serve *s, const qf_serve_options *o);
/* Starts the timer thread (last step of qf_serve_new()). */
qf_code qf__serve_policy_start(qf_serve *s);
/* Joins the timer (first step of qf_serve_free()). */
void qf__serve_policy_stop(qf_serve *s);
void qf__serve_policy_destroy(qf_serve *s);
/* Submit: the cost check and the level reservation, before admission.
 * QF_OK, or the code to return (refused: answered for RESOURCE_EXHAUSTED;
 * not for INVALID_ARGUMENT). */
qf_code qf__serve_policy_admit(qf_serve *s, qf_serve_request *req, int64_t now);
/* enter(): the request's level timeout counts from now. */
void qf__serve_policy_enter(qf_serve *s, qf_serve_request *req, int64_t now);
/* enter(), once the request is in its level's ring: wake the timer if it
 * sleeps for want of requests at levels with a timeout (qf_serve_policy.c). */
void qf__serve_timer_entered(qf_serve *s, uint32_t level);
/* Sweeps the timer has done (0 without one): the tests' window on it. */
uint64_t qf__serve_timer_sweeps(const qf_serve *s);
/* A request left its level (handed out, answered, dropped, refused). */
static inline void qf__serve_level_leave(qf_serve *s, const qf_serve_request *r)
{
    if (s->lvl)
        atomic_fetch_sub_explicit(&s->lvl[r->qf__level].depth, 1, memory_order_relaxed);
}
/* Under lock: move level l's staged and ring requests into pending, up to
 * the cap and the cost budget; expired ones are linked onto *expired.
 * Returns how many expired. */
uint64_t qf__serve_pull_staged(qf_serve *s, uint32_t l, int64_t now, qf_serve_request **expired);
/* DROP_OLDEST (takes lock): level l's oldest staged request, unstaged and
 * out of its level's counts; NULL when its list is empty. */
qf_serve_request *qf__serve_unstage_oldest(qf_serve *s, uint32_t l);
/* Under lock: link every staged request onto *out; returns how many. */
uint64_t qf__serve_unstage_all_locked(qf_serve *s, qf_serve_request **out);

/* qf_serve_adaptive.c */
qf_code qf__serve_adapt_init(qf_serve *s, const qf_serve_options *o);
void qf__serve_adapt_destroy(qf_serve *s);
/* Under lock, at each formation: judge a window that is over, set
 * s->delay_ns and s->cap. */
void qf__serve_adapt_tick(qf_serve *s, int64_t now);
/* qf_serve_complete(): feed the batch's latencies and model time. */
void qf__serve_adapt_record(qf_serve *s, qf_serve_request *const *reqs, size_t n);
void qf__serve_adapt_stats(const qf_serve *s, qf_serve_policy_stats *st);
/* completion fd, end of input, metrics (issue 30) */
/* qf_serve_hist.c */
qf_code qf__serve_hist_init(qf_serve *s, const qf_serve_options *o);
void qf__serve_hist_free(qf_serve *s);
void qf__serve_hist_add(qf_serve *s, qf_serve_hist_kind k, uint32_t level, int64_t ns);
void qf__serve_write_hists(FILE *f, qf_serve *head, bool openmetrics);
/* ns as seconds in exact decimal ("0.00025", "2"): no rounding, no exponent. */
void qf__serve_put_seconds(FILE *f, int64_t ns);
/* A label value, escaped as the Prometheus text format and OpenMetrics
 * require (backslash, double quote, newline). */
void qf__serve_put_label(FILE *f, const char *v);
/* qf_serve_batch.c: the two halves of qf_serve_complete(). */
qf_code qf__serve_claim_batch(qf_serve *s, qf_serve_request *const *reqs, size_t n, qf_code status,
                              const char *fn);
void qf__serve_model_done(qf_serve *s, qf_serve_request *const *reqs, size_t n, int64_t now);
void qf__serve_settle(qf_serve *s, qf_serve_request *r, qf_code status, int64_t now);
void qf__serve_settled(qf_serve *s, uint64_t ok, uint64_t err);
/* qf_serve_fd.c */
void qf__serve_fdc_init(qf_serve *s);
void qf__serve_fdc_free(qf_serve *s);

static inline void qf__serve_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

#endif
