/* bench_fair.c - does every QueueRunner get its turn, and what does a task
 * hand-off cost (issue 15). Beside each, Go doing the same with goroutines
 * (perf/go/qfbench.go), in the same run.
 *
 * runners.fair.<N>, N = 1000 and 10000: N QueueRunners, one pointer
 * produce op each, as tasks on a pool of one worker per CPU, feed one
 * pointer queue of capacity 1024; they are started in one call
 * (qf_queue_runners_start(), what qf_start_queue_runners() does for a
 * collection); the main thread takes one element per
 * call, first until every runner's first element has arrived (delivery is
 * what counts, not a call of its op), then for a fixed window in which it
 * counts each runner's elements. One measurement gives four results:
 *   runners.fair.<N>.min     fewest elements a runner delivered (items)
 *   runners.fair.<N>.spread  max / median of the per-runner counts (ratio)
 *   runners.fair.<N>.zero    runners that delivered nothing (count)
 *   runners.fair.<N>.first   until every runner's first element arrived (ns)
 * A runner that has delivered nothing FIRST_LIMIT_S after the start fails
 * the run loudly. Go: N goroutines sending to one buffered channel of the
 * same capacity, read by the main goroutine for the same window.
 *
 * runners.tput.<N> gets a Go row here too (N goroutines as above); the
 * qflow and thread-per-runner rows are bench_runners.c's.
 *
 * queue.pingpong.task: two tasks on one runtime (one worker per CPU) bounce
 * a value through two pointer queues, each parking in the poll form when
 * its queue is empty; p50 and p99 of the round trip. Go: two goroutines
 * through two buffered channels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_go.h"
#include "bench.h"
#include "bench_run.h"
#include "qf_coordinator.h"
#include "qf_queue.h"
#include "qf_queue_runner.h"
#include "qf_runtime.h"

#define CAPACITY 1024
#define FIRST_LIMIT_S 20
#define CHECK_EVERY 64

static void check(qf_code c, const char *what)
{
    if (c != QF_OK)
        bench_fail("%s: %s: %s", what, qf_code_name(c), qf_last_message());
}

/* ------------------------------------------------------ runners.fair */

typedef struct fair_producer {
    uint32_t id, seq;
} fair_producer;

static qf_code fair_produce(void *arg, void **ret_p)
{
    fair_producer *p = arg;
    p->seq++;
    *ret_p = (void *)(uintptr_t)(((uint64_t)p->id + 1) << 32 | p->seq);
    return QF_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

enum { F_MIN, F_SPREAD, F_ZERO, F_FIRST, F_N };

typedef struct fair_result {
    double v[F_N];
} fair_result;

static void fair_qflow(unsigned n, double window_s, fair_result *out)
{
    qf_runtime *rt = NULL;
    qf_coord *coord = NULL;
    qf_queue *q = NULL;
    check(qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "fair"}, &rt),
          "qf_runtime_new");
    check(qf_coord_new(NULL, 0, &coord), "qf_coord_new");
    check(qf_ptr_queue_new(CAPACITY, "fair", 0, NULL, &q), "qf_ptr_queue_new");
    fair_producer *prod = calloc(n, sizeof(*prod));
    qf_queue_runner **runners = calloc(n, sizeof(*runners));
    uint64_t *count = calloc(n, sizeof(*count)), *first = calloc(n, sizeof(*first));
    uint32_t *last = calloc(n, sizeof(*last));
    if (!prod || !runners || !count || !first || !last)
        bench_fail("out of memory");
    for (unsigned i = 0; i < n; i++) {
        prod[i].id = i;
        qf_enqueue_op op = {.name = "produce",
                            .kind = QF_OP_PRODUCE_PTR,
                            .produce_ptr = fair_produce,
                            .arg = &prod[i]};
        check(qf_queue_runner_new(q, &op, 1, NULL, &runners[i]), "qf_queue_runner_new");
    }
    /* Started together, as start_queue_runners starts a collection (and
     * as Go's loop of `go` statements starts its goroutines back to back). */
    uint64_t t0 = bench_now_ns();
    check(qf_queue_runners_start(runners, n, rt, coord, QF_RUNNER_START, NULL, NULL),
          "qf_queue_runners_start");
    uint64_t t_started = bench_now_ns();
    uint64_t end = UINT64_MAX, now = t0, all_first = 0;
    unsigned delivered = 0;
    while (now < end) {
        for (int k = 0; k < CHECK_EVERY; k++) {
            void *v;
            check(qf_queue_dequeue_ptr(q, &v), "qf_queue_dequeue_ptr");
            uint64_t x = (uint64_t)(uintptr_t)v, id = (x >> 32) - 1;
            uint32_t seq = (uint32_t)x;
            if (id >= n || seq != last[id] + 1)
                bench_fail("runners.fair/qflow: runner %llu sent seq %u after %u: an element was "
                           "lost, duplicated or reordered",
                           (unsigned long long)id, seq, id < n ? last[id] : 0);
            last[id] = seq;
            if (delivered == n)
                count[id]++;
            if (!first[id]) {
                first[id] = bench_now_ns();
                if (++delivered == n) {
                    all_first = first[id] - t0;
                    end = first[id] + (uint64_t)(window_s * 1e9); /* the window starts */
                }
            }
        }
        now = bench_now_ns();
        if (delivered < n && now - t0 > (uint64_t)FIRST_LIMIT_S * 1000000000u)
            bench_fail("runners.fair/qflow: %u of %u runners delivered nothing in %d s",
                       n - delivered, n, FIRST_LIMIT_S);
    }
    /* The two phases of .first apart: the start call, and the drain until
     * every runner's first element came (README, Measured). */
    if (getenv("QF_BENCH_FAIR_PHASES"))
        fprintf(stderr, "runners.fair.%u/qflow: start %.2f ms, drain %.2f ms\n", n,
                (double)(t_started - t0) / 1e6, (double)(all_first - (t_started - t0)) / 1e6);
    qf_coord_request_stop(coord, NULL);
    check(qf_coord_join(coord, NULL, 0, 10.0, false, NULL), "qf_coord_join");
    qf_runtime_free(rt);
    for (unsigned i = 0; i < n; i++)
        check(qf_queue_runner_free(runners[i]), "qf_queue_runner_free");
    qf_queue_unref(q);
    qf_coord_free(coord);

    unsigned zero = 0;
    for (unsigned i = 0; i < n; i++)
        zero += count[i] == 0;
    qsort(count, n, sizeof(*count), cmp_u64);
    out->v[F_MIN] = (double)count[0];
    out->v[F_SPREAD] = count[n / 2] ? (double)count[n - 1] / (double)count[n / 2] : INFINITY;
    out->v[F_ZERO] = zero;
    out->v[F_FIRST] = (double)all_first;
    free(prod);
    free(runners);
    free(count);
    free(first);
    free(last);
}

