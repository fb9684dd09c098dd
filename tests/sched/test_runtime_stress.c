/* test_runtime_stress.c - QueueRunners at scale (issue 5's scale test).
 *
 * 10,000 runners on a 2-worker runtime each produce 100 elements into one
 * queue; all 1,000,000 arrive exactly once and in per-runner order; start,
 * stop and join succeed. QF_STRESS_SCALE divides the number of runners (the
 * sanitizer runs set it). Each element encodes (runner id << 32 | seq).
 *
 * All runners share one queue, so each runner's close op only counts down:
 * the last runner to retire closes the queue (a per-runner default close
 * would end the stream for everybody at the first retirement). */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qflow.h"
#include "qf_queue_runner.h"
#include "qf_test_stress.h"

typedef struct {
    qf_queue *q;
    long n_runners;
    int64_t per_runner; /* < 0: forever */
    atomic_long live;   /* runners that have not retired through end of input */
} stress;

typedef struct {
    int64_t id, next; /* touched only by the runner's one task */
    stress *s;
} prod;

static qf_code produce(void *arg, qf_element **ret)
{
    prod *p = arg;
    if (p->s->per_runner >= 0 && p->next >= p->s->per_runner)
        return QF_OUT_OF_RANGE; /* end of this runner's input */
    qf_tensor *t = qf_tensor_new_i64((p->id << 32) | p->next++);
    *ret = qf_element_of(1, &t);
    return *ret ? QF_OK : qf_last_code();
}

static qf_code countdown_close(void *arg)
{
    stress *s = arg;
    if (atomic_fetch_sub(&s->live, 1) == 1)
        return qf_queue_close(s->q, false);
    return QF_OK;
}

typedef struct {
    qf_runtime *rt;
    qf_coord *c;
    qf_scope *scope;
    prod *prods;
    qf_task **ts;
    size_t n;
    stress s;
} fixture;

static void setup(fixture *f, long n_runners, int64_t per_runner, int64_t capacity)
{
    memset(f, 0, sizeof(*f));
    f->s.n_runners = n_runners;
    f->s.per_runner = per_runner;
    atomic_init(&f->s.live, n_runners);
    qf_runtime_options ro = {.workers = 2, .name = "stress"};
    cr_assert_eq(qf_runtime_new(&ro, &f->rt), QF_OK);
    cr_assert_eq(qf_coord_new(NULL, 0, &f->c), QF_OK);
    cr_assert_eq(qf_scope_new(&f->scope), QF_OK);
    qf_dtype dt = QF_INT64;
    qf_shape sh = qf_shape_scalar();
    qf_queue_options qo = {
        .capacity = capacity, .num_components = 1, .dtypes = &dt, .shapes = &sh, .name = "stress"};
    cr_assert_eq(qf_fifo_queue_new(&qo, &f->s.q), QF_OK);
    f->prods = calloc((size_t)n_runners, sizeof(*f->prods));
    cr_assert_not_null(f->prods);
    qf_queue_runner_options o = {.close_op = countdown_close, .close_arg = &f->s};
    for (long i = 0; i < n_runners; i++) {
        f->prods[i] = (prod){.id = i, .s = &f->s};
        qf_enqueue_op op = {
            .name = "produce", .kind = QF_OP_PRODUCE, .produce = produce, .arg = &f->prods[i]};
        qf_queue_runner *r = NULL;
        cr_assert_eq(qf_queue_runner_new(f->s.q, &op, 1, &o, &r), QF_OK);
        cr_assert_eq(qf_scope_add_queue_runner(f->scope, r, NULL), QF_OK);
    }
}

static void teardown(fixture *f)
{
    qf_tasks_free(f->ts, f->n);
    qf_runtime_free(f->rt);
    qf_scope_free(f->scope); /* frees the runners */
    qf_coord_free(f->c);
    qf_queue_unref(f->s.q);
    free(f->prods);
}

