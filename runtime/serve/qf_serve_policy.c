/* qf_serve_policy.c - per-priority policy (queue limits, timeouts that
 * reject or demote) and batching by cost (issue 30).
 *
 * Level limits are a per-level depth counter, reserved at submit before
 * the batcher-wide admission word, and given back whenever a request leaves
 * its level (handed out, answered, dropped, demoted out of it).
 *
 * Timeouts and cost need to look at a level's oldest requests without
 * taking them, which a ring cannot do. So with either configured, a level
 * has a staged list beside its ring: an intrusive FIFO (through qf__next,
 * no allocation) that a consumer or the timer fills from the ring under the
 * consumer mutex. The ring stays the submitters' lock-free way in; the list
 * is where requests wait once someone has looked at them. Formation takes
 * from the list's head, and stops at a request whose cost does not fit.
 *
 * The timer. Every request of a level with a timeout gets a due time, its
 * entry into the level plus the timeout. A level's requests enter in order,
 * so their due times are in order too (to within the moment between a
 * submitter's clock read and its enqueue), and a sweep only has to look at
 * each list's head. The timer thread sleeps until the earliest head's due
 * time, or, for requests still in a ring (which it has not seen), until its
 * last sweep plus the level's timeout: a request that entered after that
 * sweep cannot be due before then. A sweep (under the consumer mutex, which
 * no one holds while the model runs) also looks at the forming batch. That
 * is what makes timeouts fire while the model is busy: no consumer needs to
 * come and form a batch.
 *
 * An idle batcher costs no wakes. When a sweep ends with no request at any
 * level that has a timeout (their depth counters all 0), the timer sleeps
 * until a submitter enters such a level, not until the next timeout period:
 *   timer      idle = 1 (seq_cst); look at the depths (seq_cst loads); all
 *              0: wait on the condition variable while idle == 1 (under
 *              its mutex); else take idle back (CAS 1 -> 0) and sleep
 *              until the sweep's `next` as before.
 *   submitter  depth += 1 (seq_cst RMW, at admission); the request into
 *              its ring; then, for a level with a timeout, load idle
 *              (seq_cst): 1 -> CAS it to 0 and, if that won, signal the
 *              condition variable under its mutex.
 * The four seq_cst accesses pair as a store-buffer (Dekker) test: if the
 * timer's load missed a submitter's increment, that increment follows the
 * timer's idle store in the total order, so the submitter's later idle load
 * sees 1 and wakes it; the wake is after the request is in its ring, so the
 * sweep it causes finds the request. The timer checks idle under the mutex
 * before each wait and the signal is sent under it, so a wake cannot fall
 * between the check and the wait. tests/model/serve_timer.pml checks it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qf_lock-impl.h"
#include "qf_serve-impl.h"
#include "qf_status-impl.h"
#include "qf_thread-impl.h"

struct qf__serve_timer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool started;
    _Atomic uint32_t idle;   /* 1: asleep until a request enters (see the top) */
    _Atomic uint64_t sweeps; /* sweeps done: the tests' window on the timer */
};

qf_code qf__serve_policy_check(const qf_serve_options *o, const char *nm)
{
    uint32_t levels = o->priority_levels ? o->priority_levels : 1;
    if (o->level_policy && levels <= QF_SERVE_MAX_LEVELS) {
        for (uint32_t l = 0; l < levels; l++) {
            const qf_serve_level_policy *p = &o->level_policy[l];
            if (p->max_queued < 0)
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "batcher '%s': level_policy[%u].max_queued %lld must be >= 0 "
                                    "(0: no limit)",
                                    nm, l, (long long)p->max_queued);
            if (p->timeout_ns < 0)
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "batcher '%s': level_policy[%u].timeout_ns %lld must be >= 0 "
                                    "(0: none)",
                                    nm, l, (long long)p->timeout_ns);
            if ((int)p->on_timeout != QF_SERVE_TIMEOUT_REJECT &&
                (int)p->on_timeout != QF_SERVE_TIMEOUT_DEMOTE)
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "batcher '%s': level_policy[%u].on_timeout %d is not a "
                                    "qf_serve_timeout_action",
                                    nm, l, (int)p->on_timeout);
            if (p->timeout_code != QF_OK && !qf_code_is_valid((int)p->timeout_code))
                return qf_set_error(QF_INVALID_ARGUMENT,
                                    "batcher '%s': level_policy[%u].timeout_code %d is not a "
                                    "canonical code (0 selects QF_DEADLINE_EXCEEDED)",
                                    nm, l, (int)p->timeout_code);
        }
    }
    if ((o->cost_fn != NULL) != (o->max_batch_cost > 0))
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': cost_fn and max_batch_cost go together (cost_fn %s, "
                            "max_batch_cost %llu)",
                            nm, o->cost_fn ? "set" : "NULL", (unsigned long long)o->max_batch_cost);
    if (o->p99_target_ns < 0)
        return qf_set_error(QF_INVALID_ARGUMENT,
                            "batcher '%s': p99_target_ns %lld must be >= 0 (0: adaptive mode off)",
                            nm, (long long)o->p99_target_ns);
    return QF_OK;
}

