/* test_serve_stress.c - the serving batcher under load: exactly-once
 * answers with the right status, oversubscribed (12 submitters, 2 thread
 * executors, a task executor on a 2-worker pool, a drainer and a watchdog:
 * 18 threads on the 2 cores CI has), random deadlines, priorities,
 * admission policies, batch shapes and drain moments.
 *
 * Each round, per request:
 *   - answered exactly once (callback requests count their calls; waitable
 *     ones are waited for by their submitter, who counts the wait's return);
 *   - QF_OK only if an executor ran it, and every executor ran it at most
 *     once; DEADLINE_EXCEEDED only at or after its deadline; CANCELLED only
 *     after the drain began;
 * per batch: 1 <= size <= max_batch_size;
 * per round: the drain report adds up (admitted = batched + expired +
 * dropped + cancelled), matches the statuses seen, and every submit
 * that was not refused for bad input is counted as admitted or rejected.
 * A watchdog turns a round that does not end in ROUND_LIMIT_S into a
 * failure. QF_STRESS_SCALE divides the rounds. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qflow.h"
#include "qf_test_stress.h"

#define NP 12
#define NEXEC 2
#define ROUND_LIMIT_S 90

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
    atomic_int answers;
    atomic_int status;
    atomic_int ran; /* executor calls that contained it */
    int64_t answered_at;
} sreq;

