/* qf_serve_batch.c - forming batches: the consumer side.
 *
 * A consumer (a model thread or task) takes the consumer mutex, moves what
 * the level rings hold into the pending batch (most urgent level first,
 * bulk dequeues of up to the room left), answers the requests it finds past
 * their deadline, and decides:
 *
 *   full                        -> hand out max_batch_size
 *   draining                    -> hand out what is pending at once
 *   oldest waited the delay     -> hand out what is pending (decided early
 *                                  by the consumers' usual wake-up
 *                                  lateness, at most delay/4, so the batch
 *                                  reaches the model at its close time)
 *   a preferred size reached,
 *   nothing more queued         -> hand out the largest preferred size
 *   otherwise                   -> wait: until `need` more are ready (what
 *                                  would fill the batch, or reach the next
 *                                  preferred size), or the close time
 *
 * The pending batch stays in the batcher between calls, so a batch keeps
 * forming across wake-ups and across consumers, and a drain can cancel it
 * when no consumer runs. Completions are never called with the mutex held:
 * expired and cancelled requests are linked through qf__next and answered
 * after it is released.
 */
#include <stdlib.h>
#include <string.h>

#include "qf_lock-impl.h"
#include "qf_serve-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"
#include "qf_waitlist-impl.h"

typedef struct form {
    qf_serve_request *expired;   /* answer DEADLINE_EXCEEDED after unlocking */
    qf_serve_request *cancelled; /* answer CANCELLED after unlocking */
    int64_t need;
    qf_deadline wake_at;
    uint64_t flags; /* the adm flags the decision was made under */
} form;

static void push(qf_serve_request **list, qf_serve_request *r)
{
    r->qf__next = *list;
    *list = r;
}

void qf__serve_left(qf_serve *s, uint64_t n)
{
    if (n == 0)
        return;
    /* seq_cst: pairs with a BLOCK submitter's register + re-check of the
     * depth, and with a drain's prepare + re-check. */
    uint64_t a = atomic_fetch_sub_explicit(&s->adm, n, memory_order_seq_cst) - n;
    if (s->policy == QF_SERVE_BLOCK && qf__waitlist_count_sc(&s->producers))
        qf_waitlist_wake(&s->producers, n > INT32_MAX ? INT32_MAX : (int)n);
    if (a & QF__ADM_DRAIN) {
        /* Drained: consumers waiting for the last reservations to land
         * (or for more to hand out) must learn that nothing will. */
        if ((a & QF__ADM_DEPTH) == 0)
            qf_waitlist_wake(&s->consumers, INT32_MAX);
        qf_eventcount_notify(&s->quiet, true);
    }
}

void qf__serve_wake_all(qf_serve *s)
{
    qf_waitlist_wake(&s->consumers, INT32_MAX);
    qf_waitlist_wake(&s->producers, INT32_MAX);
    qf_eventcount_notify(&s->quiet, true);
}

void qf__serve_cancel_locked(qf_serve *s, qf_serve_request **cancelled)
{
    QF__ASSERT_HELD(&s->lock);
    uint64_t n = 0;
    for (size_t i = 0; i < s->npending; i++, n++) {
        qf__serve_level_leave(s, s->pending[i]);
        push(cancelled, s->pending[i]);
    }
    s->npending = 0;
    n += qf__serve_unstage_all_locked(s, cancelled); /* issue 30 */
    void *buf[64];
    for (uint32_t l = 0; l < s->levels; l++) {
        size_t got;
        while (qf_queue_try_dequeue_bulk_ptr(s->q[l], 1, 64, buf, &got) == QF_OK) {
            atomic_fetch_sub_explicit(&s->ready, (int64_t)got, memory_order_relaxed);
            for (size_t i = 0; i < got; i++, n++) {
                qf__serve_level_leave(s, buf[i]);
                push(cancelled, buf[i]);
            }
        }
    }
    qf__serve_add(&s->n_cancelled, n);
    qf__serve_left(s, n);
}

static bool past(const qf_serve_request *r, int64_t now)
{
    return r->deadline != QF_FOREVER && now >= r->deadline;
}

