/* test_serve_policy_stress.c - the per-priority policy and cost batching
 * under load (issue 30): oversubscribed (8 submitters, 2 thread executors,
 * the batcher's timer, a drainer and a watchdog on the 2 cores CI has),
 * with random level limits, timeouts that reject or demote, cost budgets,
 * admission policies, deadlines and drain moments.
 *
 * Each round, per request: answered exactly once, with a status its path
 * allows (QF_OK only if an executor ran it, exactly once; a level timeout's
 * code only with a timeout configured on a level it can reach; DEADLINE_
 * EXCEEDED; UNAVAILABLE; RESOURCE_EXHAUSTED only with a level limit;
 * CANCELLED only after the drain began); never an over-budget request
 * admitted. Per batch: 1 <= size <= max_batch_size, summed cost <= budget.
 * Per round: admitted = batched + expired + dropped + cancelled, every level
 * depth back to 0. A watchdog turns a round that does not end in 90 s into
 * a failure; QF_STRESS_SCALE divides the rounds. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qf_test_stress.h"
#include "qflow.h"

#define NP 8
#define NEXEC 2
#define LEVELS 3
#define ROUND_LIMIT_S 90

/* What the rounds exercised, printed at the end (a run where no timeout
 * fired would prove little). */
static atomic_ullong tot_ok, tot_timed_out, tot_demoted, tot_level_rejected, tot_cost_closed,
    tot_cancelled;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

typedef struct round round;

typedef struct sreq {
    qf_serve_request req; /* first */
    round *r;
    uint64_t cost;
    atomic_int answers;
    atomic_int status;
    atomic_int ran;
    atomic_llong answered_at;
} sreq;

struct round {
    qf_serve *s;
    qf_serve_options o;
    qf_serve_level_policy lp[LEVELS];
    size_t max_batch;
    uint64_t budget;
    long per;
    sreq *reqs;
    atomic_long bad_submits;
    atomic_long drain_at;
    atomic_llong drain_ns;
    atomic_int errors;
    atomic_int producers_done;
    uint64_t seed;
    char what[200];
};

static void fail(round *r, const char *fmt, ...)
{
    if (atomic_fetch_add(&r->errors, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->what, sizeof(r->what), fmt, ap);
        va_end(ap);
    }
}

static void on_done(qf_serve_request *q, qf_code st, void *arg)
{
    (void)arg;
    sreq *x = (sreq *)q;
    atomic_store(&x->status, (int)st);
    atomic_store(&x->answered_at, qf_now_ns());
    if (atomic_fetch_add(&x->answers, 1) != 0)
        fail(x->r, "request %td answered twice", x - x->r->reqs);
}

static uint64_t cost_of(void *arg, const qf_serve_request *q)
{
    (void)arg;
    return ((const sreq *)q)->cost;
}

static qf_code model(void *arg, qf_serve_request *const *reqs, size_t n)
{
    round *r = arg;
    uint64_t sum = 0;
    if (n == 0 || n > r->max_batch)
        fail(r, "batch of %zu (max %zu)", n, r->max_batch);
    for (size_t i = 0; i < n; i++) {
        sreq *x = (sreq *)reqs[i];
        sum += x->cost;
        if (atomic_fetch_add(&x->ran, 1) != 0)
            fail(r, "request %td ran twice", x - r->reqs);
    }
    if (r->budget && sum > r->budget)
        fail(r, "batch cost %llu over the budget %llu", (unsigned long long)sum,
             (unsigned long long)r->budget);
    if ((n & 7) == 0)
        sched_yield();
    return QF_OK;
}

typedef struct prod {
    round *r;
    int id;
} prod;

static void *produce(void *a)
{
    prod *p = a;
    round *r = p->r;
    uint64_t seed = r->seed ^ ((uint64_t)p->id * 0x9e3779b97f4a7c15ull) ^ 1;
    for (long i = 0; i < r->per; i++) {
        sreq *x = &r->reqs[p->id * r->per + i];
        uint64_t v = rnd(&seed);
        qf_deadline dl =
            (v & 3) == 0 ? qf_deadline_in_ns((int64_t)(v >> 40) % 3000000) : QF_FOREVER;
        qf_serve_request_init(&x->req, x, dl, (uint32_t)((v >> 8) % LEVELS), on_done, NULL);
        x->r = r;
        x->cost = r->budget ? 1 + (v >> 16) % (r->budget + r->budget / 4) : 1;
        qf_code rc = qf_serve_submit(r->s, &x->req);
        if (rc == QF_INVALID_ARGUMENT) {
            if (!r->budget || x->cost <= r->budget)
                fail(r, "submit refused a request for bad input: %s", qf_last_message());
            atomic_fetch_add(&r->bad_submits, 1);
            atomic_store(&x->status, -2); /* never the batcher's */
        } else if (r->budget && x->cost > r->budget) {
            fail(r, "an over-budget request (cost %llu) was taken", (unsigned long long)x->cost);
        }
        if (i == r->per / 2 && p->id == 0 && (v & 1))
            sched_yield();
    }
    atomic_fetch_add(&r->producers_done, 1);
    return NULL;
}

