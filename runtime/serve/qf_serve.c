/* qf_serve.c - a batcher's life (create, free, attributes) and admission
 * (submit in its three forms).
 *
 * Admission is one CAS on the admission word (qf_serve-impl.h): depth up
 * by one while the drain flag is clear and depth is under the bound. The
 * request then goes into its level's ring, and `ready` goes up after it,
 * so a consumer that sees the count also finds the request. A consumer
 * asleep is woken only when the count reaches what it needs to close its
 * batch, so a stream of arrivals into an open batch costs no syscalls.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qf_serve-impl.h"
#include "qf_status-impl.h"
#include "qf_task_mark-impl.h"
#include "qf_waitlist-impl.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static qf_code check_options(const qf_serve_options *o)
{
    if (!o)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_new: NULL options");
    const char *nm = o->name ? o->name : "batcher";
    if (o->max_batch_size == 0 || o->max_batch_size > QF_SERVE_MAX_BATCH)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': max_batch_size %zu must be in 1..%d", nm,
                            o->max_batch_size, QF_SERVE_MAX_BATCH);
    if (o->max_queue_delay_ns < 0)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': max_queue_delay_ns %lld must be >= 0", nm,
                            (long long)o->max_queue_delay_ns);
    if (o->num_preferred > 0 && !o->preferred_batch_sizes)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': preferred_batch_sizes is NULL with num_preferred %zu",
                            nm, o->num_preferred);
    for (size_t i = 0; i < o->num_preferred; i++)
        if (o->preferred_batch_sizes[i] == 0 || o->preferred_batch_sizes[i] > o->max_batch_size)
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "batcher '%s': preferred_batch_sizes[%zu] = %zu must be in 1..%zu "
                                "(max_batch_size)",
                                nm, i, o->preferred_batch_sizes[i], o->max_batch_size);
    if (o->priority_levels > QF_SERVE_MAX_LEVELS)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': priority_levels %u must be in 1..%d (0 means 1)", nm,
                            o->priority_levels, QF_SERVE_MAX_LEVELS);
    if (o->max_queued < 0)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': max_queued %lld must be >= 0 (0: unbounded)", nm,
                            (long long)o->max_queued);
    if ((int)o->admission < QF_SERVE_REJECT || (int)o->admission > QF_SERVE_DROP_OLDEST)
        return qf_set_error(QF_INVALID_ARGUMENT, "batcher '%s': unknown admission policy %d", nm,
                            (int)o->admission);
    if (o->drain_grace_ns < 0)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': drain_grace_ns %lld must be >= 0 (0: the default)", nm,
                            (long long)o->drain_grace_ns);
    return qf__serve_policy_check(o, nm); /* issue 30: levels, cost, adaptive */
}

static void destroy(qf_serve *s)
{
    qf__serve_policy_destroy(s);
    qf__serve_adapt_destroy(s);
    if (s->q)
        for (uint32_t l = 0; l < s->levels; l++)
            qf_queue_unref(s->q[l]);
    free(s->q);
    free(s->pending);
    free(s->bypass);
    free(s->pref);
    free(s->name);
    qf__serve_hist_free(s);
    free(s);
}

/* The Coordinator's stop: begin a drain with the configured grace. Must
 * not block (a stop action), and begin_drain does not. */
static void on_stop(void *arg)
{
    qf_serve *s = arg;
    qf_serve_begin_drain(s, qf_deadline_in_ns(s->grace_ns));
}