/* Move what level l holds into the pending batch, up to the room left.
 * Returns the number of expired requests found (linked onto f->expired). */
static uint64_t pull_level(qf_serve *s, uint32_t l, int64_t now, form *f)
{
    if (s->staged) /* level timeouts or a cost budget (issue 30) */
        return qf__serve_pull_staged(s, l, now, &f->expired);
    uint64_t expired = 0;
    for (;;) {
        size_t room = s->npending < s->cap ? s->cap - s->npending : 0;
        if (room == 0)
            return expired;
        size_t got = 0;
        qf_serve_request **dst = &s->pending[s->npending];
        if (qf_queue_try_dequeue_bulk_ptr(s->q[l], 1, room, (void **)dst, &got) != QF_OK)
            return expired;
        atomic_fetch_sub_explicit(&s->ready, (int64_t)got, memory_order_relaxed);
        size_t keep = 0;
        for (size_t i = 0; i < got; i++) {
            qf_serve_request *r = dst[i];
            if (past(r, now)) {
                qf__serve_level_leave(s, r);
                push(&f->expired, r);
                expired++;
                continue;
            }
            if (s->npending + keep == 0 || r->qf__admit_ns < s->oldest_ns)
                s->oldest_ns = r->qf__admit_ns;
            dst[keep++] = r;
        }
        s->npending += keep;
        /* A short bulk dequeue does not prove the level empty (a bulk take
         * may stop at the ring's wrap or at a give-back): only a failed
         * take does. A drain relies on it to hand out full batches. */
    }
}

/* The level the next batch serves first, or UINT32_MAX: the one left
 * waiting longest (in batches), the least urgent on a tie. */
static uint32_t starved_level(const qf_serve *s)
{
    uint32_t best = UINT32_MAX, most = 0;
    for (uint32_t l = 0; l < s->levels; l++)
        if (s->bypass[l] >= s->max_bypass && s->bypass[l] >= most) {
            best = l;
            most = s->bypass[l];
        }
    return best;
}

static void pull(qf_serve *s, int64_t now, form *f)
{
    uint64_t expired = 0;
    s->cost_blocked = false;
    uint32_t first = s->max_bypass ? starved_level(s) : UINT32_MAX;
    if (first != UINT32_MAX)
        expired += pull_level(s, first, now, f);
    for (uint32_t l = 0; l < s->levels && s->npending < s->cap && !s->cost_blocked; l++)
        if (l != first)
            expired += pull_level(s, l, now, f);
    if (expired) {
        qf__serve_add(&s->n_expired, expired);
        qf__serve_left(s, expired);
    }
}

/* Hand out pending[0, k) into out[]. */
static void hand_out(qf_serve *s, size_t k, qf_serve_close_reason why, int64_t now,
                     qf_serve_request **out)
{
    uint64_t levels_in = 0;
    int64_t sum = 0, max = 0;
    memcpy(out, s->pending, k * sizeof(*out));
    for (size_t i = 0; i < k; i++) {
        qf_serve_request *r = out[i];
        int64_t d = now - r->qf__admit_ns;
        if (d < 0)
            d = 0;
        sum += d;
        if (d > max)
            max = d;
        qf__serve_add(&s->delay_hist[qf__serve_delay_bucket(d)], 1);
        qf__serve_hist_add(s, QF_SERVE_HIST_QUEUE_DELAY, r->priority, d);
        levels_in |= (uint64_t)1 << r->qf__level;
        /* issue 30: the level's place, the cost, the model's start */
        qf__serve_level_leave(s, r);
        s->pending_cost -= r->qf__cost;
        r->qf__hand_ns = now;
    }
    size_t rest = s->npending - k;
    memmove(s->pending, s->pending + k, rest * sizeof(*s->pending));
    s->npending = rest;
    for (size_t i = 0; i < rest; i++)
        if (i == 0 || s->pending[i]->qf__admit_ns < s->oldest_ns)
            s->oldest_ns = s->pending[i]->qf__admit_ns;

    atomic_fetch_add_explicit(&s->delay_sum, sum, memory_order_relaxed);
    if (max > atomic_load_explicit(&s->delay_max, memory_order_relaxed))
        atomic_store_explicit(&s->delay_max, max, memory_order_relaxed); /* under the lock */
    qf__serve_add(&s->size_hist[qf__serve_size_bucket(k)], 1);
    if (k > atomic_load_explicit(&s->size_max, memory_order_relaxed))
        atomic_store_explicit(&s->size_max, k, memory_order_relaxed);
    qf__serve_add(&s->n_batches[why], 1);
    qf__serve_add(&s->n_batched, k);

    if (s->max_bypass) {
        for (uint32_t l = 0; l < s->levels; l++) {
            if (levels_in & ((uint64_t)1 << l))
                s->bypass[l] = 0;
            else if (qf_queue_size(s->q[l]) > 0 && s->bypass[l] < UINT32_MAX)
                s->bypass[l]++;
        }
    }
    /* In flight before depth goes down: a drain that sees depth 0 must
     * see these as in flight (both seq_cst). */
    atomic_fetch_add_explicit(&s->in_flight, k, memory_order_seq_cst);
    /* Only now may qf_serve_complete() claim them (a stale pointer racing
     * in cannot take in_flight below what is really out). An RMW: a waiter
     * may be or'ing WAITERS in. */
    for (size_t i = 0; i < k; i++)
        atomic_fetch_or_explicit(&out[i]->qf__state, QF__REQ_HANDED, memory_order_release);
    qf__serve_left(s, k);
}

