/* test_serve_policy.c - the batcher's per-priority policy, batching by cost
 * and adaptive mode (issue 30): options refused, a level's queue limit, a
 * level timeout that rejects or demotes while the model is busy (the model
 * is held on a gate until the timeout has acted, so only the timer can have
 * acted), cost budgets closing batches, over-budget requests refused at
 * submit, and the adaptive controller's choices staying in their bounds.
 *
 * Ordering is on observable state (a model that announces it is running,
 * counters polled with a deadline that turns a hang into a failure), never
 * on sleeps. Time is checked only as a lower bound. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "qf_test_park.h"
#include "qflow.h"

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(serve_policy, .timeout = 120);
#endif

#define MS 1000000LL
#define SEC 1000000000LL

typedef struct treq {
    qf_serve_request req; /* first */
    atomic_int answers;
    atomic_int status;
    atomic_llong answered_at;
    uint64_t cost;
} treq;

static void on_done(qf_serve_request *r, qf_code st, void *arg)
{
    (void)arg;
    treq *t = (treq *)r;
    atomic_store(&t->status, (int)st);
    atomic_store(&t->answered_at, qf_now_ns());
    atomic_fetch_add(&t->answers, 1);
}

static void treq_init(treq *t, uint32_t prio)
{
    qf_serve_request_init(&t->req, t, QF_FOREVER, prio, on_done, NULL);
    atomic_init(&t->answers, 0);
    atomic_init(&t->status, -1);
    atomic_init(&t->answered_at, 0);
    t->cost = 1;
}