/* Dequeue in batches until `stop_after` elements (or the end of the
 * stream), checking that every runner's elements arrive once and in order.
 * Returns the number received; *ret_errors counts violations. */
static long consume(fixture *f, long stop_after, long *ret_errors)
{
    int64_t *next = calloc((size_t)f->s.n_runners, sizeof(*next));
    cr_assert_not_null(next);
    long got = 0, errors = 0;
    while (got < stop_after) {
        qf_element *b = NULL;
        qf_code rc = qf_queue_dequeue_up_to_until(f->s.q, 256, qf_deadline_in_s(60), &b);
        if (rc == QF_OUT_OF_RANGE)
            break;
        cr_assert_eq(rc, QF_OK, "after %ld elements: %s", got, qf_last_message());
        const qf_tensor *t = qf_element_get(b, 0);
        const int64_t *v = qf_tensor_cdata(t);
        int64_t rows = qf_tensor_shape(t)->dims[0];
        for (int64_t i = 0; i < rows; i++) {
            int64_t id = v[i] >> 32, seq = v[i] & 0xffffffff;
            if (id < 0 || id >= f->s.n_runners || seq != next[id]) {
                if (errors++ < 5)
                    cr_log_error("runner %lld: got seq %lld, expected %lld", (long long)id,
                                 (long long)seq,
                                 (long long)(id >= 0 && id < f->s.n_runners ? next[id] : -1));
                continue;
            }
            next[id]++;
        }
        got += rows;
        qf_element_free(b);
    }
    if (f->s.per_runner >= 0)
        for (long i = 0; i < f->s.n_runners; i++)
            if (next[i] != f->s.per_runner && errors++ < 10)
                cr_log_error("runner %ld delivered %lld of %lld", i, (long long)next[i],
                             (long long)f->s.per_runner);
    free(next);
    *ret_errors = errors;
    return got;
}

static void start(fixture *f)
{
    cr_assert_eq(
        qf_start_queue_runners(f->rt, f->c, f->scope, NULL, QF_RUNNER_START, &f->ts, &f->n), QF_OK,
        "%s", qf_last_message());
    cr_assert_eq(f->n, (size_t)f->s.n_runners, "one task per runner");
}

Test(runtime_stress, ten_thousand_runners_deliver_every_element_once, .timeout = 300)
{
    /* the scale test: 10,000 runners x 100 elements through one
     * queue of capacity 1,000 on 2 workers */
    fixture f;
    setup(&f, qft_stress_scale(10000, 0), 100, 1000);
    start(&f);
    long errors = 0;
    long got = consume(&f, LONG_MAX, &errors);
    cr_expect_eq(got, f.s.n_runners * 100, "every element arrived");
    cr_expect_eq(errors, 0, "duplicates, losses or reorderings");
    cr_expect(qf_queue_is_closed(f.s.q), "the last runner closed the queue");
    cr_expect_eq(atomic_load(&f.s.live), 0);

    int64_t t0 = qf_now_ns();
    cr_assert_eq(qf_coord_request_stop(f.c, NULL), QF_OK);
    qf_coord_join_report rep = {0};
    cr_expect_eq(qf_coord_join(f.c, NULL, 0, 10.0, false, &rep), QF_OK, "%s", qf_last_message());
    cr_log_info("stop + join of %ld finished runners: %.3f ms", f.s.n_runners,
                (qf_now_ns() - t0) / 1e6);
    cr_expect_eq(rep.n_running, 0);
    qf_coord_join_report_clear(&rep);
    for (size_t i = 0; i < f.n; i++) {
        qf_code rc = qf_task_join(f.ts[i], qf_deadline_in_s(10), NULL);
        if (rc != QF_OK) {
            cr_expect_eq(rc, QF_OK, "task %zu ended with %s", i, qf_code_name(rc));
            break;
        }
    }
    cr_expect_eq(qf_runtime_num_tasks(f.rt), 0);
    teardown(&f);
}