qf_code qf__serve_policy_init(qf_serve *s, const qf_serve_options *o)
{
    s->cap = s->max_batch;
    s->cost_fn = o->cost_fn;
    s->cost_arg = o->cost_arg;
    s->budget = o->cost_fn ? o->max_batch_cost : 0;
    bool timeouts = false;
    if (o->level_policy)
        for (uint32_t l = 0; l < s->levels; l++)
            timeouts |= o->level_policy[l].timeout_ns > 0;
    s->staged = timeouts || s->budget > 0;
    if (o->level_policy || s->staged) {
        s->lvl = calloc(s->levels, sizeof(*s->lvl));
        if (!s->lvl)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a batcher");
        for (uint32_t l = 0; l < s->levels; l++) {
            struct qf__serve_level *L = &s->lvl[l];
            if (o->level_policy) {
                const qf_serve_level_policy *p = &o->level_policy[l];
                L->limit = p->max_queued;
                L->timeout_ns = p->timeout_ns;
                L->action = p->on_timeout;
                L->code = p->timeout_code ? p->timeout_code : QF_DEADLINE_EXCEEDED;
            }
            atomic_init(&L->depth, 0);
        }
    }
    if (timeouts) {
        s->timer = calloc(1, sizeof(*s->timer));
        if (!s->timer)
            return qf_set_error(QF_RESOURCE_EXHAUSTED, "out of memory creating a batcher");
    }
    return QF_OK;
}

static int64_t due_after(int64_t now, int64_t timeout)
{
    if (timeout == 0)
        return INT64_MAX;
    return now > INT64_MAX - timeout ? INT64_MAX : now + timeout;
}

void qf__serve_policy_enter(qf_serve *s, qf_serve_request *req, int64_t now)
{
    req->qf__due_ns = due_after(now, s->lvl[req->qf__level].timeout_ns);
}

qf_code qf__serve_policy_admit(qf_serve *s, qf_serve_request *req, int64_t now)
{
    req->qf__level = req->priority;
    req->qf__cost = 0;
    req->qf__due_ns = INT64_MAX;
    req->qf__hand_ns = 0;
    if (s->cost_fn) {
        uint64_t c = s->cost_fn(s->cost_arg, req);
        if (c > s->budget) {
            qf__serve_add(&s->n_cost_refused, 1);
            return qf_set_error(QF_INVALID_ARGUMENT,
                                "batcher '%s': request cost %llu exceeds the batch cost budget "
                                "%llu (max_batch_cost): it could never be batched",
                                s->name, (unsigned long long)c, (unsigned long long)s->budget);
        }
        req->qf__cost = c;
    }
    if (!s->lvl)
        return QF_OK;
    struct qf__serve_level *L = &s->lvl[req->priority];
    /* seq_cst: the timer's idle test pairs with it (see the top). */
    int64_t d = atomic_fetch_add_explicit(&L->depth, 1, memory_order_seq_cst) + 1;
    if (L->limit && d > L->limit) {
        atomic_fetch_sub_explicit(&L->depth, 1, memory_order_relaxed);
        qf__serve_add(&s->n_level_rejected, 1);
        qf__serve_add(&s->n_rejected, 1);
        atomic_store_explicit(&req->qf__state, QF__REQ_QUEUED, memory_order_relaxed);
        qf__serve_answer(req, QF_RESOURCE_EXHAUSTED);
        return qf_set_error(QF_RESOURCE_EXHAUSTED,
                            "batcher '%s': request refused: level %u is at its queue limit of "
                            "%lld (level_policy[%u].max_queued)",
                            s->name, req->priority, (long long)L->limit, req->priority);
    }
    req->qf__due_ns = due_after(now, L->timeout_ns);
    return QF_OK;
}