/* The largest preferred size <= n (0 if none). */
static size_t preferred_at_most(const qf_serve *s, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < s->npref && s->pref[i] <= n; i++)
        best = s->pref[i];
    return best;
}

/* The size the open batch waits to reach: the next preferred size, or
 * max_batch_size. */
static size_t target_size(const qf_serve *s, size_t n)
{
    for (size_t i = 0; i < s->npref; i++)
        if (s->pref[i] > n)
            return s->pref[i] < s->cap ? s->pref[i] : s->cap;
    return s->cap;
}

/* When the open batch closes by its delay: its oldest request's admission
 * plus the delay, less `early` (0 <= early <= delay). A sum past the clock's
 * range (max_queue_delay_ns = INT64_MAX, say) saturates to QF_FOREVER: the
 * batch waits until it is full, reaches a preferred size or a drain. */
static qf_deadline close_time(const qf_serve *s, int64_t early)
{
    int64_t wait = s->delay_ns - early;
    if (s->oldest_ns > INT64_MAX - wait)
        return QF_FOREVER;
    return s->oldest_ns + wait;
}

/* Under the lock. QF_OK with a batch in out[0, *ret_n); QF_OUT_OF_RANGE
 * when drained; QF_PENDING with f->need and f->wake_at. */
static qf_code form_locked(qf_serve *s, int64_t now, qf_serve_request **out, size_t *ret_n, form *f)
{
    QF__ASSERT_HELD(&s->lock);
    if (s->ad) /* adaptive mode (issue 30): sets delay_ns and cap */
        qf__serve_adapt_tick(s, now);
    /* Learn how late a consumer armed for a close time gets here. */
    if (s->armed_at != QF_FOREVER && now >= s->armed_at) {
        int64_t sample = now - s->armed_at;
        if (sample > s->delay_ns)
            sample = s->delay_ns;
        s->late_ns += (sample - s->late_ns) / 8;
    }
    s->armed_at = QF_FOREVER;
    int64_t early = s->late_ns < s->delay_ns / 4 ? s->late_ns : s->delay_ns / 4;
    for (int round = 0;; round++) {
        uint64_t a = atomic_load_explicit(&s->adm, memory_order_seq_cst);
        qf_deadline dl = atomic_load_explicit(&s->drain_deadline, memory_order_acquire);
        if ((a & QF__ADM_DRAIN) && !(a & QF__ADM_CANCEL) && dl != QF_FOREVER && now >= dl)
            a = atomic_fetch_or_explicit(&s->adm, QF__ADM_CANCEL, memory_order_seq_cst) |
                QF__ADM_CANCEL;
        f->flags = a & (QF__ADM_DRAIN | QF__ADM_CANCEL);
        if (a & QF__ADM_CANCEL) {
            qf__serve_cancel_locked(s, &f->cancelled);
            if ((atomic_load_explicit(&s->adm, memory_order_seq_cst) & QF__ADM_DEPTH) == 0)
                return QF_OUT_OF_RANGE;
            /* A submit between its reservation and its enqueue: it adds
             * to ready next, which wakes us. */
            f->need = 1;
            f->wake_at = QF_FOREVER;
            return QF_PENDING;
        }
        bool draining = (a & QF__ADM_DRAIN) != 0;
        pull(s, now, f);
        size_t n = s->npending;
        if (n == 0) {
            if (draining &&
                (atomic_load_explicit(&s->adm, memory_order_seq_cst) & QF__ADM_DEPTH) == 0)
                return QF_OUT_OF_RANGE;
            f->need = 1;
            f->wake_at = draining ? dl : QF_FOREVER;
            return QF_PENDING;
        }
        qf_deadline close_at = close_time(s, early);
        size_t k = n;
        qf_serve_close_reason why;
        if (n >= s->cap || s->cost_blocked) {
            why = QF_SERVE_CLOSE_FULL;
            if (n > s->cap) /* the adaptive cap came down */
                k = s->cap;
            else if (n < s->cap)
                qf__serve_add(&s->n_cost_closed, 1);
        } else if (draining) {
            why = QF_SERVE_CLOSE_DRAIN;
        } else if (close_at != QF_FOREVER && now >= close_at) {
            why = QF_SERVE_CLOSE_DELAY;
        } else if (s->npref && n >= s->pref[0] &&
                   atomic_load_explicit(&s->ready, memory_order_seq_cst) <= 0) {
            why = QF_SERVE_CLOSE_PREFERRED;
            k = preferred_at_most(s, n);
        } else {
            /* Something arrived while we pulled: take it before waiting. */
            if (round < 4 && atomic_load_explicit(&s->ready, memory_order_relaxed) > 0)
                continue;
            f->need = (int64_t)(target_size(s, n) - n);
            f->wake_at = close_at;
            s->armed_at = close_at;
            return QF_PENDING;
        }
        hand_out(s, k, why, now, out);
        *ret_n = k;
        return QF_OK;
    }
}