static void fair_go(const bench_rep *r, unsigned n, fair_result *out)
{
    go_cfg cfg = {.mode = "runners_fair",
                  .producers = (int)n,
                  .capacity = CAPACITY,
                  .window_quick_s = 0.5,
                  .window_full_s = 2.0};
    static const char *const keys[] = {"min", "median", "max", "zero", "all_first_ns"};
    double v[5];
    bench_go_run(r, &cfg, keys, v, 5);
    if (v[4] < 0)
        bench_fail("runners.fair/go_chan: not every goroutine delivered in the window");
    out->v[F_MIN] = v[0];
    out->v[F_SPREAD] = v[1] > 0 ? v[2] / v[1] : INFINITY;
    out->v[F_ZERO] = v[3];
    out->v[F_FIRST] = v[4];
}

/* The four results of one measurement are four cases (one unit each): the
 * first to run repetition k measures, the others read what it kept. */
typedef struct fair_shared {
    const char *impl;
    unsigned runners;
    unsigned cap;
    fair_result *res;
    bool *have;
    unsigned gen; /* bench_run_generation() that have[] is of */
} fair_shared;

typedef struct fair_case {
    fair_shared *shared;
    int metric;
} fair_case;

static void run_fair(bench_rep *r)
{
    const fair_case *k = r->arg;
    fair_shared *sh = k->shared;
    if (sh->cap < r->reps) {
        free(sh->res);
        free(sh->have);
        sh->cap = r->reps;
        sh->res = calloc(sh->cap, sizeof(*sh->res));
        sh->have = calloc(sh->cap, sizeof(*sh->have));
        if (!sh->res || !sh->have)
            bench_fail("out of memory");
    }
    if (sh->gen != bench_run_generation()) {
        /* A new run (a second look): measure afresh. */
        memset(sh->have, 0, sh->cap * sizeof(*sh->have));
        sh->gen = bench_run_generation();
    }
    if (!sh->have[r->rep]) {
        if (strcmp(sh->impl, "qflow") == 0)
            fair_qflow(sh->runners, r->quick ? 0.5 : 2.0, &sh->res[r->rep]);
        else
            fair_go(r, sh->runners, &sh->res[r->rep]);
        sh->have[r->rep] = true;
    }
    r->values[0] = sh->res[r->rep].v[k->metric];
}

/* ------------------------------------------------- queue.pingpong.task */

typedef struct pp_run {
    qf_queue *ping, *pong;
    size_t rounds, i;
    uint64_t t_sent;
    uint64_t *lat;
    bool sent;
} pp_run;