static void *exec_main(void *a)
{
    round *r = a;
    qf_code rc = qf_serve_run(r->s, model, r);
    if (rc != QF_OK)
        fail(r, "qf_serve_run: %d %s", rc, qf_last_message());
    return NULL;
}

static void report(void *arg)
{
    round *r = arg;
    fprintf(stderr, "serve_policy_stress: round with seed %llu hung (depth %lld)\n",
            (unsigned long long)r->seed, (long long)qf_serve_depth(r->s));
}

static void one_round(uint64_t seed)
{
    round *r = calloc(1, sizeof(*r));
    cr_assert_not_null(r);
    r->seed = seed;
    uint64_t v = rnd(&seed);
    r->max_batch = 1 + v % 16;
    r->budget = (v >> 8) & 1 ? 4 + (v >> 12) % 28 : 0;
    r->per = 400 + (long)((v >> 20) % 400);
    for (int l = 0; l < LEVELS; l++) {
        uint64_t w = rnd(&seed);
        r->lp[l].max_queued = (w & 3) == 0 ? 1 + (int64_t)((w >> 4) % 64) : 0;
        r->lp[l].timeout_ns = (w & 12) ? (int64_t)(50000 + (w >> 12) % 2000000) : 0;
        r->lp[l].on_timeout = (w >> 40) & 1 ? QF_SERVE_TIMEOUT_DEMOTE : QF_SERVE_TIMEOUT_REJECT;
        r->lp[l].timeout_code = (w >> 41) & 1 ? QF_UNAVAILABLE : (qf_code)0;
    }
    r->o = (qf_serve_options){.name = "pstress",
                              .max_batch_size = r->max_batch,
                              .max_queue_delay_ns = (int64_t)((v >> 30) % 400000),
                              .priority_levels = LEVELS,
                              .max_bypass = (uint32_t)((v >> 40) % 3),
                              .max_queued = (v >> 44) & 1 ? (int64_t)(16 + (v >> 45) % 256) : 0,
                              .admission = (qf_serve_admission)((v >> 54) % 3),
                              .level_policy = r->lp,
                              .cost_fn = r->budget ? cost_of : NULL,
                              .max_batch_cost = r->budget};
    cr_assert_eq(qf_serve_new(&r->o, &r->s), QF_OK, "%s", qf_last_message());
    r->reqs = calloc((size_t)(NP * r->per), sizeof(sreq));
    cr_assert_not_null(r->reqs);
    for (long i = 0; i < NP * r->per; i++) {
        atomic_init(&r->reqs[i].status, -1);
        r->reqs[i].r = r;
    }
    qft_watchdog wd;
    qft_watchdog_start(&wd, ROUND_LIMIT_S, report, r);
    pthread_t ex[NEXEC], pt[NP];
    prod ps[NP];
    for (int i = 0; i < NEXEC; i++)
        cr_assert_eq(pthread_create(&ex[i], NULL, exec_main, r), 0);
    for (int i = 0; i < NP; i++) {
        ps[i] = (prod){r, i};
        cr_assert_eq(pthread_create(&pt[i], NULL, produce, &ps[i]), 0);
    }
    /* A random drain moment: some rounds drain while producers run. */
    if ((v >> 60) & 1) {
        struct timespec ts = {0, (long)((v >> 50) % 3000000)};
        nanosleep(&ts, NULL);
    } else {
        for (int i = 0; i < NP; i++)
            pthread_join(pt[i], NULL);
    }
    atomic_store(&r->drain_ns, qf_now_ns());
    qf_serve_begin_drain(r->s, qf_deadline_in_ns((int64_t)((v >> 56) % 2) * 5000000));
    if ((v >> 60) & 1)
        for (int i = 0; i < NP; i++)
            pthread_join(pt[i], NULL);
    qf_serve_report rep;
    qf_code drc = qf_serve_drain(r->s, qf_deadline_in_s(30), &rep);
    for (int i = 0; i < NEXEC; i++)
        pthread_join(ex[i], NULL);
    qft_watchdog_stop(&wd);
    cr_expect_eq(drc, QF_OK, "drain: %s", qf_last_message());

    uint64_t ok = 0, to_code = 0, exp = 0, unav = 0, exh = 0, canc = 0;
    bool any_limit = false, any_timeout = false;
    for (int l = 0; l < LEVELS; l++) {
        any_limit |= r->lp[l].max_queued > 0;
        any_timeout |= r->lp[l].timeout_ns > 0;
    }
    for (long i = 0; i < NP * r->per; i++) {
        sreq *x = &r->reqs[i];
        int st = atomic_load(&x->status);
        if (st == -2)
            continue;
        if (atomic_load(&x->answers) != 1) {
            fail(r, "request %ld answered %d times", i, atomic_load(&x->answers));
            continue;
        }
        int ran = atomic_load(&x->ran);
        if (st == QF_OK) {
            ok++;
            if (ran != 1)
                fail(r, "request %ld answered OK, ran %d times", i, ran);
        } else if (ran) {
            fail(r, "request %ld ran but was answered %d", i, st);
        } else if (st == QF_DEADLINE_EXCEEDED) {
            exp++;
        } else if (st == QF_UNAVAILABLE) {
            unav++;
        } else if (st == QF_RESOURCE_EXHAUSTED) {
            exh++;
            if (!any_limit)
                fail(r, "RESOURCE_EXHAUSTED without a level limit");
        } else if (st == QF_CANCELLED) {
            canc++;
            if (atomic_load(&x->answered_at) < atomic_load(&r->drain_ns))
                fail(r, "request %ld cancelled before the drain", i);
        } else {
            fail(r, "request %ld answered %d", i, st);
        }
    }
    (void)to_code;
    qf_serve_policy_stats ps2;
    cr_assert_eq(qf_serve_get_policy_stats(r->s, &ps2), QF_OK);
    atomic_fetch_add(&tot_ok, ok);
    atomic_fetch_add(&tot_timed_out, ps2.timed_out);
    atomic_fetch_add(&tot_demoted, ps2.demoted);
    atomic_fetch_add(&tot_level_rejected, ps2.level_rejected);
    atomic_fetch_add(&tot_cost_closed, ps2.cost_closed);
    atomic_fetch_add(&tot_cancelled, canc);
    if (!any_timeout && ps2.timed_out + ps2.demoted)
        fail(r, "timeouts acted with none configured");
    for (int l = 0; l < LEVELS; l++)
        if (ps2.level_depth[l] != 0)
            fail(r, "level %d depth %lld after the drain", l, (long long)ps2.level_depth[l]);
    if (rep.admitted != rep.batched + rep.expired + rep.dropped + rep.cancelled + rep.queued)
        fail(r, "report does not add up");
    if (rep.batched != ok)
        fail(r, "batched %llu, answered OK %llu", (unsigned long long)rep.batched,
             (unsigned long long)ok);
    if (rep.cancelled != canc)
        fail(r, "cancelled %llu, seen %llu", (unsigned long long)rep.cancelled,
             (unsigned long long)canc);
    uint64_t answered = ok + exp + unav + exh + canc;
    uint64_t taken = (uint64_t)(NP * r->per) - (uint64_t)atomic_load(&r->bad_submits);
    if (answered != taken)
        fail(r, "%llu answered of %llu submitted", (unsigned long long)answered,
             (unsigned long long)taken);
    if (rep.admitted + rep.rejected != taken)
        fail(r, "admitted %llu + rejected %llu != %llu", (unsigned long long)rep.admitted,
             (unsigned long long)rep.rejected, (unsigned long long)taken);
    int errs = atomic_load(&r->errors);
    char what[200];
    memcpy(what, r->what, sizeof(what));
    uint64_t s0 = r->seed;
    qf_serve_free(r->s);
    free(r->reqs);
    free(r);
    cr_assert_eq(errs, 0, "seed %llu: %s", (unsigned long long)s0, what);
}