enum { NEXT_TRY, NEXT_WAIT, NEXT_POLL };

static qf_code next_batch(qf_serve *s, int mode, qf_deadline deadline, qf_waker *pw,
                          qf_serve_request **out, size_t *ret_n, qf_deadline *ret_wake_at)
{
    if (!s || !out || !ret_n)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_next_batch: NULL %s",
                            !s     ? "batcher"
                            : !out ? "ret_reqs"
                                   : "ret_n");
    if (mode == NEXT_POLL && (!pw || !ret_wake_at))
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_poll_next_batch: NULL %s",
                            pw ? "ret_wake_at" : "waker");
    if (mode == NEXT_WAIT && qf__in_task())
        return qf__blocking_in_task_error("qf_serve_next_batch");
    for (;;) {
        form f = {NULL, NULL, 1, QF_FOREVER, 0};
        size_t n = 0;
        qf__lock(&s->lock);
        int64_t now = qf_now_ns();
        qf_code rc = form_locked(s, now, out, &n, &f);
        if (rc == QF_PENDING)
            atomic_store_explicit(&s->need, f.need, memory_order_seq_cst);
        qf__unlock(&s->lock);
        qf__serve_answer_list(f.expired, QF_DEADLINE_EXCEEDED);
        qf__serve_answer_list(f.cancelled, QF_CANCELLED);
        if (rc != QF_PENDING) {
            if (pw && qf_waker_state(pw) == QF_WAKER_REGISTERED)
                qf_waker_withdraw(pw);
            if (rc == QF_OK) {
                *ret_n = n;
                return QF_OK;
            }
            if (atomic_load_explicit(&s->input_ended, memory_order_relaxed))
                return qf_set_error(QF_OUT_OF_RANGE,
                                    "batcher '%s': input ended (qf_serve_end_input) and "
                                    "everything admitted was handed out",
                                    s->name);
            return qf_set_error(QF_OUT_OF_RANGE, "batcher '%s' is drained", s->name);
        }
        if (mode == NEXT_TRY)
            return qf__set_error_static(QF_UNAVAILABLE, "no batch is due");
        if (mode == NEXT_WAIT && deadline != QF_FOREVER && now >= deadline)
            return qf_set_error(QF_DEADLINE_EXCEEDED, "batcher '%s': no batch by the deadline",
                                s->name);
        qf_waker tw;
        qf_waker *w = pw;
        if (mode == NEXT_WAIT) {
            qf_waker_init_thread(&tw);
            w = &tw;
        }
        qf_waitlist_register(&s->consumers, w);
        /* The re-check of the wait-list protocol: an arrival that can close
         * the batch, a drain, or the end of one (depth reached 0 under the
         * drain flag: qf__serve_left() wakes consumers for that) since the
         * decision. */
        uint64_t a = atomic_load_explicit(&s->adm, memory_order_seq_cst);
        if (atomic_load_explicit(&s->ready, memory_order_seq_cst) >= f.need ||
            (a & (QF__ADM_DRAIN | QF__ADM_CANCEL)) != f.flags ||
            ((a & QF__ADM_DRAIN) && (a & QF__ADM_DEPTH) == 0)) {
            qf_waitlist_cancel(&s->consumers, w);
            continue;
        }
        if (mode == NEXT_POLL) {
            *ret_wake_at = f.wake_at;
            return QF_PENDING;
        }
        if (qf_waker_wait_until(&tw, qf_deadline_min(f.wake_at, deadline)) == QF_DEADLINE_EXCEEDED)
            qf_waitlist_cancel(&s->consumers, &tw);
    }
}

