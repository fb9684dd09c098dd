/* bench_serve.c - serve.latency and serve.expired: what a dynamic batcher
 * adds to a request's latency, at 1k, 10k and 50k requests/s, with
 * max_queue_delay 500 us and batches of at most 32.
 *
 * Load: 4 submitter threads, open loop: submitter p sends requests p,
 * p+4, ... at their scheduled times (t0 + i / rate), sleeping until the
 * next one is due and never slowing down for the server (a late submitter
 * sends what is due at once). Each request has a deadline 5 ms after its
 * submit. Model: one executor thread; a batch of n costs 100 us + 2 us * n,
 * slept (a model on an accelerator leaves the CPU to others).
 *
 * Added latency is hand-off - submit: from the submit call's start to the
 * model receiving the batch, for every request the model ran, after a
 * 100 ms warm-up. serve.latency.<rate>.p50/.p99 are nearest-rank
 * percentiles of one repetition (median over repetitions in the report);
 * serve.expired.50k counts the requests answered DEADLINE_EXCEEDED, per
 * million sent. Both implementations run the same code here; only the
 * batcher differs (bench_serve.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "bench_serve.h"

#define SV_PRODUCERS 4
#define SV_MAX_BATCH 32
#define SV_DELAY_NS 500000
#define SV_DEADLINE_NS 5000000
#define SV_WARM_NS 100000000
#define SV_BATCH_COST_NS 100000
#define SV_ITEM_COST_NS 2000

typedef struct sv_case {
    const sv_impl *impl;
    double rate;
    bool expired_only; /* serve.expired: report expired ppm */
    bool answer;       /* serve.answer: submit to the completion, not hand-off */
} sv_case;

typedef struct sv_run {
    const sv_case *c;
    void *b;
    sv_item *items;
    size_t n;
    int64_t t0, interval;
} sv_run;

typedef struct sv_producer {
    sv_run *run;
    int id;
} sv_producer;

static int64_t now_ns(void)
{
    return (int64_t)bench_now_ns();
}