qf_code qf_serve_new(const qf_serve_options *opts, qf_serve **ret_s)
{
    qf_code rc = check_options(opts);
    if (rc != QF_OK)
        return rc;
    if (!ret_s)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_new: NULL ret_s");
    qf_serve *s = aligned_alloc(64, (sizeof(qf_serve) + 63) & ~(size_t)63);
    if (!s)
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a batcher");
    memset(s, 0, sizeof(*s));
    s->name = dup_str(opts->name ? opts->name : "batcher");
    s->max_batch = opts->max_batch_size;
    s->delay_ns = opts->max_queue_delay_ns;
    s->levels = opts->priority_levels ? opts->priority_levels : 1;
    s->max_bypass = opts->max_bypass;
    s->bound = opts->max_queued;
    s->policy = opts->admission;
    s->grace_ns = opts->drain_grace_ns ? opts->drain_grace_ns : QF_SERVE_DEFAULT_DRAIN_GRACE_NS;
    s->coord = opts->coord;
    atomic_init(&s->exec_slice_ns, QF_SERVE_DEFAULT_EXEC_SLICE_NS);
    s->pending = calloc(s->max_batch, sizeof(*s->pending));
    s->bypass = calloc(s->levels, sizeof(*s->bypass));
    s->q = calloc(s->levels, sizeof(*s->q));
    if (!s->name || !s->pending || !s->bypass || !s->q)
        goto oom;
    qf__serve_fdc_init(s);
    atomic_init(&s->input_ended, false);
    rc = qf__serve_hist_init(s, opts); /* checks the bucket options too */
    if (rc != QF_OK) {
        destroy(s);
        return rc;
    }
    if (opts->num_preferred) {
        s->pref = malloc(opts->num_preferred * sizeof(size_t));
        if (!s->pref)
            goto oom;
        memcpy(s->pref, opts->preferred_batch_sizes, opts->num_preferred * sizeof(size_t));
        qsort(s->pref, opts->num_preferred, sizeof(size_t), cmp_size);
        for (size_t i = 0; i < opts->num_preferred; i++)
            if (s->npref == 0 || s->pref[s->npref - 1] != s->pref[i])
                s->pref[s->npref++] = s->pref[i];
    }
    /* One ring per level. With a bound, each level can hold all of it
     * (depth counts every level), so an admitted request always fits. */
    for (uint32_t l = 0; l < s->levels; l++) {
        char qname[256];
        snprintf(qname, sizeof(qname), "%s/level%u", s->name, l);
        rc = qf_ptr_queue_new(s->bound ? s->bound : -1, qname, 0, NULL, &s->q[l]);
        if (rc != QF_OK) {
            destroy(s);
            return rc;
        }
    }
    atomic_init(&s->adm, 0);
    atomic_init(&s->ready, 0);
    atomic_init(&s->need, 1);
    atomic_init(&s->drain_deadline, QF_FOREVER);
    s->armed_at = QF_FOREVER;
    qf_waitlist_init(&s->consumers);
    qf_waitlist_init(&s->producers);
    qf_eventcount_init(&s->quiet);
    atomic_init(&s->lock, 0);
    atomic_init(&s->delay_max, 0);
    /* per-priority policy, cost batching, adaptive delay (issue 30) */
    if ((rc = qf__serve_policy_init(s, opts)) != QF_OK ||
        (rc = qf__serve_adapt_init(s, opts)) != QF_OK ||
        (rc = qf__serve_policy_start(s)) != QF_OK) {
        destroy(s);
        return rc;
    }
    if (s->coord) {
        rc = qf_coord_add_stop_action(s->coord, on_stop, s, &s->stop_action);
        if (rc != QF_OK) {
            destroy(s);
            return rc;
        }
    }
    qf__serve_register(s);
    *ret_s = s;
    return QF_OK;
oom:
    destroy(s);
    return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a batcher");
}

void qf_serve_free(qf_serve *s)
{
    if (!s)
        return;
    /* Stop actions first: after this none can begin a drain on s. */
    if (s->stop_action)
        qf_coord_remove_stop_action(s->coord, s->stop_action);
    qf__serve_policy_stop(s); /* the level timer (issue 30) */
    qf__serve_fdc_free(s);    /* answers posts nobody collected */
    qf_serve_drain(s, QF_NO_WAIT, NULL);
    qf__serve_unregister(s);
    qf_waitlist_destroy(&s->consumers);
    qf_waitlist_destroy(&s->producers);
    destroy(s);
}

/* The accessors' answer to a NULL batcher: a neutral value, the error
 * recorded (static message). */
static bool null_batcher(const qf_serve *s, const char *msg)
{
    if (s)
        return false;
    qf__set_error_static(QF_INVALID_ARGUMENT, msg);
    return true;
}

const char *qf_serve_name(const qf_serve *s)
{
    return null_batcher(s, "qf_serve_name: batcher (s) is NULL") ? NULL : s->name;
}

size_t qf_serve_max_batch_size(const qf_serve *s)
{
    return null_batcher(s, "qf_serve_max_batch_size: batcher (s) is NULL") ? 0 : s->max_batch;
}

int64_t qf_serve_depth(const qf_serve *s)
{
    if (null_batcher(s, "qf_serve_depth: batcher (s) is NULL"))
        return 0;
    uint64_t a = atomic_load_explicit(&((qf_serve *)s)->adm, memory_order_relaxed);
    return (int64_t)(a & QF__ADM_DEPTH);
}

bool qf_serve_is_draining(const qf_serve *s)
{
    if (null_batcher(s, "qf_serve_is_draining: batcher (s) is NULL"))
        return false;
    return atomic_load_explicit(&((qf_serve *)s)->adm, memory_order_acquire) & QF__ADM_DRAIN;
}

/* ------------------------------------------------------------------ submit */

enum { SUBMIT_PLAIN, SUBMIT_TRY, SUBMIT_POLL };
typedef enum { ADM_OK, ADM_FULL, ADM_DRAINING } adm_result;