qf_code qf_serve_next_batch(qf_serve *s, qf_serve_request **ret_reqs, size_t *ret_n)
{
    return next_batch(s, NEXT_WAIT, QF_FOREVER, NULL, ret_reqs, ret_n, NULL);
}

qf_code qf_serve_next_batch_until(qf_serve *s, qf_deadline deadline, qf_serve_request **ret_reqs,
                                  size_t *ret_n)
{
    return next_batch(s, NEXT_WAIT, deadline, NULL, ret_reqs, ret_n, NULL);
}

qf_code qf_serve_try_next_batch(qf_serve *s, qf_serve_request **ret_reqs, size_t *ret_n)
{
    return next_batch(s, NEXT_TRY, QF_NO_WAIT, NULL, ret_reqs, ret_n, NULL);
}

qf_code qf_serve_poll_next_batch(qf_serve *s, qf_waker *w, qf_serve_request **ret_reqs,
                                 size_t *ret_n, qf_deadline *ret_wake_at)
{
    return next_batch(s, NEXT_POLL, QF_NO_WAIT, w, ret_reqs, ret_n, ret_wake_at);
}

/* What a request that complete may not claim is doing, for the message. */
static const char *state_name(uint32_t st)
{
    if (st & QF__REQ_ANSWERED)
        return "already answered";
    if (!(st & QF__REQ_QUEUED))
        return "never submitted (or answered and not submitted again)";
    if (st & QF__REQ_COMPLETING)
        return "being completed by another call (or listed twice)";
    return "still queued, not handed out yet";
}

/* Claim reqs[i] for this complete: HANDED -> COMPLETING. */
static qf_code claim(qf_serve *s, qf_serve_request *r, size_t i)
{
    uint32_t st = atomic_load_explicit(&r->qf__state, memory_order_acquire);
    while ((st & (QF__REQ_QUEUED | QF__REQ_HANDED | QF__REQ_ANSWERED)) ==
           (QF__REQ_QUEUED | QF__REQ_HANDED))
        if (atomic_compare_exchange_weak_explicit(&r->qf__state, &st,
                                                  (st & ~QF__REQ_HANDED) | QF__REQ_COMPLETING,
                                                  memory_order_acq_rel, memory_order_acquire))
            return QF_OK;
    return qf_set_error(QF_FAILED_PRECONDITION,
                        "batcher '%s': request %zu of the batch is not handed out: %s", s->name, i,
                        state_name(st));
}