/* Spin-wait (with yields) until *flag reaches want, failing after 10 s. */
static void await_int(atomic_int *flag, int want, const char *what)
{
    int64_t until = qf_now_ns() + 10 * SEC;
    while (atomic_load(flag) < want) {
        cr_assert_lt(qf_now_ns(), until, "timed out waiting for %s", what);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static uint64_t policy_stat(qf_serve *s, size_t off)
{
    qf_serve_policy_stats st;
    cr_assert_eq(qf_serve_get_policy_stats(s, &st), QF_OK);
    uint64_t v;
    memcpy(&v, (char *)&st + off, sizeof(v));
    return v;
}

static void await_stat(qf_serve *s, size_t off, uint64_t want, const char *what)
{
    int64_t until = qf_now_ns() + 10 * SEC;
    while (policy_stat(s, off) < want) {
        cr_assert_lt(qf_now_ns(), until, "timed out waiting for %s", what);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------- a gated model */

typedef struct gate {
    qf_serve *s;
    atomic_int entered; /* batches the model has started */
    atomic_int open;    /* batches it may finish */
    atomic_int ran;     /* requests it ran */
    atomic_int tid;     /* the executor thread's id, once it runs */
    pthread_t th;
} gate;

static qf_code gated_model(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)reqs;
    gate *g = arg;
    int me = atomic_fetch_add(&g->entered, 1);
    while (atomic_load(&g->open) <= me) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_add(&g->ran, (int)n);
    return QF_OK;
}

static void *gate_run(void *a)
{
    gate *g = a;
    atomic_store(&g->tid, qft_tid());
    qf_serve_run(g->s, gated_model, g);
    return NULL;
}

static void gate_start(gate *g, qf_serve *s)
{
    g->s = s;
    atomic_init(&g->entered, 0);
    atomic_init(&g->open, 0);
    atomic_init(&g->ran, 0);
    atomic_init(&g->tid, 0);
    cr_assert_eq(pthread_create(&g->th, NULL, gate_run, g), 0);
    /* Wait until the executor waits for a batch: a request submitted
     * before its thread first ran could reach a level's timeout (20 ms in
     * some tests) first on a loaded machine, and never reach the model. */
    await_int(&g->tid, 1, "the executor thread to start");
    qft_wait_parked(atomic_load(&g->tid), NULL, 0, NULL, 10 * SEC);
}

static void gate_finish(gate *g)
{
    atomic_store(&g->open, 1 << 30);
    qf_serve_report rep;
    cr_assert_eq(qf_serve_drain(g->s, qf_deadline_in_s(10), &rep), QF_OK);
    pthread_join(g->th, NULL);
}

/* ---------------------------------------------------------------- options */

static uint64_t cost_of(void *arg, const qf_serve_request *r)
{
    (void)arg;
    return ((const treq *)r)->cost;
}

Test(serve_policy, bad_options_are_refused_naming_the_field)
{
    qf_serve *s = NULL;
    qf_serve_level_policy lp[2] = {{.max_queued = -1}, {0}};
    qf_serve_options o = {
        .name = "p", .max_batch_size = 4, .priority_levels = 2, .level_policy = lp};
    cr_expect_eq(qf_serve_new(&o, &s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "level_policy[0].max_queued"), "%s", qf_last_message());
    lp[0] = (qf_serve_level_policy){.timeout_ns = -5};
    cr_expect_eq(qf_serve_new(&o, &s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "timeout_ns"), "%s", qf_last_message());
    lp[0] = (qf_serve_level_policy){0};
    lp[1] = (qf_serve_level_policy){.on_timeout = (qf_serve_timeout_action)7};
    cr_expect_eq(qf_serve_new(&o, &s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "level_policy[1].on_timeout"), "%s", qf_last_message());
    lp[1] = (qf_serve_level_policy){.timeout_code = (qf_code)999};
    cr_expect_eq(qf_serve_new(&o, &s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "timeout_code"), "%s", qf_last_message());
    lp[1] = (qf_serve_level_policy){0};
    o.cost_fn = cost_of;
    cr_expect_eq(qf_serve_new(&o, &s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "max_batch_cost"), "%s", qf_last_message());
    o.cost_fn = NULL;
    o.max_batch_cost = 3;
    cr_expect_eq(qf_serve_new(&o, &s), QF_INVALID_ARGUMENT);
    o.max_batch_cost = 0;
    o.p99_target_ns = -1;
    cr_expect_eq(qf_serve_new(&o, &s), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "p99_target_ns"), "%s", qf_last_message());
    cr_expect_null(s);
    o.p99_target_ns = 0;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    qf_serve_free(s);
}

/* ------------------------------------------------------------ level limit */

Test(serve_policy, level_limit_refuses_with_resource_exhausted)
{
    qf_serve_level_policy lp[2] = {{.max_queued = 2}, {0}};
    qf_serve_options o = {.name = "lim",
                          .max_batch_size = 8,
                          .max_queue_delay_ns = SEC,
                          .priority_levels = 2,
                          .level_policy = lp};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    treq r[5];
    for (int i = 0; i < 3; i++)
        treq_init(&r[i], 0);
    treq_init(&r[3], 1);
    treq_init(&r[4], 1);
    cr_expect_eq(qf_serve_submit(s, &r[0].req), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &r[1].req), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &r[2].req), QF_RESOURCE_EXHAUSTED);
    cr_expect(strstr(qf_last_message(), "level 0 is at its queue limit of 2"), "%s",
              qf_last_message());
    cr_expect_eq(atomic_load(&r[2].answers), 1);
    cr_expect_eq(atomic_load(&r[2].status), QF_RESOURCE_EXHAUSTED);
    /* Level 1 has no limit of its own. */
    cr_expect_eq(qf_serve_submit(s, &r[3].req), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &r[4].req), QF_OK);
    qf_serve_policy_stats st;
    cr_assert_eq(qf_serve_get_policy_stats(s, &st), QF_OK);
    cr_expect_eq(st.level_rejected, 1);
    cr_expect_eq(st.level_depth[0], 2);
    cr_expect_eq(st.level_depth[1], 2);
    /* A batch frees the level's places. */
    qf_serve_request *out[8];
    size_t n = 0;
    qf_serve_begin_drain(s, QF_FOREVER);
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 4);
    cr_assert_eq(qf_serve_get_policy_stats(s, &st), QF_OK);
    cr_expect_eq(st.level_depth[0], 0);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(s, qf_deadline_in_s(5), &rep), QF_OK);
    cr_expect_eq(rep.rejected, 1);
    cr_expect_eq(rep.admitted, 4);
    qf_serve_free(s);
}

