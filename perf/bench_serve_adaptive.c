/* bench_serve_adaptive.c - serve.adaptive: the batcher's adaptive mode
 * (qf_serve_options.p99_target_ns = 2 ms) against the best fixed
 * max_queue_delay found by a sweep in the same repetition (issue 30).
 *
 * Load and model as serve.latency (bench_serve.c): 4 open-loop submitters
 * at 1k, 10k or 50k requests/s, one executor thread (qf_serve_run), a
 * model that sleeps 100 us + 2 us per request, batches of at most 32. The
 * latency here is end to end, submit to the completion callback, which is
 * what the target is about (queueing plus model time).
 *
 * Per repetition and rate: a run per fixed delay of the sweep (0, 100,
 * 250, 500, 1000, 1500 us) and one adaptive run, each 0.3 s (--quick) or
 * 1 s after a 100 ms warm-up. "Best fixed" is the setting with the lowest
 * p99 among those within the target (the lowest p99 overall when none is).
 * Outputs:
 *   serve.adaptive.<rate>.p99          adaptive, ns
 *   serve.adaptive.<rate>.fixed_p99    best fixed, ns
 *   serve.adaptive.<rate>.fixed_delay  the best fixed delay, ns
 *   serve.adaptive.<rate>.tput_ratio   adaptive / best fixed throughput
 *                                      (completions per second of the
 *                                      measured span), in thousandths
 * and serve.adaptive.step: one adaptive run whose load steps 1k -> 50k ->
 * 1k (0.3 s each, --quick: 0.2 s), p99 over each phase. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "qf_serve.h"

#define SA_PRODUCERS 4
#define SA_MAX_BATCH 32
#define SA_TARGET_NS 2000000LL
#define SA_WARM_NS 100000000LL
#define SA_BATCH_COST_NS 100000
#define SA_ITEM_COST_NS 2000

static const int64_t sweep_us[] = {0, 100, 250, 500, 1000, 1500};
#define SA_SWEEP (sizeof(sweep_us) / sizeof(sweep_us[0]))

typedef struct sa_item {
    qf_serve_request req; /* first */
    int64_t t_submit;
    _Atomic int64_t t_done;
    _Atomic int status;
} sa_item;

/* A load: phases of (rate, duration). */
typedef struct sa_phase {
    double rate;
    int64_t ns;
} sa_phase;

typedef struct sa_run {
    qf_serve *s;
    sa_item *items;
    int64_t *due; /* scheduled submit time of each request, from t0 */
    size_t n;
    int64_t t0;
} sa_run;

typedef struct sa_prod {
    sa_run *run;
    int id;
} sa_prod;

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

static void on_done(qf_serve_request *r, qf_code st, void *arg)
{
    (void)arg;
    sa_item *it = (sa_item *)r;
    atomic_store_explicit(&it->t_done, now_ns(), memory_order_relaxed);
    atomic_store_explicit(&it->status, (int)st, memory_order_release);
}

static qf_code model(void *arg, qf_serve_request *const *reqs, size_t n)
{
    (void)arg;
    (void)reqs;
    if (n == 0 || n > SA_MAX_BATCH)
        bench_fail("serve.adaptive: batch of %zu (max %d)", n, SA_MAX_BATCH);
    sleep_until(now_ns() + SA_BATCH_COST_NS + SA_ITEM_COST_NS * (int64_t)n);
    return QF_OK;
}

static void *produce(void *a)
{
    sa_prod *p = a;
    sa_run *run = p->run;
    for (size_t i = (size_t)p->id; i < run->n; i += SA_PRODUCERS) {
        int64_t due = run->t0 + run->due[i];
        if (now_ns() < due)
            sleep_until(due);
        sa_item *it = &run->items[i];
        it->t_submit = now_ns();
        atomic_store_explicit(&it->status, -1, memory_order_relaxed);
        qf_serve_request_init(&it->req, it, QF_FOREVER, 0, on_done, NULL);
        qf_code rc = qf_serve_submit(run->s, &it->req);
        if (rc != QF_OK)
            bench_fail("serve.adaptive: submit refused (%d)", (int)rc);
    }
    return NULL;
}