Test(runtime_stress, ten_thousand_parked_runners_stop_and_join, .timeout = 300)
{
    /* endless producers: most of the 10,000 tasks are parked on the full
     * queue when the stop comes; the cancel ops end them all and join
     * returns without laggards */
    fixture f;
    setup(&f, qft_stress_scale(10000, 0), -1, 100);
    start(&f);
    long errors = 0;
    long want = qft_stress_scale(200000, 0);
    long got = consume(&f, want, &errors);
    cr_expect_geq(got, want);
    cr_expect_eq(errors, 0, "duplicates or reorderings");

    int64_t t0 = qf_now_ns();
    cr_assert_eq(qf_coord_request_stop(f.c, NULL), QF_OK);
    qf_coord_join_report rep = {0};
    qf_code rc = qf_coord_join(f.c, NULL, 0, 10.0, false, &rep);
    double ms = (qf_now_ns() - t0) / 1e6;
    cr_expect_eq(rc, QF_OK, "%s", qf_last_message());
    cr_expect_eq(rep.n_running, 0);
    cr_expect_eq(rep.n_finished, (size_t)f.s.n_runners);
    cr_log_info("stop + join of %ld parked runners: %.3f ms", f.s.n_runners, ms);
    qf_coord_join_report_clear(&rep);
    cr_expect(qf_queue_is_closed(f.s.q));
    size_t bad = 0;
    for (size_t i = 0; i < f.n; i++) {
        qf_code trc = qf_task_join(f.ts[i], qf_deadline_in_s(10), NULL);
        bad += trc != QF_OK && trc != QF_CANCELLED;
    }
    cr_expect_eq(bad, 0, "tasks end with OK (stop seen) or CANCELLED (enqueue cancelled)");
    teardown(&f);
}

/* A cancel that lands while a task is being polled, after the task's own
 * check, must reach the task's code: it is polled once more (a runner task
 * then leave()s its runner), not ended by the runtime's safety net. */
typedef struct {
    atomic_int polls, cleanups, in_poll;
} cancel_probe;

static qf_code cancel_probe_fn(qf_task *t, void *arg)
{
    cancel_probe *p = arg;
    if (qf_task_is_cancelled(t)) {
        atomic_fetch_add(&p->cleanups, 1);
        return QF_CANCELLED;
    }
    if (atomic_fetch_add(&p->polls, 1) == 0) {
        atomic_store(&p->in_poll, 1);
        while (!qf_task_is_cancelled(t)) /* the shutdown lands now */
            ;
    }
    return QF_PENDING;
}

Test(runtime_stress, cancel_during_poll_reaches_the_task)
{
    qf_runtime *rt = NULL;
    qf_runtime_options ro = {.workers = 2, .name = "cancel"};
    cr_assert_eq(qf_runtime_new(&ro, &rt), QF_OK);
    cancel_probe p = {0};
    qf_task *t = NULL;
    cr_assert_eq(qf_task_spawn(rt, cancel_probe_fn, &p, NULL, &t), QF_OK);
    while (!atomic_load(&p.in_poll))
        ;
    cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(10)), QF_OK);
    cr_expect_eq(qf_task_join(t, qf_deadline_in_s(10), NULL), QF_CANCELLED);
    cr_expect_eq(atomic_load(&p.cleanups), 1, "the task's own code saw the cancel");
    qf_task_unref(t);
    qf_runtime_free(rt);
}

/* ------------------------------------------- wakes while workers are held
 *
 * Issue 24 (5), stressed: tasks woken from outside the pool must run while
 * other workers are held by long tasks. Each round: a pool of 4 workers on
 * this 2-core machine (oversubscribed with 2 waker threads and the test
 * thread), 1-3 long tasks that hold their workers until released, and 48
 * parked tasks that two threads wake, each wake with a token the task
 * counts. Some tasks are cancelled by their waker at random (a flag, then a
 * wake), and in some rounds the runtime is shut down while the wakes are
 * still coming. A task that finishes OK must have counted every token; every
 * task must end before the watchdog (a lost wake is a hang, turned into a
 * failure). In rounds without a shutdown the parked tasks must all end
 * while the long tasks still hold their workers. */