/* ------------------------------------------------------------ staged lists */

static void stage_tail(struct qf__serve_level *L, qf_serve_request *r)
{
    r->qf__next = NULL;
    if (L->tail)
        L->tail->qf__next = r;
    else
        L->head = r;
    L->tail = r;
}

static qf_serve_request *unstage_head(struct qf__serve_level *L)
{
    qf_serve_request *r = L->head;
    L->head = r->qf__next;
    if (!L->head)
        L->tail = NULL;
    r->qf__next = NULL;
    return r;
}

/* Move everything level l's ring holds onto its staged list, in order. */
static void stage_ring(qf_serve *s, uint32_t l)
{
    void *buf[64];
    size_t got;
    while (qf_queue_try_dequeue_bulk_ptr(s->q[l], 1, 64, buf, &got) == QF_OK)
        for (size_t i = 0; i < got; i++)
            stage_tail(&s->lvl[l], buf[i]);
}

uint64_t qf__serve_pull_staged(qf_serve *s, uint32_t l, int64_t now, qf_serve_request **expired)
{
    QF__ASSERT_HELD(&s->lock);
    struct qf__serve_level *L = &s->lvl[l];
    stage_ring(s, l);
    uint64_t nexp = 0;
    while (L->head && s->npending < s->cap) {
        qf_serve_request *r = L->head;
        if (r->deadline != QF_FOREVER && now >= r->deadline) {
            unstage_head(L);
            atomic_fetch_sub_explicit(&s->ready, 1, memory_order_relaxed);
            qf__serve_level_leave(s, r);
            r->qf__next = *expired;
            *expired = r;
            nexp++;
            continue;
        }
        if (s->budget && s->pending_cost + r->qf__cost > s->budget) {
            s->cost_blocked = true;
            break;
        }
        unstage_head(L);
        atomic_fetch_sub_explicit(&s->ready, 1, memory_order_relaxed);
        if (s->npending == 0 || r->qf__admit_ns < s->oldest_ns)
            s->oldest_ns = r->qf__admit_ns;
        s->pending[s->npending++] = r;
        s->pending_cost += r->qf__cost;
    }
    return nexp;
}

qf_serve_request *qf__serve_unstage_oldest(qf_serve *s, uint32_t l)
{
    qf__lock(&s->lock);
    struct qf__serve_level *L = &s->lvl[l];
    qf_serve_request *r = L->head ? unstage_head(L) : NULL;
    if (r) {
        atomic_fetch_sub_explicit(&s->ready, 1, memory_order_relaxed);
        qf__serve_level_leave(s, r);
    }
    qf__unlock(&s->lock);
    return r;
}

uint64_t qf__serve_unstage_all_locked(qf_serve *s, qf_serve_request **out)
{
    QF__ASSERT_HELD(&s->lock);
    uint64_t n = 0;
    if (!s->lvl)
        return 0;
    for (uint32_t l = 0; l < s->levels; l++)
        while (s->lvl[l].head) {
            qf_serve_request *r = unstage_head(&s->lvl[l]);
            qf__serve_level_leave(s, r);
            r->qf__next = *out;
            *out = r;
            n++;
        }
    atomic_fetch_sub_explicit(&s->ready, (int64_t)n, memory_order_relaxed);
    s->pending_cost = 0;
    return n;
}

/* ------------------------------------------------------------------- timer */

typedef struct sweep {
    qf_serve_request *rejected; /* answer after unlocking, code in qf__status */
    uint64_t nrej;
    int64_t now;
} sweep;

/* A request whose level timeout passed: demote it (onto level+1's staged
 * list) or reject it. `from_ring`: it was counted in ready (staged), not in
 * the forming batch. */