static adm_result reserve(qf_serve *s)
{
    uint64_t a = atomic_load_explicit(&s->adm, memory_order_relaxed);
    for (;;) {
        if (a & QF__ADM_DRAIN)
            return ADM_DRAINING;
        if (s->bound && (int64_t)(a & QF__ADM_DEPTH) >= s->bound)
            return ADM_FULL;
        /* seq_cst: a consumer's "drained" check (flag, then depth) must
         * see this reservation or make us see the flag. */
        if (atomic_compare_exchange_weak_explicit(&s->adm, &a, a + 1, memory_order_seq_cst,
                                                  memory_order_relaxed))
            return ADM_OK;
    }
}

/* The answer is given through the completion, then recorded as this
 * thread's error (after: the callback may make qflow calls of its own). */
static qf_code refuse(qf_serve *s, qf_serve_request *req, qf_code code, const char *why)
{
    qf__serve_add(&s->n_rejected, 1);
    atomic_store_explicit(&req->qf__state, QF__REQ_QUEUED, memory_order_relaxed);
    qf__serve_answer(req, code);
    return qf_set_error(code, "batcher '%s': request refused: %s", s->name, why);
}

/* Put an admitted request (its depth already counted) into its ring and
 * tell a consumer waiting for it. */
static qf_code enter(qf_serve *s, qf_serve_request *req, int64_t now)
{
    uint32_t level = req->priority; /* once in the ring, req may be answered and gone */
    req->qf__admit_ns = now;
    req->qf__next = NULL;
    if (s->lvl) /* a level timeout counts from admission (issue 30) */
        qf__serve_policy_enter(s, req, now);
    atomic_store_explicit(&req->qf__state, QF__REQ_QUEUED, memory_order_relaxed);
    qf__serve_add(&s->n_admitted, 1);
    /* Release through the ring: the consumer sees the fields above and
     * everything the caller wrote to req->user. */
    if (qf_queue_try_enqueue_ptr(s->q[req->priority], req) != QF_OK) {
        /* Cannot happen (a level's ring holds the whole bound); if it
         * did, the request is not lost: it is answered. */
        qf__serve_add(&s->n_dropped, 1);
        qf__serve_left(s, 1);
        qf__serve_answer(req, QF_UNAVAILABLE);
        return qf_set_error(QF_UNAVAILABLE, "batcher '%s': level queue refused a request", s->name);
    }
    int64_t r = atomic_fetch_add_explicit(&s->ready, 1, memory_order_seq_cst) + 1;
    if (qf__waitlist_count_sc(&s->consumers) &&
        r >= atomic_load_explicit(&s->need, memory_order_seq_cst))
        qf_waitlist_wake(&s->consumers, INT32_MAX);
    if (s->timer) /* a level timer asleep for want of requests (issue 30) */
        qf__serve_timer_entered(s, level);
    return QF_OK;
}

/* DROP_OLDEST: the oldest request of the least urgent level that holds
 * one, not more urgent than `prio`; NULL when there is none in the staged
 * lists or the rings (requests a consumer is forming into a batch cannot
 * be dropped). */
static qf_serve_request *take_victim(qf_serve *s, uint32_t prio)
{
    for (uint32_t l = s->levels; l-- > prio;) {
        /* A staged list holds a level's oldest (issue 30): before its ring. */
        qf_serve_request *staged = s->staged ? qf__serve_unstage_oldest(s, l) : NULL;
        if (staged)
            return staged;
        void *p;
        if (qf_queue_try_dequeue_ptr(s->q[l], &p) == QF_OK) {
            atomic_fetch_sub_explicit(&s->ready, 1, memory_order_relaxed);
            qf__serve_level_leave(s, p);
            return p;
        }
    }
    return NULL;
}

/* BLOCK: whether a waiting submitter should look again. */
static bool room_or_drain(qf_serve *s)
{
    uint64_t a = atomic_load_explicit(&s->adm, memory_order_seq_cst);
    return (a & QF__ADM_DRAIN) || (int64_t)(a & QF__ADM_DEPTH) < s->bound;
}

static qf_code admit(qf_serve *s, qf_serve_request *req, int mode, qf_waker *pw, int64_t now);

static qf_code submit(qf_serve *s, qf_serve_request *req, int mode, qf_waker *pw)
{
    if (!s || !req)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_submit: NULL %s",
                            s ? "request" : "batcher");
    if (mode == SUBMIT_POLL && !pw)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_poll_submit: NULL waker");
    if (req->priority >= s->levels)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': request priority %u out of range [0, %u)", s->name,
                            req->priority, s->levels);
    if (atomic_load_explicit(&req->qf__state, memory_order_acquire) & QF__REQ_QUEUED)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': request already submitted and not yet answered",
                            s->name);
    int64_t now = qf_now_ns();
    /* per-priority policy, cost batching (issue 30): the cost check and the
     * level's place, given back unless the request entered. */
    uint32_t level = req->priority;
    qf_code rc = qf__serve_policy_admit(s, req, now);
    if (rc != QF_OK)
        return rc;
    rc = admit(s, req, mode, pw, now);
    if (rc != QF_OK && s->lvl)
        atomic_fetch_sub_explicit(&s->lvl[level].depth, 1, memory_order_relaxed);
    return rc;
}