/* Sends, waits for the answer, records the round trip. */
static qf_code pp_driver(qf_task *t, void *arg)
{
    pp_run *p = arg;
    while (p->i < p->rounds) {
        if (!p->sent) {
            p->t_sent = bench_now_ns();
            qf_code rc = qf_queue_poll_enqueue_ptr(p->ping, (void *)(uintptr_t)(2 * p->i + 1),
                                                   qf_task_waker(t));
            if (rc == QF_PENDING)
                return rc;
            if (rc != QF_OK)
                return rc;
            p->sent = true;
        }
        void *v;
        qf_code rc = qf_queue_poll_dequeue_ptr(p->pong, qf_task_waker(t), &v);
        if (rc != QF_OK)
            return rc;
        if ((uintptr_t)v != 2 * p->i + 2)
            bench_fail("queue.pingpong.task: got %zu, expected %zu", (size_t)(uintptr_t)v,
                       (size_t)(2 * p->i + 2));
        p->lat[p->i++] = bench_now_ns() - p->t_sent;
        p->sent = false;
    }
    qf_queue_close(p->ping, false);
    return QF_OK;
}

typedef struct echo_state {
    pp_run *p;
    void *held;
    bool holding;
} echo_state;

static qf_code pp_echo(qf_task *t, void *arg)
{
    echo_state *e = arg;
    for (;;) {
        if (!e->holding) {
            qf_code rc = qf_queue_poll_dequeue_ptr(e->p->ping, qf_task_waker(t), &e->held);
            if (rc == QF_OUT_OF_RANGE)
                return QF_OK;
            if (rc != QF_OK)
                return rc;
            e->holding = true;
        }
        qf_code rc = qf_queue_poll_enqueue_ptr(e->p->pong, (void *)((uintptr_t)e->held + 1),
                                               qf_task_waker(t));
        if (rc != QF_OK)
            return rc;
        e->holding = false;
    }
}

static void run_pingpong_task(bench_rep *r)
{
    pp_run p = {.rounds = bench_scale(r, 20000, 200000)};
    p.lat = calloc(p.rounds, sizeof(*p.lat));
    if (!p.lat)
        bench_fail("out of memory");
    qf_runtime *rt = NULL;
    check(qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "pp"}, &rt),
          "qf_runtime_new");
    check(qf_ptr_queue_new(CAPACITY, "ping", 0, NULL, &p.ping), "qf_ptr_queue_new");
    check(qf_ptr_queue_new(CAPACITY, "pong", 0, NULL, &p.pong), "qf_ptr_queue_new");
    echo_state es = {.p = &p};
    qf_task *echo = NULL, *driver = NULL;
    check(qf_task_spawn(rt, pp_echo, &es, NULL, &echo), "qf_task_spawn");
    check(qf_task_spawn(rt, pp_driver, &p, NULL, &driver), "qf_task_spawn");
    check(qf_task_join(driver, QF_FOREVER, NULL), "driver task");
    check(qf_task_join(echo, QF_FOREVER, NULL), "echo task");
    qf_task_unref(driver);
    qf_task_unref(echo);
    qf_runtime_free(rt);
    qf_queue_unref(p.ping);
    qf_queue_unref(p.pong);
    /* The first rounds start the pool: not counted. */
    size_t skip = p.rounds / 10;
    qsort(p.lat + skip, p.rounds - skip, sizeof(*p.lat), cmp_u64);
    size_t n = p.rounds - skip;
    r->values[0] = (double)p.lat[skip + n / 2];
    r->values[1] = (double)p.lat[skip + n * 99 / 100];
    free(p.lat);
}

/* ------------------------------------------------------------ registry */

#define N_SIZES 2
static const unsigned fair_sizes[N_SIZES] = {1000, 10000};
static char fair_names[N_SIZES][F_N][40];
static fair_shared fair_sh[N_SIZES][2];
static fair_case fair_cases[N_SIZES][F_N][2];
static go_cfg go_runners_cfg[3], go_pingpong_task_cfg;
static char go_runners_names[3][32], go_runners_task_names[3][32];

static void go_runners_tput(bench_rep *r)
{
    static const char *const keys[] = {"items_per_s"};
    bench_go_run(r, r->arg, keys, r->values, 1);
}