Test(serve_policy, drop_oldest_reaches_requests_already_staged)
{
    /* With a cost budget a level has a staged list: a batch formation
     * moves the whole ring onto it and stops at the request that does not
     * fit. DROP_OLDEST must find the oldest there, not refuse the newcomer
     * because the ring is empty. */
    qf_serve_options o = {.name = "drop",
                          .max_batch_size = 8,
                          .max_queue_delay_ns = 10 * SEC,
                          .max_queued = 3,
                          .admission = QF_SERVE_DROP_OLDEST,
                          .cost_fn = cost_of,
                          .max_batch_cost = 10};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    treq r[5];
    for (int i = 0; i < 5; i++) {
        treq_init(&r[i], 0);
        r[i].cost = 10;
    }
    for (int i = 0; i < 3; i++)
        cr_assert_eq(qf_serve_submit(s, &r[i].req), QF_OK);
    qf_serve_request *out[8];
    size_t n = 0;
    /* r0 fills the budget and goes; r1 and r2 are left on the staged list. */
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK, "%s", qf_last_message());
    cr_expect_eq(n, 1);
    cr_expect_eq(out[0], &r[0].req);
    /* The bound counts r0 until it completes: two more fit, then r4 must
     * drop r1, the oldest still queued. */
    cr_assert_eq(qf_serve_submit(s, &r[3].req), QF_OK);
    cr_assert_eq(qf_serve_submit(s, &r[4].req), QF_OK, "%s", qf_last_message());
    cr_expect_eq(atomic_load(&r[1].answers), 1, "the oldest staged request was not dropped");
    cr_expect_eq(atomic_load(&r[1].status), QF_UNAVAILABLE);
    cr_expect_eq(atomic_load(&r[2].answers), 0);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    /* The rest go in order, one per batch (cost 10 each). */
    qf_serve_begin_drain(s, QF_FOREVER);
    const treq *want[3] = {&r[2], &r[3], &r[4]};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK, "%s", qf_last_message());
        cr_expect_eq(n, 1);
        cr_expect_eq(out[0], &want[i]->req, "batch %d", i);
        cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    }
    qf_serve_stats st;
    cr_assert_eq(qf_serve_get_stats(s, &st), QF_OK);
    cr_expect_eq(st.counts.dropped, 1);
    cr_expect_eq(st.depth, 0);
    qf_serve_free(s);
}

/* -------------------------------------------------------------- timeouts */

Test(serve_policy, timeout_rejects_while_the_model_is_busy)
{
    qf_serve_level_policy lp[1] = {{.timeout_ns = 20 * MS,
                                    .on_timeout = QF_SERVE_TIMEOUT_REJECT,
                                    .timeout_code = QF_UNAVAILABLE}};
    qf_serve_options o = {.name = "to", .max_batch_size = 1, .level_policy = lp};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    gate g;
    gate_start(&g, s);
    treq first, r[3];
    treq_init(&first, 0);
    cr_assert_eq(qf_serve_submit(s, &first.req), QF_OK);
    await_int(&g.entered, 1, "the model to take the first request");
    int64_t t0 = qf_now_ns();
    for (int i = 0; i < 3; i++) {
        treq_init(&r[i], 0);
        cr_assert_eq(qf_serve_submit(s, &r[i].req), QF_OK);
    }
    for (int i = 0; i < 3; i++)
        await_int(&r[i].answers, 1, "a timeout to answer a queued request");
    /* The model is still on the first batch: only the timer answered. */
    cr_expect_eq(atomic_load(&g.entered), 1);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(atomic_load(&r[i].status), QF_UNAVAILABLE);
        cr_expect_geq(atomic_load(&r[i].answered_at) - t0, 20 * MS - 1 * MS);
    }
    cr_expect_eq(policy_stat(s, offsetof(qf_serve_policy_stats, timed_out)), 3);
    gate_finish(&g);
    cr_expect_eq(atomic_load(&first.status), QF_OK);
    qf_serve_stats ss;
    cr_assert_eq(qf_serve_get_stats(s, &ss), QF_OK);
    cr_expect_eq(ss.counts.expired, 3);
    cr_expect_eq(ss.counts.admitted, 4);
    qf_serve_free(s);
}