static void sleep_until(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void model(void *arg, sv_item *const *items, size_t n)
{
    (void)arg;
    int64_t now = now_ns();
    if (n == 0 || n > SV_MAX_BATCH)
        bench_fail("serve: batch of %zu (max %d)", n, SV_MAX_BATCH);
    for (size_t i = 0; i < n; i++)
        items[i]->t_handoff = now;
    sleep_until(now + SV_BATCH_COST_NS + SV_ITEM_COST_NS * (int64_t)n);
}

static void *produce(void *a)
{
    sv_producer *p = a;
    sv_run *run = p->run;
    for (size_t i = (size_t)p->id; i < run->n; i += SV_PRODUCERS) {
        int64_t due = run->t0 + (int64_t)i * run->interval;
        if (now_ns() < due)
            sleep_until(due);
        sv_item *it = &run->items[i];
        it->t_submit = now_ns();
        it->deadline = it->t_submit + SV_DEADLINE_NS;
        it->status = -1;
        run->c->impl->submit(run->b, it);
    }
    return NULL;
}

typedef struct sv_exec {
    sv_run *run;
} sv_exec;

static void *execute(void *a)
{
    sv_run *run = a;
    run->c->impl->run(run->b, model, run);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double percentile(const int64_t *s, size_t n, unsigned pct)
{
    size_t rank = (n * pct + 99) / 100;
    return n ? (double)s[rank ? rank - 1 : 0] : 0;
}

static void run_serve(bench_rep *r)
{
    const sv_case *c = r->arg;
    sv_run run = {.c = c};
    double secs = r->quick ? 0.4 : 2.0;
    run.n = (size_t)(c->rate * (secs + SV_WARM_NS / 1e9));
    run.interval = (int64_t)(1e9 / c->rate);
    run.items = calloc(run.n, sizeof(sv_item));
    if (!run.items)
        bench_fail("out of memory");
    run.b = c->impl->create(SV_MAX_BATCH, SV_DELAY_NS);
    pthread_t ex, pt[SV_PRODUCERS];
    sv_producer ps[SV_PRODUCERS];
    if (pthread_create(&ex, NULL, execute, &run) != 0)
        bench_fail("pthread_create failed");
    run.t0 = now_ns() + 1000000;
    for (int i = 0; i < SV_PRODUCERS; i++) {
        ps[i] = (sv_producer){&run, i};
        if (pthread_create(&pt[i], NULL, produce, &ps[i]) != 0)
            bench_fail("pthread_create failed");
    }
    for (int i = 0; i < SV_PRODUCERS; i++)
        pthread_join(pt[i], NULL);
    c->impl->drain(run.b);
    pthread_join(ex, NULL);

    int64_t *lat = malloc(run.n * sizeof(int64_t));
    if (!lat)
        bench_fail("out of memory");
    size_t m = 0, ok = 0, exp = 0;
    for (size_t i = 0; i < run.n; i++) {
        sv_item *it = &run.items[i];
        if (it->status == 0) {
            ok++;
            if (it->t_submit >= run.t0 + SV_WARM_NS)
                lat[m++] = (c->answer ? it->t_answer : it->t_handoff) - it->t_submit;
        } else if (it->status == 4) {
            exp++;
        } else {
            bench_fail("serve/%s: request %zu answered %d", c->impl->name, i, it->status);
        }
    }
    if (exp != c->impl->expired(run.b))
        bench_fail("serve/%s: %zu expired answers, batcher counted %llu", c->impl->name, exp,
                   (unsigned long long)c->impl->expired(run.b));
    c->impl->destroy(run.b);
    if (c->expired_only) {
        r->values[0] = (double)exp * 1e6 / (double)run.n;
    } else {
        qsort(lat, m, sizeof(int64_t), cmp_i64);
        r->values[0] = percentile(lat, m, 50);
        r->values[1] = percentile(lat, m, 99);
    }
    free(lat);
    free(run.items);
}

#define SV_CASE(impl_, rate_, exp_)                                                                \
    {                                                                                              \
        &impl_, rate_, exp_, false                                                                 \
    }
static const sv_case cases[] = {
    SV_CASE(sv_qflow, 1000, false),  SV_CASE(sv_mutex_cond, 1000, false),
    SV_CASE(sv_qflow, 10000, false), SV_CASE(sv_mutex_cond, 10000, false),
    SV_CASE(sv_qflow, 50000, false), SV_CASE(sv_mutex_cond, 50000, false),
    SV_CASE(sv_qflow, 50000, true),  SV_CASE(sv_mutex_cond, 50000, true),
};

void bench_register_serve(void)
{
    static const char *const names[][3] = {
        {"serve.latency.1k", "serve.latency.1k.p50", "serve.latency.1k.p99"},
        {"serve.latency.10k", "serve.latency.10k.p50", "serve.latency.10k.p99"},
        {"serve.latency.50k", "serve.latency.50k.p50", "serve.latency.50k.p99"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const sv_case *c = &cases[i];
        int k = c->rate == 1000 ? 0 : c->rate == 10000 ? 1 : 2;
        bench_case bc = {
            .impl = c->impl->name,
            .params = {{.key = "rate", .num = c->rate},
                       {.key = "max_batch", .num = SV_MAX_BATCH},
                       {.key = "max_delay_us", .num = SV_DELAY_NS / 1000},
                       {.key = "model", .str = "100us+2us/item"},
                       {.key = "measures", .str = "submit to batch hand-off"}},
            .run = run_serve,
            .arg = (void *)c,
        };
        if (c->expired_only) {
            bc.name = "serve.expired.50k";
            bc.unit = "expired/Mreq";
            bc.note = "requests answered DEADLINE_EXCEEDED (5 ms deadline), per million sent";
        } else {
            bc.name = names[k][0];
            bc.unit = BENCH_NS;
            bc.outputs[0] = names[k][1];
            bc.outputs[1] = names[k][2];
            bc.note = c->impl == &sv_qflow ? "qf_serve, thread executor (qf_serve_run, "
                                             "its short slice by default)"
                                           : "one mutex + condvar, same policy";
        }
        bench_register(&bc);
    }
    /* Issue 30: the model on a thread of its own, completions through the
     * batcher's fd to an epoll loop thread. serve.latency.<rate>/qflow_fd is
     * comparable with the rows above; serve.answer.<rate> measures submit to
     * the completion callback, against qflow's thread executor (the callback
     * on the model thread). */
    static const sv_case fd_cases[] = {
        {&sv_qflow_fd, 1000, false, false},
        {&sv_qflow_fd, 10000, false, false},
        {&sv_qflow_fd, 50000, false, false},
        {&sv_qflow, 1000, false, true},
        {&sv_qflow_fd, 1000, false, true},
        {&sv_qflow, 10000, false, true},
        {&sv_qflow_fd, 10000, false, true},
        {&sv_qflow, 50000, false, true},
        {&sv_qflow_fd, 50000, false, true},
        /* The task executor of the README's first example. */
        {&sv_qflow_task, 1000, false, false},
        {&sv_qflow_task, 10000, false, false},
        {&sv_qflow_task, 50000, false, false},
    };
    static const char *const answer_names[][3] = {
        {"serve.answer.1k", "serve.answer.1k.p50", "serve.answer.1k.p99"},
        {"serve.answer.10k", "serve.answer.10k.p50", "serve.answer.10k.p99"},
        {"serve.answer.50k", "serve.answer.50k.p50", "serve.answer.50k.p99"},
    };
    for (size_t i = 0; i < sizeof(fd_cases) / sizeof(fd_cases[0]); i++) {
        const sv_case *c = &fd_cases[i];
        int k = c->rate == 1000 ? 0 : c->rate == 10000 ? 1 : 2;
        const char *const *nm = c->answer ? answer_names[k] : names[k];
        bench_case bc = {
            .name = nm[0],
            .impl = c->impl->name,
            .unit = BENCH_NS,
            .outputs = {nm[1], nm[2]},
            .params = {{.key = "rate", .num = c->rate},
                       {.key = "max_batch", .num = SV_MAX_BATCH},
                       {.key = "max_delay_us", .num = SV_DELAY_NS / 1000},
                       {.key = "model", .str = "100us+2us/item"},
                       {.key = "measures",
                        .str = c->answer ? "submit to completion callback"
                                         : "submit to batch hand-off"}},
            .run = run_serve,
            .arg = (void *)c,
            .note = c->impl == &sv_qflow_fd
                        ? "qf_serve, model thread posts (with qf_thread_prefer_latency), epoll "
                          "loop thread collects (fd)"
                    : c->impl == &sv_qflow_task
                        ? "qf_serve, task executor (qf_serve_spawn) on a runtime of one worker "
                          "per CPU; the model sleeps on a worker"
                        : "qf_serve, thread executor (qf_serve_run), callback on its thread",
        };
        bench_register(&bc);
    }
}