enum { WS_WORKERS = 4, WS_TASKS = 48, WS_WAKES = 40 };

typedef struct {
    atomic_long tokens; /* given and not yet counted */
    long counted;       /* the task's own */
    atomic_int cancel;  /* set at random by the waker */
} ws_task;

typedef struct {
    ws_task tasks[WS_TASKS];
    qf_task *ts[WS_TASKS];
    atomic_int long_running;
    atomic_int release;
    atomic_long wakes; /* wakes given so far, both threads */
    uint64_t seed;
} ws_round;

typedef struct {
    ws_round *r;
    int parity;
} ws_waker;

static uint64_t ws_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static qf_code ws_long_task(qf_task *t, void *arg)
{
    ws_round *r = arg;
    atomic_fetch_add(&r->long_running, 1);
    while (!atomic_load(&r->release) && !qf_task_is_cancelled(t))
        sched_yield();
    return QF_OK;
}

static qf_code ws_token_task(qf_task *t, void *arg)
{
    ws_task *a = arg;
    if (qf_task_is_cancelled(t) || atomic_load(&a->cancel))
        return qf_set_error(QF_CANCELLED, "cancelled");
    a->counted += atomic_exchange(&a->tokens, 0);
    return a->counted >= WS_WAKES ? QF_OK : QF_PENDING;
}

static void *ws_waker_main(void *arg)
{
    ws_waker *w = arg;
    ws_round *r = w->r;
    uint64_t rng = r->seed * 2 + (uint64_t)w->parity + 1;
    for (int k = 0; k < WS_WAKES; k++)
        for (int i = w->parity; i < WS_TASKS; i += 2) {
            ws_task *a = &r->tasks[i];
            if (ws_rand(&rng) % 512 == 0)
                atomic_store(&a->cancel, 1);
            atomic_fetch_add(&a->tokens, 1);
            qf_task_wake(r->ts[i]);
            atomic_fetch_add(&r->wakes, 1);
        }
    return NULL;
}

/* The watchdog: wait for `ok` with a bound only a hang reaches. */
static bool ws_wait(bool (*ok)(ws_round *), ws_round *r, double secs)
{
    qf_deadline d = qf_deadline_in_s(secs);
    while (!ok(r)) {
        if (qf_deadline_passed(d))
            return false;
        sched_yield();
    }
    return true;
}

static bool ws_all_done(ws_round *r)
{
    for (int i = 0; i < WS_TASKS; i++)
        if (!qf_task_is_done(r->ts[i]))
            return false;
    return true;
}

static int ws_nlong;
static bool ws_longs_running(ws_round *r)
{
    return atomic_load(&r->long_running) == ws_nlong;
}

static long ws_shutdown_at;
static bool ws_wakes_reached(ws_round *r)
{
    return atomic_load(&r->wakes) >= ws_shutdown_at;
}