Test(serve_policy, timeout_demotes_then_rejects_from_the_last_level)
{
    qf_serve_level_policy lp[2] = {{.timeout_ns = 10 * MS, .on_timeout = QF_SERVE_TIMEOUT_DEMOTE},
                                   {.timeout_ns = 30 * MS, .on_timeout = QF_SERVE_TIMEOUT_DEMOTE}};
    qf_serve_options o = {
        .name = "dem", .max_batch_size = 1, .priority_levels = 2, .level_policy = lp};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    gate g;
    gate_start(&g, s);
    treq first, r;
    treq_init(&first, 0);
    cr_assert_eq(qf_serve_submit(s, &first.req), QF_OK);
    await_int(&g.entered, 1, "the model to take the first request");
    treq_init(&r, 0);
    cr_assert_eq(qf_serve_submit(s, &r.req), QF_OK);
    await_stat(s, offsetof(qf_serve_policy_stats, demoted), 1, "the demotion");
    qf_serve_policy_stats st;
    cr_assert_eq(qf_serve_get_policy_stats(s, &st), QF_OK);
    /* Either still at level 1, or already timed out of it. */
    cr_expect_eq(st.level_depth[0], 0);
    cr_expect_eq(st.level_depth[1] + (int64_t)st.timed_out, 1);
    /* Level 1 is the last: its timeout rejects (QF_DEADLINE_EXCEEDED by
     * default), still while the model is busy. */
    await_int(&r.answers, 1, "the last level's timeout");
    cr_expect_eq(atomic_load(&r.status), QF_DEADLINE_EXCEEDED);
    cr_expect_eq(atomic_load(&g.entered), 1);
    gate_finish(&g);
    qf_serve_free(s);
}

Test(serve_policy, demoted_request_still_reaches_the_model)
{
    qf_serve_level_policy lp[2] = {{.timeout_ns = 5 * MS, .on_timeout = QF_SERVE_TIMEOUT_DEMOTE},
                                   {0}};
    qf_serve_options o = {
        .name = "dem2", .max_batch_size = 4, .priority_levels = 2, .level_policy = lp};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    gate g;
    gate_start(&g, s);
    treq first, r;
    treq_init(&first, 0);
    cr_assert_eq(qf_serve_submit(s, &first.req), QF_OK);
    await_int(&g.entered, 1, "the model to take the first request");
    treq_init(&r, 0);
    cr_assert_eq(qf_serve_submit(s, &r.req), QF_OK);
    await_stat(s, offsetof(qf_serve_policy_stats, demoted), 1, "the demotion");
    atomic_store(&g.open, 2);
    await_int(&r.answers, 1, "the demoted request's answer");
    cr_expect_eq(atomic_load(&r.status), QF_OK);
    cr_expect_eq(atomic_load(&g.ran), 2);
    gate_finish(&g);
    qf_serve_free(s);
}

/* ------------------------------------------------------------------ cost */