/* A claim that must not stand (a later request of the same call was
 * refused): back to handed out. */
static void unclaim(qf_serve_request *r)
{
    uint32_t st = atomic_load_explicit(&r->qf__state, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&r->qf__state, &st,
                                                  (st & ~QF__REQ_COMPLETING) | QF__REQ_HANDED,
                                                  memory_order_release, memory_order_relaxed))
        ;
}

qf_code qf__serve_claim_batch(qf_serve *s, qf_serve_request *const *reqs, size_t n, qf_code status,
                              const char *fn)
{
    if (!s || (!reqs && n > 0))
        return qf_set_error(QF_INVALID_ARGUMENT, "%s: NULL %s", fn, s ? "requests" : "batcher");
    if (!qf_code_is_valid((int)status))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': completion status %d is not a canonical code", s->name,
                            (int)status);
    /* Before any request is looked at: a count above what is out is a
     * wrong n, and reqs[] past the real batch may be garbage. */
    uint64_t out = atomic_load_explicit(&s->in_flight, memory_order_acquire);
    if (out < n)
        return qf_set_error(QF_FAILED_PRECONDITION,
                            "batcher '%s': completing %zu requests, only %llu in flight", s->name,
                            n, (unsigned long long)out);
    for (size_t i = 0; i < n; i++)
        if (!reqs[i])
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "batcher '%s': request %zu of the batch is NULL", s->name, i);
    /* All or nothing: claim each; on a refusal give back what was claimed,
     * so the requests stay handed out and nothing is answered. */
    for (size_t i = 0; i < n; i++) {
        qf_code rc = claim(s, reqs[i], i);
        if (rc != QF_OK) {
            while (i-- > 0)
                unclaim(reqs[i]);
            return rc;
        }
    }
    return QF_OK;
}

/* Claimed requests: the model is done with them (model time). */
void qf__serve_model_done(qf_serve *s, qf_serve_request *const *reqs, size_t n, int64_t now)
{
    if (s->ad) /* before the answers: a callback may free its request */
        qf__serve_adapt_record(s, reqs, n);
    for (size_t i = 0; i < n; i++) {
        const qf_serve_request *r = reqs[i];
        qf__serve_hist_add(s, QF_SERVE_HIST_MODEL_TIME, r->priority, now - r->qf__hand_ns);
    }
}

/* Answer one claimed request (its end-to-end latency first: the answer
 * may free it). */
void qf__serve_settle(qf_serve *s, qf_serve_request *r, qf_code status, int64_t now)
{
    qf__serve_hist_add(s, QF_SERVE_HIST_LATENCY, r->priority, now - r->qf__admit_ns);
    qf__serve_answer(r, status);
}

/* After answering claimed requests: counts, in flight, drains. */
void qf__serve_settled(qf_serve *s, uint64_t ok, uint64_t err)
{
    if (ok + err == 0)
        return;
    if (ok)
        qf__serve_add(&s->n_ok, ok);
    if (err)
        qf__serve_add(&s->n_error, err);
    atomic_fetch_sub_explicit(&s->in_flight, ok + err, memory_order_seq_cst);
    if (atomic_load_explicit(&s->adm, memory_order_seq_cst) & QF__ADM_DRAIN)
        qf_eventcount_notify(&s->quiet, true);
}

qf_code qf_serve_complete(qf_serve *s, qf_serve_request *const *reqs, size_t n, qf_code status)
{
    qf_code rc = qf__serve_claim_batch(s, reqs, n, status, "qf_serve_complete");
    if (rc != QF_OK)
        return rc;
    int64_t now = n ? qf_now_ns() : 0;
    qf__serve_model_done(s, reqs, n, now);
    for (size_t i = 0; i < n; i++)
        qf__serve_settle(s, reqs[i], status, now);
    qf__serve_settled(s, status == QF_OK ? n : 0, status == QF_OK ? 0 : n);
    return QF_OK;
}