void bench_register_fair(void)
{
    static const char *const fmt[F_N] = {"runners.fair.%u.min", "runners.fair.%u.spread",
                                         "runners.fair.%u.zero", "runners.fair.%u.first"};
    static const char *const unit[F_N] = {BENCH_ITEMS, BENCH_RATIO, BENCH_COUNT, BENCH_NS};
    static const char *const what[F_N] = {"fewest elements one runner delivered in the window",
                                          "max / median per-runner count",
                                          "runners that delivered nothing in the window",
                                          "until every runner's first element arrived"};
    bool go = bench_go_available();
    for (int s = 0; s < N_SIZES; s++) {
        unsigned n = fair_sizes[s];
        fair_sh[s][0] = (fair_shared){.impl = "qflow", .runners = n};
        fair_sh[s][1] = (fair_shared){.impl = "go_chan", .runners = n};
        for (int m = 0; m < F_N; m++) {
            snprintf(fair_names[s][m], sizeof(fair_names[s][m]), fmt[m], n);
            for (int i = 0; i < (go ? 2 : 1); i++) {
                fair_cases[s][m][i] = (fair_case){.shared = &fair_sh[s][i], .metric = m};
                bench_register(&(bench_case){
                    .name = fair_names[s][m],
                    .impl = fair_sh[s][i].impl,
                    .unit = unit[m],
                    .params = {{.key = "runners", .num = n},
                               {.key = "capacity", .num = CAPACITY},
                               {.key = "window", .str = "0.5 s quick, 2 s full"},
                               {.key = "measures", .str = what[m]}},
                    .note = i == 0 ? "N QueueRunners (1 pointer produce op each) as tasks on a "
                                     "pool of one worker per CPU (or --workers)"
                                   : "N goroutines sending to one buffered channel",
                    .run = run_fair,
                    .arg = &fair_cases[s][m][i],
                });
            }
        }
    }
    if (go) {
        static const unsigned tput_sizes[3] = {100, 1000, 10000};
        for (int s = 0; s < 3; s++) {
            go_runners_cfg[s] = (go_cfg){.mode = "runners",
                                         .producers = (int)tput_sizes[s],
                                         .capacity = CAPACITY,
                                         .window_quick_s = 0.1,
                                         .window_full_s = 1.0};
            snprintf(go_runners_names[s], sizeof(go_runners_names[s]), "runners.tput.%u",
                     tput_sizes[s]);
            bench_register(&(bench_case){
                .name = go_runners_names[s],
                .impl = "go_chan",
                .unit = BENCH_ITEMS_PER_S,
                .params = {{.key = "runners", .num = tput_sizes[s]},
                           {.key = "capacity", .num = CAPACITY},
                           {.key = "consumer", .str = "1 goroutine, 1 element per receive"},
                           {.key = "measures",
                            .str = "elements/s the consumer took in the window"}},
                .note = "N goroutines sending to one buffered channel (perf/go/qfbench.go)",
                .run = go_runners_tput,
                .arg = &go_runners_cfg[s],
            });
            /* Go's consumer is a goroutine already: the same program is
             * the baseline of the task-consumer rows (bench_runners.c). */
            snprintf(go_runners_task_names[s], sizeof(go_runners_task_names[s]),
                     "runners.tput.task.%u", tput_sizes[s]);
            bench_register(&(bench_case){
                .name = go_runners_task_names[s],
                .impl = "go_chan",
                .unit = BENCH_ITEMS_PER_S,
                .params = {{.key = "runners", .num = tput_sizes[s]},
                           {.key = "capacity", .num = CAPACITY},
                           {.key = "consumer", .str = "1 goroutine, 1 element per receive"},
                           {.key = "measures",
                            .str = "elements/s the consumer took in the window"}},
                .note = "N goroutines sending to one buffered channel (perf/go/qfbench.go)",
                .run = go_runners_tput,
                .arg = &go_runners_cfg[s],
            });
        }
    }
    bench_register(&(bench_case){
        .name = "queue.pingpong.task",
        .impl = "qflow",
        .unit = BENCH_NS,
        .outputs = {"queue.pingpong.task.p50", "queue.pingpong.task.p99"},
        .params = {{.key = "capacity", .num = CAPACITY}, {.key = "measures", .str = "round trip"}},
        .note = "two tasks on one runtime (one worker per CPU or --workers), poll forms of two "
                "pointer queues",
        .run = run_pingpong_task,
    });
    if (go) {
        go_pingpong_task_cfg = (go_cfg){
            .mode = "pingpong", .capacity = CAPACITY, .items_quick = 20000, .items_full = 200000};
        bench_register(&(bench_case){
            .name = "queue.pingpong.task",
            .impl = "go_chan",
            .unit = BENCH_NS,
            .outputs = {"queue.pingpong.task.p50", "queue.pingpong.task.p99"},
            .params = {{.key = "capacity", .num = CAPACITY},
                       {.key = "measures", .str = "round trip"}},
            .note = "two goroutines through two buffered channels (perf/go/qfbench.go)",
            .run = bench_go_pingpong,
            .arg = &go_pingpong_task_cfg,
        });
    }
}