Test(serve_policy, cost_budget_closes_batches_and_refuses_the_oversized)
{
    qf_serve_options o = {.name = "cost",
                          .max_batch_size = 8,
                          .max_queue_delay_ns = 10 * SEC,
                          .cost_fn = cost_of,
                          .max_batch_cost = 10};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    treq big;
    treq_init(&big, 0);
    big.cost = 11;
    cr_expect_eq(qf_serve_submit(s, &big.req), QF_INVALID_ARGUMENT);
    cr_expect(strstr(qf_last_message(), "cost 11 exceeds the batch cost budget 10"), "%s",
              qf_last_message());
    cr_expect_eq(atomic_load(&big.answers), 0, "refused for bad input: not answered");
    treq r[5];
    uint64_t costs[5] = {4, 4, 4, 1, 10};
    for (int i = 0; i < 5; i++) {
        treq_init(&r[i], 0);
        r[i].cost = costs[i];
        cr_assert_eq(qf_serve_submit(s, &r[i].req), QF_OK);
    }
    qf_serve_request *out[8];
    size_t n = 0;
    /* 4 + 4, and the next 4 does not fit: the batch is full by cost now,
     * long before its delay. */
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK, "%s", qf_last_message());
    cr_expect_eq(n, 2);
    cr_expect_eq(out[0], &r[0].req);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 2); /* 4 + 1; 10 waits */
    cr_expect_eq(out[1], &r[3].req);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    /* 10 alone is open: it waits for its delay. */
    cr_expect_eq(qf_serve_try_next_batch(s, out, &n), QF_UNAVAILABLE);
    qf_serve_policy_stats st;
    cr_assert_eq(qf_serve_get_policy_stats(s, &st), QF_OK);
    cr_expect_eq(st.cost_refused, 1);
    cr_expect_eq(st.cost_closed, 2);
    qf_serve_begin_drain(s, QF_FOREVER);
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 1);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    /* The refused request was never the batcher's: it can go elsewhere. */
    qf_serve_free(s);
    for (int i = 0; i < 5; i++)
        cr_expect_eq(atomic_load(&r[i].status), QF_OK);
}

/* The library's count of the timer's sweeps (qf_serve_policy.c). */
uint64_t qf__serve_timer_sweeps(const qf_serve *s);

static void await_sweeps(qf_serve *s, uint64_t want)
{
    int64_t until = qf_now_ns() + 10 * SEC;
    while (qf__serve_timer_sweeps(s) < want) {
        cr_assert_lt(qf_now_ns(), until, "timed out waiting for the timer's first sweep");
        sched_yield();
    }
}

/* How often the timer sweeps during a window of `ms` milliseconds: the one
 * place these tests wait for a while, since what is checked is that
 * nothing happens in it. */
static uint64_t sweeps_during(qf_serve *s, long ms)
{
    uint64_t before = qf__serve_timer_sweeps(s);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return qf__serve_timer_sweeps(s) - before;
}

Test(serve_policy, idle_timer_sleeps_until_a_request_enters)
{
    qf_serve_level_policy lp[2] = {{.timeout_ns = 2 * MS}, {0}};
    qf_serve_options o = {.name = "idle",
                          .max_batch_size = 4,
                          .max_queue_delay_ns = 10 * SEC,
                          .priority_levels = 2,
                          .level_policy = lp};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    await_sweeps(s, 1);
    /* 20 timeout periods with nothing queued: before, a sweep each. */
    cr_expect_leq(sweeps_during(s, 40), 1, "the timer woke while the batcher was empty");
    /* A request at a level without a timeout is not the timer's business. */
    treq untimed;
    treq_init(&untimed, 1);
    cr_assert_eq(qf_serve_submit(s, &untimed.req), QF_OK);
    cr_expect_leq(sweeps_during(s, 20), 1);
    /* One at the timed level wakes it, and it times the request out. */
    treq r;
    treq_init(&r, 0);
    int64_t t0 = qf_now_ns();
    cr_assert_eq(qf_serve_submit(s, &r.req), QF_OK);
    await_int(&r.answers, 1, "the timer to time the request out");
    cr_expect_eq(atomic_load(&r.status), QF_DEADLINE_EXCEEDED);
    cr_expect_geq(atomic_load(&r.answered_at) - t0, 2 * MS - 1 * MS);
    cr_expect_eq(policy_stat(s, offsetof(qf_serve_policy_stats, timed_out)), 1);
    /* And then it sleeps again. */
    cr_expect_leq(sweeps_during(s, 40), 1, "the timer kept waking after the timeout");
    qf_serve_begin_drain(s, QF_FOREVER);
    qf_serve_request *out[4];
    size_t n = 0;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 1);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    qf_serve_free(s);
}