static void time_out(qf_serve *s, qf_serve_request *r, bool counted_ready, sweep *w)
{
    uint32_t l = r->qf__level;
    struct qf__serve_level *L = &s->lvl[l];
    if (L->action == QF_SERVE_TIMEOUT_DEMOTE && l + 1 < s->levels) {
        struct qf__serve_level *N = &s->lvl[l + 1];
        int64_t d = atomic_fetch_add_explicit(&N->depth, 1, memory_order_relaxed) + 1;
        if (!N->limit || d <= N->limit) {
            atomic_fetch_sub_explicit(&L->depth, 1, memory_order_relaxed);
            r->qf__level = l + 1;
            r->qf__due_ns = due_after(w->now, N->timeout_ns);
            /* Whatever l+1's ring holds entered before now: it goes first,
             * so the list stays in due order. */
            stage_ring(s, l + 1);
            stage_tail(N, r);
            if (!counted_ready)
                atomic_fetch_add_explicit(&s->ready, 1, memory_order_seq_cst);
            qf__serve_add(&s->n_demoted, 1);
            return;
        }
        atomic_fetch_sub_explicit(&N->depth, 1, memory_order_relaxed);
    }
    if (counted_ready)
        atomic_fetch_sub_explicit(&s->ready, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&L->depth, 1, memory_order_relaxed);
    atomic_store_explicit(&r->qf__status, (int32_t)L->code, memory_order_relaxed);
    r->qf__next = w->rejected;
    w->rejected = r;
    w->nrej++;
}

/* One sweep; returns when the timer should look again. */
static int64_t sweep_once(qf_serve *s)
{
    sweep w = {NULL, 0, 0};
    qf__lock(&s->lock);
    w.now = qf_now_ns();
    int64_t next = INT64_MAX;
    /* The forming batch first: what is demoted out of it joins its new
     * level's list behind what that level has. */
    size_t keep = 0;
    s->pending_cost = 0;
    for (size_t i = 0; i < s->npending; i++) {
        qf_serve_request *r = s->pending[i];
        if (r->qf__due_ns <= w.now) {
            time_out(s, r, false, &w);
            continue;
        }
        if (keep == 0 || r->qf__admit_ns < s->oldest_ns)
            s->oldest_ns = r->qf__admit_ns;
        s->pending[keep++] = r;
        s->pending_cost += r->qf__cost;
        if (r->qf__due_ns < next)
            next = r->qf__due_ns;
    }
    s->npending = keep;
    /* Most urgent first: a demoted request is looked at again (not due
     * yet, its timeout restarted) when its new level's turn comes. */
    for (uint32_t l = 0; l < s->levels; l++) {
        struct qf__serve_level *L = &s->lvl[l];
        if (!L->timeout_ns)
            continue;
        stage_ring(s, l);
        while (L->head && L->head->qf__due_ns <= w.now)
            time_out(s, unstage_head(L), true, &w);
        if (L->head && L->head->qf__due_ns < next)
            next = L->head->qf__due_ns;
        /* Not seen yet: in the ring, entered after now. */
        int64_t unseen = due_after(w.now, L->timeout_ns);
        if (unseen < next)
            next = unseen;
    }
    if (w.nrej) {
        qf__serve_add(&s->n_timed_out, w.nrej);
        qf__serve_add(&s->n_expired, w.nrej);
    }
    qf__unlock(&s->lock);
    for (qf_serve_request *r = w.rejected; r;) {
        qf_serve_request *nx = r->qf__next; /* before the answer frees it */
        qf__serve_answer(r, (qf_code)atomic_load_explicit(&r->qf__status, memory_order_relaxed));
        r = nx;
    }
    qf__serve_left(s, w.nrej);
    return next;
}

/* No request at any level with a timeout: nothing the timer could act on
 * until a submitter enters one (seq_cst loads: see the top). */
static bool nothing_to_time(qf_serve *s)
{
    for (uint32_t l = 0; l < s->levels; l++)
        if (s->lvl[l].timeout_ns &&
            atomic_load_explicit(&s->lvl[l].depth, memory_order_seq_cst) > 0)
            return false;
    return true;
}