Test(serve_policy_stress, random_policies_with_random_drains, .timeout = 600)
{
    long rounds = qft_stress_scale(24, 3);
    uint64_t seed = (uint64_t)qf_now_ns() | 1;
    const char *e = getenv("QF_SEED");
    if (e)
        seed = strtoull(e, NULL, 0);
    fprintf(stderr, "serve_policy_stress: seed %llu, %ld rounds\n", (unsigned long long)seed,
            rounds);
    for (long i = 0; i < rounds; i++)
        one_round(rnd(&seed) | 1);
    fprintf(stderr,
            "serve_policy_stress: ok %llu, timed out %llu, demoted %llu, level-rejected %llu, "
            "batches closed by cost %llu, cancelled %llu\n",
            (unsigned long long)tot_ok, (unsigned long long)tot_timed_out,
            (unsigned long long)tot_demoted, (unsigned long long)tot_level_rejected,
            (unsigned long long)tot_cost_closed, (unsigned long long)tot_cancelled);
}

/* ------------------------------------------------- the timer's idle sleep */

/* One level with a 1 ms timeout and no executor: requests leave only by
 * timing out, so each one is answered only if the timer woke for it. Each
 * submitter sends one request and waits for its answer before the next,
 * so the batcher empties over and over and the timer goes to sleep for want
 * of requests between them (qf_serve_policy.c, "An idle batcher"); a
 * submit that failed to wake it would leave its request unanswered, which
 * the per-request deadline (10 s, against the 1 ms timeout) and the
 * watchdog turn into a failure. */