/* -------------------------------------------------------------- metrics */

/* The line `name{batcher="<b>",<rest>} <value>` is in text. */
static bool has_sample(const char *text, const char *name, const char *b, const char *rest,
                       const char *value)
{
    char line[256];
    snprintf(line, sizeof(line), "\n%s{batcher=\"%s\"%s} %s\n", name, b, rest, value);
    return strstr(text, line) != NULL;
}

Test(serve_policy, policy_counts_are_in_the_metrics_text)
{
    qf_serve_level_policy lp[2] = {{.max_queued = 1}, {0}};
    qf_serve_options o = {.name = "pm",
                          .max_batch_size = 8,
                          .max_queue_delay_ns = 10 * SEC,
                          .priority_levels = 2,
                          .level_policy = lp,
                          .cost_fn = cost_of,
                          .max_batch_cost = 10};
    qf_serve *s, *plain, *ad;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "pm-plain", .max_batch_size = 4}, &plain),
                 QF_OK);
    cr_assert_eq(qf_serve_new(&(qf_serve_options){.name = "pm-ad",
                                                  .max_batch_size = 16,
                                                  .max_queue_delay_ns = 3 * MS,
                                                  .p99_target_ns = 2 * MS},
                              &ad),
                 QF_OK);
    treq r[4];
    for (int i = 0; i < 4; i++)
        treq_init(&r[i], i < 2 ? 0 : 1);
    r[3].cost = 11;
    cr_expect_eq(qf_serve_submit(s, &r[0].req), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &r[1].req), QF_RESOURCE_EXHAUSTED); /* level 0 is full */
    cr_expect_eq(qf_serve_submit(s, &r[2].req), QF_OK);
    cr_expect_eq(qf_serve_submit(s, &r[3].req), QF_INVALID_ARGUMENT); /* over the budget */
    char *text = NULL;
    cr_assert_eq(qf_serve_metrics_text(&text, NULL), QF_OK);
    cr_expect(has_sample(text, "qflow_serve_policy_total", "pm", ",action=\"level_rejected\"", "1"),
              "%s", text);
    cr_expect(has_sample(text, "qflow_serve_policy_total", "pm", ",action=\"cost_refused\"", "1"),
              "%s", text);
    cr_expect(has_sample(text, "qflow_serve_policy_total", "pm", ",action=\"timed_out\"", "0"),
              "%s", text);
    cr_expect(has_sample(text, "qflow_serve_policy_total", "pm-plain", ",action=\"demoted\"", "0"),
              "%s", text);
    cr_expect(has_sample(text, "qflow_serve_level_depth", "pm", ",priority=\"0\"", "1"), "%s",
              text);
    cr_expect(has_sample(text, "qflow_serve_level_depth", "pm", ",priority=\"1\"", "1"), "%s",
              text);
    /* Only batchers with a level policy count depth per level, and only
     * adaptive ones have the adaptive gauges. */
    cr_expect(!strstr(text, "qflow_serve_level_depth{batcher=\"pm-plain\""), "%s", text);
    cr_expect(!strstr(text, "qflow_serve_adaptive_max_batch{batcher=\"pm\""), "%s", text);
    cr_expect(has_sample(text, "qflow_serve_adaptive_max_batch", "pm-ad", "", "16"), "%s", text);
    /* Adaptive mode starts with no delay, before its first window. */
    cr_expect(has_sample(text, "qflow_serve_adaptive_delay_seconds", "pm-ad", "", "0"), "%s", text);
    cr_expect(strstr(text, "# TYPE qflow_serve_adaptive_p99_seconds gauge\n") != NULL, "%s", text);
    free(text);
    qf_serve_free(ad);
    /* With no adaptive batcher left, its families are gone, headers too. */
    cr_assert_eq(qf_serve_metrics_text(&text, NULL), QF_OK);
    cr_expect(!strstr(text, "qflow_serve_adaptive_"), "%s", text);
    free(text);
    qf_serve_begin_drain(s, QF_FOREVER);
    qf_serve_request *out[8];
    size_t n = 0;
    cr_assert_eq(qf_serve_try_next_batch(s, out, &n), QF_OK);
    cr_expect_eq(n, 2);
    cr_expect_eq(qf_serve_complete(s, out, n, QF_OK), QF_OK);
    qf_serve_free(s);
    qf_serve_free(plain);
}