Test(runtime_stress, outside_wakes_run_while_long_tasks_hold_workers, .timeout = 300)
{
    long rounds = qft_stress_scale(400, 0);
    if (rounds < 4)
        rounds = 4;
    int64_t budget_end = qf_now_ns() + 20 * 1000000000LL;
    long done_rounds = 0, shutdowns = 0, cancels = 0;
    for (long round = 0; round < rounds && (done_rounds < 4 || qf_now_ns() < budget_end); round++) {
        ws_round *r = calloc(1, sizeof(*r));
        cr_assert_not_null(r);
        r->seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(round + 1) * 0x2545f4914f6cdd1dull;
        uint64_t rng = r->seed;
        ws_nlong = 1 + (int)(ws_rand(&rng) % 3);
        bool shutdown = ws_rand(&rng) % 4 == 0;
        ws_shutdown_at = (long)(ws_rand(&rng) % (WS_TASKS * WS_WAKES));
        qf_runtime *rt = NULL;
        qf_runtime_options ro = {.workers = WS_WORKERS, .name = "wstress"};
        cr_assert_eq(qf_runtime_new(&ro, &rt), QF_OK);
        qf_task *longs[3];
        for (int i = 0; i < ws_nlong; i++)
            cr_assert_eq(qf_task_spawn(rt, ws_long_task, r, NULL, &longs[i]), QF_OK);
        bool ok = ws_wait(ws_longs_running, r, 30);
        cr_expect(ok, "round %ld: %d of %d long tasks started", round,
                  atomic_load(&r->long_running), ws_nlong);
        qf_task_options o = {.suspended = true};
        for (int i = 0; i < WS_TASKS; i++)
            cr_assert_eq(qf_task_spawn(rt, ws_token_task, &r->tasks[i], &o, &r->ts[i]), QF_OK);
        pthread_t th[2];
        ws_waker wk[2] = {{r, 0}, {r, 1}};
        for (int i = 0; i < 2; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, ws_waker_main, &wk[i]), 0);
        if (ok && shutdown) {
            ok = ws_wait(ws_wakes_reached, r, 30);
            cr_expect(ok, "round %ld: wakes stuck at %ld", round, atomic_load(&r->wakes));
            cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(30)), QF_OK,
                         "round %ld: shutdown: %s", round, qf_last_message());
            shutdowns++;
        }
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        if (ok && !shutdown) {
            ok = ws_wait(ws_all_done, r, 30);
            cr_expect(ok, "round %ld (seed %llx): woken tasks hung with %d long tasks running",
                      round, (unsigned long long)r->seed, ws_nlong);
            cr_expect_eq(atomic_load(&r->long_running), ws_nlong);
            for (int i = 0; i < ws_nlong; i++)
                cr_expect_not(qf_task_is_done(longs[i]), "the long tasks still hold workers");
        }
        atomic_store(&r->release, 1);
        if (!ok) /* a hang: end the parked tasks so the test can report it */
            (void)qf_runtime_shutdown(rt, qf_deadline_in_s(30));
        for (int i = 0; i < WS_TASKS; i++) {
            qf_code rc = qf_task_join(r->ts[i], qf_deadline_in_s(30), NULL);
            bool cancelled = atomic_load(&r->tasks[i].cancel);
            if (rc == QF_OK)
                cr_expect_eq(r->tasks[i].counted, WS_WAKES, "round %ld task %d: a lost token",
                             round, i);
            else
                cr_expect(rc == QF_CANCELLED && (cancelled || shutdown),
                          "round %ld task %d ended with %d", round, i, (int)rc);
            cancels += rc == QF_CANCELLED;
            qf_task_unref(r->ts[i]);
        }
        for (int i = 0; i < ws_nlong; i++) {
            qf_code rc = qf_task_join(longs[i], qf_deadline_in_s(30), NULL);
            cr_expect(rc == QF_OK || (shutdown && rc == QF_CANCELLED), "long task ended with %d",
                      (int)rc);
            qf_task_unref(longs[i]);
        }
        qf_runtime_free(rt);
        free(r);
        done_rounds++;
    }
    cr_log_info("%ld rounds (%ld with a shutdown), %ld tasks cancelled", done_rounds, shutdowns,
                cancels);
}