#define IDLE_NP 8

typedef struct idle_req {
    qf_serve_request req; /* first */
    atomic_int answers;
    atomic_int status;
} idle_req;

typedef struct idle_arg {
    qf_serve *s;
    long rounds;
    uint64_t seed;
    atomic_long *unanswered;
} idle_arg;

static void idle_answer(qf_serve_request *r, qf_code st, void *arg)
{
    (void)arg;
    idle_req *q = (idle_req *)r;
    atomic_store(&q->status, (int)st);
    atomic_fetch_add(&q->answers, 1);
}

static void idle_report(void *arg)
{
    fprintf(stderr, "idle timer stress: %ld requests unanswered\n",
            atomic_load((atomic_long *)arg));
}

static void *idle_submitter(void *a)
{
    idle_arg *ia = a;
    idle_req q;
    for (long i = 0; i < ia->rounds; i++) {
        qf_serve_request_init(&q.req, &q, QF_FOREVER, 0, idle_answer, NULL);
        atomic_init(&q.answers, 0);
        atomic_init(&q.status, -1);
        atomic_fetch_add(ia->unanswered, 1);
        cr_assert_eq(qf_serve_submit(ia->s, &q.req), QF_OK, "%s", qf_last_message());
        int64_t until = qf_now_ns() + 10 * 1000000000LL;
        while (atomic_load(&q.answers) == 0) {
            cr_assert_lt(qf_now_ns(), until, "a request was never timed out (the timer slept)");
            sched_yield();
        }
        atomic_fetch_sub(ia->unanswered, 1);
        cr_assert_eq(atomic_load(&q.answers), 1);
        cr_assert_eq(atomic_load(&q.status), QF_UNAVAILABLE);
        /* Sometimes let every other request time out first, so the next
         * submit often meets a timer that has gone to sleep. */
        for (uint64_t k = rnd(&ia->seed) % 4; k > 0; k--)
            sched_yield();
    }
    return NULL;
}

Test(serve_policy_stress, idle_timer_wakes_for_every_request, .timeout = 600)
{
    qf_serve_level_policy lp[1] = {{.timeout_ns = 1000000,
                                    .on_timeout = QF_SERVE_TIMEOUT_REJECT,
                                    .timeout_code = QF_UNAVAILABLE}};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "idle",
                                                  .max_batch_size = 64,
                                                  .max_queue_delay_ns = 10000000000LL,
                                                  .level_policy = lp},
                              &s),
                 QF_OK, "%s", qf_last_message());
    long rounds = qft_stress_scale(400, 10);
    atomic_long unanswered = 0;
    qft_watchdog wd;
    qft_watchdog_start(&wd, 120, idle_report, &unanswered);
    idle_arg args[IDLE_NP];
    pthread_t th[IDLE_NP];
    uint64_t seed = (uint64_t)qf_now_ns() | 1;
    for (int i = 0; i < IDLE_NP; i++) {
        args[i] = (idle_arg){s, rounds, rnd(&seed) | 1, &unanswered};
        cr_assert_eq(pthread_create(&th[i], NULL, idle_submitter, &args[i]), 0);
    }
    for (int i = 0; i < IDLE_NP; i++)
        pthread_join(th[i], NULL);
    qft_watchdog_stop(&wd);
    qf_serve_policy_stats st;
    cr_assert_eq(qf_serve_get_policy_stats(s, &st), QF_OK);
    cr_expect_eq(st.timed_out, (uint64_t)(rounds * IDLE_NP));
    cr_expect_eq(st.level_depth[0], 0);
    qf_serve_free(s);
}