static void *timer_main(void *arg)
{
    qf_serve *s = arg;
    struct qf__serve_timer *t = s->timer;
    /* Timeouts that fire while the machine is busy fire on time, as the
     * executor's batches do (qf_serve_run()); best effort. */
    (void)qf__thread_prefer_latency(QF_SERVE_DEFAULT_EXEC_SLICE_NS, NULL, true);
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        pthread_mutex_unlock(&t->mu);
        int64_t next = sweep_once(s);
        atomic_fetch_add_explicit(&t->sweeps, 1, memory_order_relaxed);
        atomic_store_explicit(&t->idle, 1, memory_order_seq_cst);
        bool idle = nothing_to_time(s);
        if (!idle) {
            uint32_t one = 1; /* a submitter that took it first signals: harmless */
            atomic_compare_exchange_strong_explicit(&t->idle, &one, 0, memory_order_relaxed,
                                                    memory_order_relaxed);
        }
        pthread_mutex_lock(&t->mu);
        if (idle) {
            while (!t->stop && atomic_load_explicit(&t->idle, memory_order_relaxed) == 1)
                pthread_cond_wait(&t->cv, &t->mu);
            continue;
        }
        if (t->stop)
            break;
        struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
        if (next == INT64_MAX)
            ts = (struct timespec){.tv_sec = INT64_MAX / 1000000000, .tv_nsec = 0};
        while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &ts) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

void qf__serve_timer_entered(qf_serve *s, uint32_t level)
{
    struct qf__serve_timer *t = s->timer;
    if (!t || !s->lvl[level].timeout_ns ||
        atomic_load_explicit(&t->idle, memory_order_seq_cst) == 0)
        return;
    uint32_t one = 1;
    if (!atomic_compare_exchange_strong_explicit(&t->idle, &one, 0, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return; /* another submitter (or the timer itself) took it */
    pthread_mutex_lock(&t->mu);
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

uint64_t qf__serve_timer_sweeps(const qf_serve *s)
{
    return s->timer ? atomic_load_explicit(&s->timer->sweeps, memory_order_relaxed) : 0;
}

qf_code qf__serve_policy_start(qf_serve *s)
{
    struct qf__serve_timer *t = s->timer;
    if (!t)
        return QF_OK;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&t->mu, NULL);
    t->stop = false;
    atomic_init(&t->idle, 0);
    atomic_init(&t->sweeps, 0);
    if (pthread_create(&t->thread, NULL, timer_main, s) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        s->timer = NULL;
        return qf_set_error(QF_RESOURCE_EXHAUSTED, "batcher '%s': cannot start its timer thread",
                            s->name);
    }
    t->started = true;
    return QF_OK;
}

void qf__serve_policy_stop(qf_serve *s)
{
    struct qf__serve_timer *t = s->timer;
    if (!t || !t->started)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    t->started = false;
}

void qf__serve_policy_destroy(qf_serve *s)
{
    qf__serve_policy_stop(s);
    free(s->timer);
    s->timer = NULL;
    free(s->lvl);
    s->lvl = NULL;
}

qf_code qf_serve_get_policy_stats(const qf_serve *s, qf_serve_policy_stats *ret_stats)
{
    if (!s || !ret_stats)
        return qf_set_error(QF_INVALID_ARGUMENT, "qf_serve_get_policy_stats: NULL %s",
                            s ? "ret_stats" : "batcher");
    qf_serve *m = (qf_serve *)s; /* relaxed loads of atomics only */
    qf_serve_policy_stats st;
    memset(&st, 0, sizeof(st));
    st.level_rejected = atomic_load_explicit(&m->n_level_rejected, memory_order_relaxed);
    st.timed_out = atomic_load_explicit(&m->n_timed_out, memory_order_relaxed);
    st.demoted = atomic_load_explicit(&m->n_demoted, memory_order_relaxed);
    st.cost_refused = atomic_load_explicit(&m->n_cost_refused, memory_order_relaxed);
    st.cost_closed = atomic_load_explicit(&m->n_cost_closed, memory_order_relaxed);
    if (m->lvl)
        for (uint32_t l = 0; l < m->levels; l++)
            st.level_depth[l] = atomic_load_explicit(&m->lvl[l].depth, memory_order_relaxed);
    qf__serve_adapt_stats(s, &st);
    *ret_stats = st;
    return QF_OK;
}