/* ------------------------- hand-offs racing a close, a stop, a shutdown
 *
 * Issue 26: a consumer's take that frees a slot puts the oldest parked
 * runner's element in for it and wakes the task (the hand-off). Here that
 * hand-off races every way a parked runner can be ended at the same
 * moment. Each round: 4 workers on this 2-core machine (oversubscribed,
 * with 2 consumer threads and the test thread), HO_RUNNERS runners with a
 * Coordinator producing pointer tokens into a queue of capacity 4 (nearly
 * all of them parked in line), two threads taking; after a random number
 * of takes one of: a close with cancel_pending_enqueues, a plain close, a
 * Coordinator stop (the runners' cancel ops close the queue with cancel),
 * or a runtime shutdown (tasks cancelled; the test closes the queue after).
 * Every token produced must be taken exactly once or destroyed exactly
 * once (by its runner, or by the queue's destructor): a hand-off that both
 * put the token in and let the runner destroy it, or lost it, shows here.
 * Every task must end; a hang (a lost wake, a runner that never leaves)
 * is turned into a failure by the watchdog. */

enum { HO_RUNNERS = 64, HO_CAPACITY = 4, HO_TOKENS = 1 << 15, HO_EVENTS = 4 };

typedef struct {
    atomic_uchar fate[HO_TOKENS]; /* 0: not seen, 1: taken, 2: destroyed */
    atomic_long produced;         /* tokens handed out (may run past HO_TOKENS) */
    atomic_long taken, bad;
    long event_at;
    int event;
    qf_queue *q;
} ho_round;

static ho_round *ho_cur; /* the queue's destructor has no argument */

static void ho_mark(ho_round *r, void *p, unsigned char fate)
{
    uintptr_t v = (uintptr_t)p;
    if (v == 0 || v > HO_TOKENS) {
        atomic_fetch_add(&r->bad, 1);
        return;
    }
    unsigned char was = 0;
    if (!atomic_compare_exchange_strong(&r->fate[v - 1], &was, fate))
        atomic_fetch_add(&r->bad, 1); /* taken or destroyed twice */
}

static void ho_dtor(void *p)
{
    ho_mark(ho_cur, p, 2);
}

static qf_code ho_produce(void *arg, void **ret_p)
{
    ho_round *r = arg;
    long i = atomic_fetch_add(&r->produced, 1);
    if (i >= HO_TOKENS)
        return QF_OUT_OF_RANGE;
    *ret_p = (void *)(uintptr_t)(i + 1);
    return QF_OK;
}

static void *ho_consumer(void *arg)
{
    ho_round *r = arg;
    void *p;
    while (qf_queue_dequeue_ptr(r->q, &p) == QF_OK) {
        ho_mark(r, p, 1);
        atomic_fetch_add(&r->taken, 1);
    }
    return NULL;
}

static void ho_report(void *arg)
{
    ho_round *r = arg;
    fprintf(stderr, "handoff stress hung: event %d at %ld takes, %ld taken, %ld produced\n",
            r->event, r->event_at, atomic_load(&r->taken), atomic_load(&r->produced));
}

static bool ho_reached(ho_round *r)
{
    return atomic_load(&r->taken) >= r->event_at || atomic_load(&r->produced) >= HO_TOKENS;
}