/* -------------------------------------------------------------- adaptive */

typedef struct load {
    qf_serve *s;
    treq *reqs;
    int n, id, nth;
    int64_t interval;
} load;

static qf_code sleepy_model(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)arg;
    (void)reqs;
    struct timespec ts = {0, 100000 + 2000 * (long)n};
    nanosleep(&ts, NULL);
    return QF_OK;
}

static void *submitter(void *a)
{
    load *l = a;
    int64_t t0 = qf_now_ns();
    for (int i = l->id; i < l->n; i += l->nth) {
        int64_t due = t0 + (int64_t)i * l->interval;
        while (qf_now_ns() < due) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        treq_init(&l->reqs[i], 0);
        cr_assert_eq(qf_serve_submit(l->s, &l->reqs[i].req), QF_OK);
    }
    return NULL;
}

static void *adaptive_exec(void *a)
{
    qf_serve_run(a, sleepy_model, NULL);
    return NULL;
}

Test(serve_policy, adaptive_choices_stay_in_their_bounds)
{
    qf_serve_options o = {
        .name = "ad", .max_batch_size = 32, .max_queue_delay_ns = 2 * MS, .p99_target_ns = 2 * MS};
    qf_serve *s;
    cr_assert_eq(qf_serve_new(&o, &s), QF_OK, "%s", qf_last_message());
    pthread_t ex;
    cr_assert_eq(pthread_create(&ex, NULL, adaptive_exec, s), 0);
    enum { N = 3000, NTH = 2 };
    treq *reqs = calloc(N, sizeof(treq));
    load ls[NTH];
    pthread_t th[NTH];
    for (int i = 0; i < NTH; i++) {
        ls[i] = (load){s, reqs, N, i, NTH, 200000}; /* 5k/s for 0.6 s */
        cr_assert_eq(pthread_create(&th[i], NULL, submitter, &ls[i]), 0);
    }
    for (int i = 0; i < NTH; i++)
        pthread_join(th[i], NULL);
    qf_serve_report rep;
    cr_assert_eq(qf_serve_drain(s, qf_deadline_in_s(10), &rep), QF_OK);
    pthread_join(ex, NULL);
    qf_serve_policy_stats st;
    cr_assert_eq(qf_serve_get_policy_stats(s, &st), QF_OK);
    cr_expect_geq(st.adaptive_windows, 1, "the controller judged no window");
    cr_expect_leq(st.adaptive_delay_ns, 2 * MS);
    cr_expect_geq(st.adaptive_delay_ns, 0);
    cr_expect_geq(st.adaptive_max_batch, 1);
    cr_expect_leq(st.adaptive_max_batch, 32);
    cr_expect_gt(st.adaptive_model_ns, 0, "no model time was fitted");
    for (int i = 0; i < N; i++)
        cr_expect_eq(atomic_load(&reqs[i].status), QF_OK, "request %d", i);
    cr_expect_eq(rep.batched, N);
    free(reqs);
    qf_serve_free(s);
}