static qf_code admit(qf_serve *s, qf_serve_request *req, int mode, qf_waker *pw, int64_t now)
{
    bool woken = false;
    for (;;) {
        bool expired = req->deadline != QF_FOREVER && now >= req->deadline;
        adm_result a = reserve(s);
        if (a == ADM_OK) {
#ifdef QF_RACE_WIDENING
            /* Widen the window in which depth counts a request that no ring
             * holds yet (drains and consumers must wait it out). */
            sched_yield();
#endif
            if (pw && qf_waker_state(pw) == QF_WAKER_REGISTERED)
                qf_waitlist_cancel(&s->producers, pw);
            if (!expired)
                return enter(s, req, now);
            /* Already past its deadline: admitted and expired at once. */
            req->qf__admit_ns = now;
            atomic_store_explicit(&req->qf__state, QF__REQ_QUEUED, memory_order_relaxed);
            qf__serve_add(&s->n_admitted, 1);
            qf__serve_add(&s->n_expired, 1);
            qf__serve_left(s, 1);
            qf__serve_answer(req, QF_DEADLINE_EXCEEDED);
            return qf_set_error(QF_DEADLINE_EXCEEDED,
                                "batcher '%s': request deadline passed before submit", s->name);
        }
        if (pw && qf_waker_state(pw) == QF_WAKER_REGISTERED)
            qf_waitlist_cancel(&s->producers, pw);
        if (a == ADM_DRAINING && atomic_load_explicit(&s->input_ended, memory_order_seq_cst))
            return qf_set_error(QF_FAILED_PRECONDITION,
                                "batcher '%s': input ended (qf_serve_end_input): no request is "
                                "accepted after it; the request was not submitted",
                                s->name);
        if (a == ADM_DRAINING)
            return refuse(s, req, QF_UNAVAILABLE, "draining, not admitting");
        if (s->policy == QF_SERVE_DROP_OLDEST) {
            qf_serve_request *victim = take_victim(s, req->priority);
            if (!victim)
                return refuse(s, req, QF_UNAVAILABLE,
                              "full, and nothing queued that may be dropped for it");
            /* The victim's place (its depth) passes to the newcomer. */
            qf__serve_add(&s->n_dropped, 1);
            qf__serve_answer(victim, QF_UNAVAILABLE);
            return enter(s, req, now);
        }
        if (s->policy == QF_SERVE_REJECT || mode == SUBMIT_TRY)
            return refuse(s, req, QF_UNAVAILABLE, "full");
        /* BLOCK: wait for room until the request's deadline. */
        if (expired) {
            if (woken) /* a wake for room this thread will not use: pass it on */
                qf_waitlist_wake(&s->producers, 1);
            return refuse(s, req, QF_UNAVAILABLE, "still full at the request's deadline");
        }
        if (mode == SUBMIT_POLL) {
            qf_waitlist_register(&s->producers, pw);
            if (room_or_drain(s))
                continue; /* cancelled at the top of the next round */
            return QF_PENDING;
        }
        if (qf__in_task())
            return qf__blocking_in_task_error("qf_serve_submit");
        qf_waker w;
        qf_waker_init_thread(&w);
        qf_waitlist_register(&s->producers, &w);
        if (room_or_drain(s))
            woken = !qf_waitlist_cancel(&s->producers, &w);
        else if (qf_waker_wait_until(&w, req->deadline) == QF_DEADLINE_EXCEEDED)
            woken = !qf_waitlist_cancel(&s->producers, &w);
        else
            woken = true;
        now = qf_now_ns();
    }
}

qf_code qf_serve_submit(qf_serve *s, qf_serve_request *req)
{
    return submit(s, req, SUBMIT_PLAIN, NULL);
}

qf_code qf_serve_try_submit(qf_serve *s, qf_serve_request *req)
{
    return submit(s, req, SUBMIT_TRY, NULL);
}

qf_code qf_serve_poll_submit(qf_serve *s, qf_serve_request *req, qf_waker *w)
{
    return submit(s, req, SUBMIT_POLL, w);
}

bool qf_serve_cancel_poll(qf_serve *s, qf_waker *w)
{
    if (!s || !w) {
        qf__set_error_static(QF_INVALID_ARGUMENT, s ? "qf_serve_cancel_poll: waker (w) is NULL"
                                                    : "qf_serve_cancel_poll: batcher (s) is NULL");
        return false;
    }
    return qf_waker_withdraw(w);
}