struct round {
    qf_serve *s;
    size_t max_batch;
    long per;
    sreq *reqs; /* NP * per */
    atomic_long submitted;
    atomic_long bad_submits;
    atomic_long batches;
    atomic_int errors;
    atomic_int producers_done;
    atomic_long drain_at;  /* submissions before the drain */
    atomic_llong drain_ns; /* when the drain began; 0 before */
    atomic_bool over;
    atomic_int execs_done;
    atomic_bool drain_done;
    qf_task *task;
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

static void on_done(qf_serve_request *req, qf_code st, void *arg)
{
    sreq *q = (sreq *)req;
    (void)arg;
    q->answered_at = qf_now_ns();
    atomic_store(&q->status, (int)st);
    atomic_fetch_add(&q->answers, 1);
}

static qf_code model(void *arg, qf_serve_request *const *reqs, size_t n)
{
    round *r = arg;
    if (n < 1 || n > r->max_batch)
        fail(r, "batch of %zu (max %zu)", n, r->max_batch);
    for (size_t i = 0; i < n; i++)
        if (atomic_fetch_add(&((sreq *)reqs[i])->ran, 1) != 0)
            fail(r, "a request ran twice");
    atomic_fetch_add(&r->batches, 1);
    return QF_OK;
}

typedef struct producer {
    round *r;
    int id;
} producer;

static void *produce(void *a)
{
    producer *p = a;
    round *r = p->r;
    uint64_t seed = r->seed ^ ((uint64_t)p->id * 0x9e3779b97f4a7c15ull) ^ 1;
    uint32_t levels = 3;
    for (long i = 0; i < r->per; i++) {
        sreq *q = &r->reqs[(size_t)p->id * (size_t)r->per + (size_t)i];
        uint64_t x = rnd(&seed);
        qf_deadline dl;
        switch (x % 4) {
        case 0:
            dl = QF_FOREVER;
            break;
        case 1:
            dl = qf_now_ns() - 1;
            break; /* already late */
        default:
            dl = qf_now_ns() + (int64_t)((x >> 8) % 2000000);
            break;
        }
        bool waitable = (x >> 32) % 8 == 0;
        q->r = r;
        qf_serve_request_init(&q->req, q, dl, (uint32_t)((x >> 40) % levels),
                              waitable ? NULL : on_done, NULL);
        qf_code rc = qf_serve_submit(r->s, &q->req);
        atomic_fetch_add(&r->submitted, 1);
        if (rc == QF_INVALID_ARGUMENT) {
            atomic_fetch_add(&r->bad_submits, 1);
            continue;
        }
        if (waitable) {
            qf_code st = (qf_code)-9;
            qf_code wrc = qf_serve_request_wait_until(&q->req, qf_deadline_in_s(60), &st);
            if (wrc != QF_OK) {
                fail(r, "waitable request not answered: %s", qf_code_name(wrc));
                continue;
            }
            q->answered_at = qf_now_ns();
            atomic_store(&q->status, (int)st);
            atomic_fetch_add(&q->answers, 1);
            if (rc != QF_OK && st != rc)
                fail(r, "submit returned %d but the answer is %d", rc, st);
        }
        if ((x >> 50) % 64 == 0)
            sched_yield();
    }
    atomic_fetch_add(&r->producers_done, 1);
    return NULL;
}

static void *run_exec(void *a)
{
    round *r = a;
    qf_code rc = qf_serve_run(r->s, model, r);
    if (rc != QF_OK)
        fail(r, "qf_serve_run: %s", qf_code_name(rc));
    atomic_fetch_add(&r->execs_done, 1);
    return NULL;
}

typedef struct drainer {
    round *r;
    int64_t grace_ns;
    qf_serve_report rep;
    qf_code rc;
} drainer;

static void *drain_at_random(void *a)
{
    drainer *d = a;
    round *r = d->r;
    long at = atomic_load(&r->drain_at);
    while (atomic_load(&r->submitted) < at && atomic_load(&r->producers_done) < NP)
        sched_yield(); /* waits for observable progress */
    atomic_store(&r->drain_ns, qf_now_ns());
    d->rc = qf_serve_drain(r->s, qf_deadline_in_ns(d->grace_ns), &d->rep);
    atomic_store(&r->drain_done, true);
    return NULL;
}

/* What a round that does not end in ROUND_LIMIT_S stood at (the watchdog
 * then aborts). */
static void report_hang(void *a)
{
    round *r = a;
    qf_serve_stats st;
    qf_serve_get_stats(r->s, &st);
    fprintf(stderr,
            "HANG: %d/%d producers done, submitted %ld, depth %lld, in flight %llu, "
            "draining %d, batches %ld; %d/%d thread executors done, task done %d, "
            "drain done %d\n",
            atomic_load(&r->producers_done), NP, atomic_load(&r->submitted), (long long)st.depth,
            (unsigned long long)st.counts.in_flight, qf_serve_is_draining(r->s),
            atomic_load(&r->batches), atomic_load(&r->execs_done), NEXEC,
            r->task ? qf_task_is_done(r->task) : -1, atomic_load(&r->drain_done));
    if (getenv("SERVE_HANG_PAUSE"))
        sleep(120);
}

static void one_round(uint64_t seed, qf_runtime *rt)
{
    round *r = calloc(1, sizeof(*r));
    r->seed = seed;
    uint64_t x = rnd(&seed);
    static const size_t batches[] = {1, 4, 16, 32};
    static const int64_t delays[] = {0, 50000, 1000000};
    static const int64_t bounds[] = {0, 8, 64, 512};
    r->max_batch = batches[x % 4];
    r->per = 4000 / (long)(1 + (x >> 4) % 3);
    qf_serve_admission pol = (qf_serve_admission)((x >> 8) % 3);
    int64_t bound = bounds[(x >> 12) % 4];
    if (bound == 0 && pol != QF_SERVE_REJECT)
        bound = 16;
    size_t pref[2] = {1, r->max_batch > 2 ? r->max_batch / 2 : 1};
    qf_serve_options o = {.name = "stress",
                          .max_batch_size = r->max_batch,
                          .max_queue_delay_ns = delays[(x >> 16) % 3],
                          .priority_levels = 3,
                          .max_bypass = (uint32_t)((x >> 20) % 3),
                          .max_queued = bound,
                          .admission = pol,
                          .preferred_batch_sizes = (x >> 24) % 2 ? pref : NULL,
                          .num_preferred = (x >> 24) % 2 ? (r->max_batch > 2 ? 2 : 1) : 0};
    cr_assert_eq(qf_serve_new(&o, &r->s), QF_OK, "%s", qf_last_message());
    long total = NP * r->per;
    r->reqs = calloc((size_t)total, sizeof(sreq));
    atomic_store(&r->drain_at, (long)((x >> 28) % (uint64_t)(total + 1)));
    drainer d = {.r = r, .grace_ns = (int64_t)((x >> 40) % 3000000)};

    qft_watchdog wd;
    pthread_t ex[NEXEC], pt[NP], dt;
    qft_watchdog_start(&wd, ROUND_LIMIT_S, report_hang, r);
    qf_task *task = NULL;
    cr_assert_eq(qf_serve_spawn(r->s, rt, model, r, NULL, &task), QF_OK);
    r->task = task;
    for (int i = 0; i < NEXEC; i++)
        pthread_create(&ex[i], NULL, run_exec, r);
    producer ps[NP];
    for (int i = 0; i < NP; i++) {
        ps[i] = (producer){r, i};
        pthread_create(&pt[i], NULL, produce, &ps[i]);
    }
    pthread_create(&dt, NULL, drain_at_random, &d);
    for (int i = 0; i < NP; i++)
        pthread_join(pt[i], NULL);
    pthread_join(dt, NULL);
    for (int i = 0; i < NEXEC; i++)
        pthread_join(ex[i], NULL);
    cr_expect_eq(qf_task_join(task, QF_FOREVER, NULL), QF_OK);
    qf_task_unref(task);
    qf_serve_report rep;
    cr_expect_eq(qf_serve_drain(r->s, QF_FOREVER, &rep), QF_OK);
    qft_watchdog_stop(&wd);

    cr_expect_eq(atomic_load(&r->errors), 0, "seed %llu: %s", (unsigned long long)r->seed, r->what);
    cr_expect_eq(atomic_load(&r->bad_submits), 0);
    uint64_t by[QF_CODE_COUNT] = {0};
    int64_t drain_ns = atomic_load(&r->drain_ns);
    for (long i = 0; i < total; i++) {
        sreq *q = &r->reqs[i];
        int a = atomic_load(&q->answers), st = atomic_load(&q->status), ran = atomic_load(&q->ran);
        if (a != 1) {
            cr_expect_eq(a, 1, "seed %llu: request %ld answered %d times",
                         (unsigned long long)r->seed, i, a);
            break;
        }
        cr_assert(st >= 0 && st < QF_CODE_COUNT);
        by[st]++;
        if ((st == QF_OK) != (ran == 1))
            cr_expect_fail("seed %llu: request %ld status %d, ran %d", (unsigned long long)r->seed,
                           i, st, ran);
        if (st == QF_DEADLINE_EXCEEDED && q->answered_at < q->req.deadline)
            cr_expect_fail("request %ld expired before its deadline", i);
        if (st == QF_CANCELLED && (!drain_ns || q->answered_at < drain_ns))
            cr_expect_fail("request %ld cancelled before the drain", i);
    }
    cr_expect_eq(rep.admitted + rep.rejected, (uint64_t)total);
    cr_expect_eq(rep.admitted, rep.batched + rep.expired + rep.dropped + rep.cancelled);
    cr_expect_eq(rep.queued, 0);
    cr_expect_eq(rep.in_flight, 0);
    cr_expect_eq(by[QF_OK], rep.batched, "seed %llu", (unsigned long long)r->seed);
    cr_expect_eq(by[QF_DEADLINE_EXCEEDED], rep.expired);
    cr_expect_eq(by[QF_UNAVAILABLE], rep.rejected + rep.dropped);
    cr_expect_eq(by[QF_CANCELLED], rep.cancelled);
    qf_serve_free(r->s);
    free(r->reqs);
    pthread_mutex_destroy(&wd.mu);
    pthread_cond_destroy(&wd.cv);
    free(r);
}

#ifndef QF_TSAN_CRITERION_SHIM_H
TestSuite(serve_stress, .timeout = 900);
#endif

Test(serve_stress, exactly_once_with_random_drains)
{
    qf_runtime *rt;
    cr_assert_eq(qf_runtime_new(&(qf_runtime_options){.workers = 2, .name = "stress"}, &rt), QF_OK);
    long rounds = qft_stress_scale(40, 1);
    uint64_t seed = (uint64_t)qf_now_ns() | 1;
    for (long i = 0; i < rounds; i++)
        one_round(seed + (uint64_t)i * 7919, rt);
    qf_runtime_free(rt);
}