Test(runtime_stress, handoffs_to_parked_runners_race_close_stop_and_shutdown, .timeout = 300)
{
    long rounds = qft_stress_scale(200, 0);
    if (rounds < HO_EVENTS)
        rounds = HO_EVENTS;
    int64_t budget_end = qf_now_ns() + 20 * 1000000000LL;
    long done_rounds = 0, per_event[HO_EVENTS] = {0};
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (long round = 0;
         round < rounds && (done_rounds < 2 * HO_EVENTS || qf_now_ns() < budget_end); round++) {
        ho_round *r = calloc(1, sizeof(*r));
        cr_assert_not_null(r);
        ho_cur = r;
        r->event = (int)(round % HO_EVENTS);
        r->event_at = (long)(ws_rand(&rng) % 5000);
        qft_watchdog wd;
        qft_watchdog_start(&wd, 120, ho_report, r);

        qf_runtime *rt = NULL;
        qf_coord *c = NULL;
        cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 4, .name = "handoff"}, &rt),
                     QF_OK);
        cr_assert_eq(qf_coord_new(NULL, 0, &c), QF_OK);
        cr_assert_eq(qf_ptr_queue_new(HO_CAPACITY, "handoff", 0, ho_dtor, &r->q), QF_OK);
        qf_queue_runner *runners[HO_RUNNERS];
        qf_task **ts[HO_RUNNERS];
        size_t nts[HO_RUNNERS];
        qf_enqueue_op op = {
            .name = "token", .kind = QF_OP_PRODUCE_PTR, .produce_ptr = ho_produce, .arg = r};
        for (int i = 0; i < HO_RUNNERS; i++) {
            cr_assert_eq(qf_queue_runner_new(r->q, &op, 1, NULL, &runners[i]), QF_OK);
            cr_assert_eq(qf_queue_runner_start(runners[i], rt, c, QF_RUNNER_START, &ts[i], &nts[i]),
                         QF_OK);
        }
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, ho_consumer, r), 0);
        while (!ho_reached(r))
            sched_yield(); /* bounded by the watchdog */

        /* A close may find the queue closed already: on a loaded machine
         * the takes can run through every token before this thread looks,
         * and the last runner to end its input closes the queue. */
        switch (r->event) {
        case 0:
            cr_expect(qf_queue_close(r->q, true) == QF_OK || qf_queue_is_closed(r->q));
            break;
        case 1:
            cr_expect(qf_queue_close(r->q, false) == QF_OK || qf_queue_is_closed(r->q));
            break;
        case 2:
            cr_expect_eq(qf_coord_request_stop(c, NULL), QF_OK);
            break;
        default:
            cr_expect_eq(qf_runtime_shutdown(rt, qf_deadline_in_s(60)), QF_OK,
                         "round %ld: shutdown: %s", round, qf_last_message());
            cr_expect(qf_queue_close(r->q, false) == QF_OK || qf_queue_is_closed(r->q));
            break;
        }
        per_event[r->event]++;
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL); /* the queue is closed: they drain and end */
        (void)qf_coord_request_stop(c, NULL);
        qf_coord_join_report rep = {0};
        (void)qf_coord_join(c, NULL, 0, 60.0, false, &rep); /* a close's CANCELLED may surface */
        cr_expect_eq(rep.n_running, 0, "round %ld (event %d): runners still running", round,
                     r->event);
        qf_coord_join_report_clear(&rep);
        for (int i = 0; i < HO_RUNNERS; i++) {
            for (size_t k = 0; k < nts[i]; k++)
                cr_expect(qf_task_join(ts[i][k], qf_deadline_in_s(60), NULL) !=
                              QF_DEADLINE_EXCEEDED,
                          "round %ld (event %d): runner %d did not end", round, r->event, i);
            qf_tasks_free(ts[i], nts[i]);
        }
        qf_runtime_free(rt);
        for (int i = 0; i < HO_RUNNERS; i++)
            cr_expect_eq(qf_queue_runner_free(runners[i]), QF_OK);
        qf_queue_unref(r->q); /* destroys what is left */
        qf_coord_free(c);
        qft_watchdog_stop(&wd);

        long produced = atomic_load(&r->produced);
        if (produced > HO_TOKENS)
            produced = HO_TOKENS;
        long lost = 0;
        for (long i = 0; i < produced; i++)
            lost += atomic_load(&r->fate[i]) == 0;
        cr_expect_eq(atomic_load(&r->bad), 0,
                     "round %ld (event %d): a token taken or destroyed twice", round, r->event);
        cr_expect_eq(lost, 0, "round %ld (event %d): %ld of %ld tokens neither taken nor destroyed",
                     round, r->event, lost, produced);
        ho_cur = NULL;
        free(r);
        done_rounds++;
    }
    cr_log_info("%ld rounds: %ld close-cancel, %ld close, %ld stop, %ld shutdown", done_rounds,
                per_event[0], per_event[1], per_event[2], per_event[3]);
}