static void *execute(void *a)
{
    qf_serve_run(a, model, NULL);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct sa_result {
    double p99;  /* end to end, ns */
    double tput; /* completions per second over the measured span */
} sa_result;

/* p99 and throughput of the requests scheduled in [from, to) (ns after t0). */
static sa_result measure(const sa_run *run, int64_t from, int64_t to)
{
    int64_t *lat = malloc(run->n * sizeof(int64_t));
    if (!lat)
        bench_fail("out of memory");
    size_t m = 0;
    int64_t first = INT64_MAX, last = 0;
    for (size_t i = 0; i < run->n; i++) {
        if (run->due[i] < from || run->due[i] >= to)
            continue;
        const sa_item *it = &run->items[i];
        int64_t done = atomic_load_explicit(&it->t_done, memory_order_relaxed);
        lat[m++] = done - it->t_submit;
        if (it->t_submit < first)
            first = it->t_submit;
        if (done > last)
            last = done;
    }
    qsort(lat, m, sizeof(int64_t), cmp_i64);
    sa_result r = {0, 0};
    if (m) {
        size_t rank = (m * 99 + 99) / 100;
        r.p99 = (double)lat[rank - 1];
        r.tput = last > first ? (double)m * 1e9 / (double)(last - first) : 0;
    }
    free(lat);
    return r;
}

/* One run: a batcher (fixed delay, or adaptive when delay < 0), the load
 * of `phases`; fills res[k] for each phase (its warm-up excluded from the
 * first). */
static void run_load(int64_t delay, const sa_phase *phases, size_t nph, sa_result *res,
                     qf_serve_policy_stats *ret_pst)
{
    size_t n = 0;
    for (size_t k = 0; k < nph; k++)
        n += (size_t)(phases[k].rate * (double)phases[k].ns / 1e9);
    sa_run run = {.n = n};
    run.items = calloc(n, sizeof(sa_item));
    run.due = malloc(n * sizeof(int64_t));
    if (!run.items || !run.due)
        bench_fail("out of memory");
    int64_t t = 0;
    size_t i = 0;
    int64_t starts[8];
    for (size_t k = 0; k < nph; k++) {
        starts[k] = t;
        size_t cnt = (size_t)(phases[k].rate * (double)phases[k].ns / 1e9);
        int64_t iv = (int64_t)(1e9 / phases[k].rate);
        for (size_t j = 0; j < cnt; j++)
            run.due[i++] = t + (int64_t)j * iv;
        t += phases[k].ns;
    }
    qf_serve_options o = {.name = "adaptive-bench",
                          .max_batch_size = SA_MAX_BATCH,
                          .max_queue_delay_ns = delay >= 0 ? delay : SA_TARGET_NS,
                          .p99_target_ns = delay >= 0 ? 0 : SA_TARGET_NS};
    if (qf_serve_new(&o, &run.s) != QF_OK)
        bench_fail("serve.adaptive: qf_serve_new: %s", qf_last_message());
    pthread_t ex, pt[SA_PRODUCERS];
    sa_prod ps[SA_PRODUCERS];
    if (pthread_create(&ex, NULL, execute, run.s) != 0)
        bench_fail("pthread_create failed");
    run.t0 = now_ns() + 1000000;
    for (int p = 0; p < SA_PRODUCERS; p++) {
        ps[p] = (sa_prod){&run, p};
        if (pthread_create(&pt[p], NULL, produce, &ps[p]) != 0)
            bench_fail("pthread_create failed");
    }
    for (int p = 0; p < SA_PRODUCERS; p++)
        pthread_join(pt[p], NULL);
    qf_serve_report rep;
    qf_serve_drain(run.s, qf_deadline_in_s(30), &rep);
    pthread_join(ex, NULL);
    for (size_t j = 0; j < n; j++)
        if (atomic_load_explicit(&run.items[j].status, memory_order_acquire) != QF_OK)
            bench_fail("serve.adaptive: request %zu answered %d", j,
                       atomic_load(&run.items[j].status));
    if (ret_pst)
        qf_serve_get_policy_stats(run.s, ret_pst);
    qf_serve_free(run.s);
    for (size_t k = 0; k < nph; k++)
        res[k] = measure(&run, starts[k] + (k == 0 ? SA_WARM_NS : 0), starts[k] + phases[k].ns);
    free(run.items);
    free(run.due);
}

typedef struct sa_case {
    double rate; /* 0: the step case */
} sa_case;

static void run_adaptive(bench_rep *r)
{
    const sa_case *c = r->arg;
    int64_t secs_ns = r->quick ? 300000000LL : 1000000000LL;
    sa_result res;
    if (c->rate > 0) {
        sa_phase ph = {c->rate, SA_WARM_NS + secs_ns};
        sa_result best = {0, 0};
        int64_t best_delay = -1;
        bool best_ok = false;
        /* The adaptive run takes a different place among the sweep's runs
         * in each repetition: on this shared machine a run's place in the
         * sequence (CPU quota spent by the runs before it) moves its p99
         * more than the setting does. */
        size_t at = r->rep % (SA_SWEEP + 1);
        sa_result ad = {0, 0};
        for (size_t k = 0; k <= SA_SWEEP; k++) {
            if (k == at)
                run_load(-1, &ph, 1, &ad, NULL);
            if (k == SA_SWEEP)
                break;
            run_load(sweep_us[k] * 1000, &ph, 1, &res, NULL);
            bool ok = res.p99 <= (double)SA_TARGET_NS;
            if (best_delay < 0 || (ok && !best_ok) || (ok == best_ok && res.p99 < best.p99)) {
                best = res;
                best_delay = sweep_us[k] * 1000;
                best_ok = ok;
            }
        }
        res = ad;
        r->values[0] = res.p99;
        r->values[1] = best.p99;
        r->values[2] = (double)best_delay;
        r->values[3] = best.tput > 0 ? 1000.0 * res.tput / best.tput : 0;
        return;
    }
    int64_t step = r->quick ? 200000000LL : 300000000LL;
    sa_phase ph[3] = {{1000, SA_WARM_NS + step}, {50000, step}, {1000, step}};
    sa_result rs[3];
    run_load(-1, ph, 3, rs, NULL);
    r->values[0] = rs[0].p99;
    r->values[1] = rs[1].p99;
    r->values[2] = rs[2].p99;
}

static const sa_case cases[] = {{1000}, {10000}, {50000}, {0}};

void bench_register_serve_adaptive(void)
{
    static const char *const names[][5] = {
        {"serve.adaptive.1k", "serve.adaptive.1k.p99", "serve.adaptive.1k.fixed_p99",
         "serve.adaptive.1k.fixed_delay", "serve.adaptive.1k.tput_ratio"},
        {"serve.adaptive.10k", "serve.adaptive.10k.p99", "serve.adaptive.10k.fixed_p99",
         "serve.adaptive.10k.fixed_delay", "serve.adaptive.10k.tput_ratio"},
        {"serve.adaptive.50k", "serve.adaptive.50k.p99", "serve.adaptive.50k.fixed_p99",
         "serve.adaptive.50k.fixed_delay", "serve.adaptive.50k.tput_ratio"},
    };
    for (size_t i = 0; i < 3; i++)
        bench_register(&(bench_case){
            .name = names[i][0],
            .impl = "qflow",
            .unit = BENCH_NS,
            .outputs = {names[i][1], names[i][2], names[i][3], names[i][4]},
            .params = {{.key = "rate", .num = cases[i].rate},
                       {.key = "max_batch", .num = SA_MAX_BATCH},
                       {.key = "p99_target_us", .num = SA_TARGET_NS / 1000},
                       {.key = "model", .str = "100us+2us/item"},
                       {.key = "measures", .str = "submit to completion"}},
            .note = "adaptive (p99_target 2 ms) vs the best fixed delay of a sweep "
                    "(0..1500 us) in the same repetition; tput_ratio in thousandths",
            .run = run_adaptive,
            .arg = (void *)&cases[i],
        });
    bench_register(&(bench_case){
        .name = "serve.adaptive.step",
        .impl = "qflow",
        .unit = BENCH_NS,
        .outputs = {"serve.adaptive.step.1k.p99", "serve.adaptive.step.50k.p99",
                    "serve.adaptive.step.back_1k.p99"},
        .params = {{.key = "rates", .str = "1k->50k->1k"},
                   {.key = "p99_target_us", .num = SA_TARGET_NS / 1000},
                   {.key = "measures", .str = "submit to completion"}},
        .note = "adaptive, load stepping 1k -> 50k -> 1k req/s within one run",
        .run = run_adaptive,
        .arg = (void *)&cases[3],
    });
}
