/* bench_task_tput.c - tasks against goroutines where the job is many small
 * tasks (issue 26), each beside Go doing the same in the same run
 * (perf/go/qfbench.go).
 *
 * queue.tput.tasks.pNcM, P x C = 1x1, 4x4, 64x64, 1000x1000: P producer
 * tasks and C consumer tasks on one runtime (one worker per CPU) move the
 * values through one inline pointer FIFOQueue of capacity 1024 with the
 * poll forms (qf_queue_poll_enqueue_ptr / qf_queue_poll_dequeue_ptr),
 * parking when the queue is full or empty. A task gives its worker up only
 * when it parks or ends, as a goroutine does when its channel blocks. The
 * last producer to finish closes the queue; consumers drain it and end.
 * The clock runs from before the first spawn until every consumer has
 * ended (Go: from before its first `go` until its consumers are done), so
 * spawning is in both. Every value carries its producer and sequence
 * number: each consumer keeps per-producer counts and sums and checks that
 * one producer's values reach it in order; at the end every value must
 * have arrived exactly once. Go: P and C goroutines on one buffered
 * channel of the same capacity (mode tput).
 *
 * task.spawn: the main thread (a plain thread, as Go's main goroutine
 * spawns) spawns N tasks that each bump a counter and end; the last one
 * signals the main thread. Result: the time from the first spawn until the
 * last task has ended, divided by N (ns per task). Go: N `go f()` with a
 * WaitGroup (mode spawn). Published anchor, not measured here: Tokio's
 * 2019 scheduler write-up gives about 169 ns for a local spawn.
 *
 * Under the test knob (QFLOW_BENCH_SLOWDOWN, impl_qflow.c) each producer
 * sends the knob's filler values before its own, and consumers skip them,
 * as the thread benchmarks' qflow adapter does.
 *
 * A repetition still running after its time budget is told to stop
 * (producers stop producing; the rate is over what moved, marked
 * truncated); one that has not ended HANG_S after that fails the run. */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_go.h"
#include "bench.h"
#include "bench_run.h"
#include "impl_qflow.h"
#include "qf_queue.h"
#include "qf_runtime.h"

#define CAPACITY 1024
#define BUDGET_QUICK_S 1.0
#define BUDGET_FULL_S 10.0
#define HANG_S 30

static void check(qf_code c, const char *what)
{
    if (c != QF_OK)
        bench_fail("%s: %s: %s", what, qf_code_name(c), qf_last_message());
}

/* ------------------------------------------------- queue.tput.tasks */

typedef struct tt_cfg {
    int producers, consumers;
    unsigned long items_quick, items_full;
} tt_cfg;

typedef struct tt_run tt_run;

/* Each task's state on lines of its own (128 bytes: the adjacent-line
 * prefetcher pairs lines), as a goroutine's locals are: packed, the seq
 * and counts that two tasks on two workers write every value shared lines,
 * and the harness's own false sharing showed as queue cost. */
typedef struct tt_prod {
    alignas(128) tt_run *run;
    uint64_t id, seq; /* seq: the last value enqueued */
    bool holding;
    int fill_left; /* the test knob's fillers still to send before the value */
} tt_prod;

typedef struct tt_cons {
    alignas(128) tt_run *run;
    uint64_t *count, *sum, *last; /* per producer */
    uint64_t received;
} tt_cons;

struct tt_run {
    qf_queue *q;
    void *filler; /* the test knob's filler value (bq_qflow_filler()) */
    uint64_t per;
    int producers;
    alignas(64) atomic_int producers_left;
    alignas(64) atomic_bool stop;
};

#define SEQ_BITS 40

static qf_code tt_producer(qf_task *t, void *arg)
{
    tt_prod *p = arg;
    tt_run *run = p->run;
    for (;;) {
        if (!p->holding) {
            if (p->seq == run->per || atomic_load_explicit(&run->stop, memory_order_relaxed))
                break;
            p->holding = true;
            p->fill_left = bq_qflow_fillers_now();
        }
        bool filler = p->fill_left > 0;
        void *v = filler ? run->filler : (void *)(uintptr_t)(p->id << SEQ_BITS | (p->seq + 1));
        qf_code rc = qf_queue_poll_enqueue_ptr(run->q, v, qf_task_waker(t));
        if (rc != QF_OK)
            return rc; /* QF_PENDING: parked until a slot frees */
        if (filler) {
            p->fill_left--;
            continue;
        }
        p->holding = false;
        p->seq++;
    }
    if (atomic_fetch_sub_explicit(&run->producers_left, 1, memory_order_acq_rel) == 1)
        qf_queue_close(run->q, false);
    return QF_OK;
}

static qf_code tt_consumer(qf_task *t, void *arg)
{
    tt_cons *c = arg;
    tt_run *run = c->run;
    for (;;) {
        void *v;
        qf_code rc = qf_queue_poll_dequeue_ptr(run->q, qf_task_waker(t), &v);
        if (rc == QF_OUT_OF_RANGE)
            return QF_OK;
        if (rc != QF_OK)
            return rc;
        if (v == run->filler)
            continue;
        uint64_t x = (uint64_t)(uintptr_t)v, id = x >> SEQ_BITS;
        uint64_t seq = x & ((UINT64_C(1) << SEQ_BITS) - 1);
        if (id >= (uint64_t)run->producers || seq <= c->last[id])
            bench_fail("queue.tput.tasks: value of producer %llu seq %llu after seq %llu: an "
                       "element was duplicated or reordered",
                       (unsigned long long)id, (unsigned long long)seq,
                       id < (uint64_t)run->producers ? (unsigned long long)c->last[id] : 0ull);
        c->last[id] = seq;
        c->count[id]++;
        c->sum[id] += seq;
        c->received++;
    }
}

static void run_tasks_tput(bench_rep *r)
{
    const tt_cfg *cfg = r->arg;
    int np = cfg->producers, nc = cfg->consumers;
    bench_slowdown(); /* read the test knob before any task runs */
    tt_run *run = aligned_alloc(64, (sizeof(*run) + 63) & ~(size_t)63);
    tt_prod *prod = aligned_alloc(128, (size_t)np * sizeof(*prod));
    tt_cons *cons = aligned_alloc(128, (size_t)nc * sizeof(*cons));
    qf_task **ct = calloc((size_t)nc, sizeof(*ct));
    if (!run || !prod || !cons || !ct)
        bench_fail("out of memory");
    memset(run, 0, sizeof(*run));
    memset(prod, 0, (size_t)np * sizeof(*prod));
    memset(cons, 0, (size_t)nc * sizeof(*cons));
    run->filler = bq_qflow_filler();
    run->per = bench_scale(r, cfg->items_quick, cfg->items_full) / (uint64_t)np;
    run->producers = np;
    atomic_init(&run->producers_left, np);
    atomic_init(&run->stop, false);
    for (int i = 0; i < nc; i++) {
        cons[i].run = run;
        size_t bytes = ((size_t)np * 3 * sizeof(uint64_t) + 127) & ~(size_t)127;
        cons[i].count = aligned_alloc(128, bytes);
        if (!cons[i].count)
            bench_fail("out of memory");
        memset(cons[i].count, 0, bytes);
        cons[i].sum = cons[i].count + np;
        cons[i].last = cons[i].count + 2 * np;
    }
    qf_runtime *rt = NULL;
    check(qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "tasks"}, &rt),
          "qf_runtime_new");
    check(qf_ptr_queue_new(CAPACITY, "tasks", 0, NULL, &run->q), "qf_ptr_queue_new");

    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < nc; i++)
        check(qf_task_spawn(rt, tt_consumer, &cons[i], NULL, &ct[i]), "qf_task_spawn");
    for (int i = 0; i < np; i++) {
        prod[i] = (tt_prod){.run = run, .id = (uint64_t)i};
        check(qf_task_spawn(rt, tt_producer, &prod[i], NULL, NULL), "qf_task_spawn");
    }
    qf_deadline budget_end = qf_now_ns() + bench_budget_ns(r, BUDGET_QUICK_S, BUDGET_FULL_S);
    for (int i = 0; i < nc; i++) {
        qf_code rc = qf_task_join(ct[i], budget_end, NULL);
        if (rc == QF_DEADLINE_EXCEEDED) {
            atomic_store(&run->stop, true);
            r->truncated = true;
            rc = qf_task_join(ct[i], qf_now_ns() + (uint64_t)HANG_S * 1000000000u, NULL);
            if (rc == QF_DEADLINE_EXCEEDED)
                bench_fail("queue.tput.tasks: consumers not done %d s after a stop (hung?)",
                           HANG_S);
        }
        check(rc, "consumer task");
    }
    uint64_t t1 = bench_now_ns();

    uint64_t received = 0;
    for (int p = 0; p < np; p++) {
        uint64_t n = 0, s = 0, sent = prod[p].seq;
        for (int i = 0; i < nc; i++) {
            n += cons[i].count[p];
            s += cons[i].sum[p];
        }
        if (n != sent || s != sent * (sent + 1) / 2)
            bench_fail("queue.tput.tasks: producer %d sent %llu values, %llu arrived (lost or "
                       "duplicated)",
                       p, (unsigned long long)sent, (unsigned long long)n);
        received += n;
    }
    r->values[0] = (double)received / ((double)(t1 - t0) / 1e9);

    for (int i = 0; i < nc; i++) {
        qf_task_unref(ct[i]);
        free(cons[i].count);
    }
    qf_runtime_free(rt);
    qf_queue_unref(run->q);
    free(ct);
    free(cons);
    free(prod);
    free(run);
}

/* ----------------------------------------------------------- task.spawn */

typedef struct spawn_run {
    size_t n;
    alignas(64) atomic_size_t ended;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool all;
} spawn_run;

static qf_code spawned(qf_task *t, void *arg)
{
    (void)t;
    spawn_run *s = arg;
    if (atomic_fetch_add_explicit(&s->ended, 1, memory_order_acq_rel) + 1 == s->n) {
        pthread_mutex_lock(&s->mu);
        s->all = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    return QF_OK;
}

static void run_spawn(bench_rep *r)
{
    spawn_run *s = aligned_alloc(64, (sizeof(*s) + 63) & ~(size_t)63);
    if (!s)
        bench_fail("out of memory");
    memset(s, 0, sizeof(*s));
    s->n = bench_scale(r, 100000, 1000000);
    atomic_init(&s->ended, 0);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    qf_runtime *rt = NULL;
    check(qf_runtime_new(&(qf_runtime_options){.workers = bench_workers(), .name = "spawn"}, &rt),
          "qf_runtime_new");
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < s->n; i++)
        check(qf_task_spawn(rt, spawned, s, NULL, NULL), "qf_task_spawn");
    pthread_mutex_lock(&s->mu);
    while (!s->all)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    uint64_t t1 = bench_now_ns();
    r->values[0] = (double)(t1 - t0) / (double)s->n;
    qf_runtime_free(rt);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static void go_spawn(bench_rep *r)
{
    static const char *const keys[] = {"ns_per_task"};
    bench_go_run(r, r->arg, keys, r->values, 1);
}

/* ------------------------------------------------------------ registry */

#define N_SIZES 4
static const int sizes[N_SIZES] = {1, 4, 64, 1000};
static char names[N_SIZES][40];
static tt_cfg tt_cfgs[N_SIZES];
static go_cfg go_tt_cfgs[N_SIZES], go_spawn_cfg;

void bench_register_task_tput(void)
{
    bool go = bench_go_available();
    for (int s = 0; s < N_SIZES; s++) {
        int n = sizes[s];
        snprintf(names[s], sizeof(names[s]), "queue.tput.tasks.p%dc%d", n, n);
        tt_cfgs[s] =
            (tt_cfg){.producers = n, .consumers = n, .items_quick = 200000, .items_full = 2000000};
        bench_register(&(bench_case){
            .name = names[s],
            .impl = "qflow",
            .unit = BENCH_ITEMS_PER_S,
            .params = {{.key = "producers", .num = n},
                       {.key = "consumers", .num = n},
                       {.key = "capacity", .num = CAPACITY},
                       {.key = "items", .str = "200000 quick, 2000000 full"}},
            .note = "P producer and C consumer tasks on one runtime (1 worker per CPU or "
                    "--workers), poll "
                    "forms of one pointer queue; spawning included",
            .run = run_tasks_tput,
            .arg = &tt_cfgs[s],
        });
        if (go) {
            go_tt_cfgs[s] = (go_cfg){.mode = "tput",
                                     .producers = n,
                                     .consumers = n,
                                     .capacity = CAPACITY,
                                     .items_quick = 200000,
                                     .items_full = 2000000};
            bench_register(&(bench_case){
                .name = names[s],
                .impl = "go_chan",
                .unit = BENCH_ITEMS_PER_S,
                .params = {{.key = "producers", .num = n},
                           {.key = "consumers", .num = n},
                           {.key = "capacity", .num = CAPACITY},
                           {.key = "items", .str = "200000 quick, 2000000 full"}},
                .note =
                    "P and C goroutines on one buffered channel, GOMAXPROCS = CPUs or --workers "
                    "(perf/go/qfbench.go)",
                .run = bench_go_tput,
                .arg = &go_tt_cfgs[s],
            });
        }
    }
    bench_register(&(bench_case){
        .name = "task.spawn",
        .impl = "qflow",
        .unit = BENCH_NS,
        .params = {{.key = "tasks", .str = "100000 quick, 1000000 full"},
                   {.key = "measures", .str = "first spawn to last task ended, per task"}},
        .note = "qf_task_spawn from a plain thread, 1 worker per CPU or --workers; Tokio's "
                "published local "
                "spawn: about 169 ns (anchor, not measured)",
        .run = run_spawn,
    });
    if (go) {
        go_spawn_cfg = (go_cfg){.mode = "spawn", .items_quick = 100000, .items_full = 1000000};
        bench_register(&(bench_case){
            .name = "task.spawn",
            .impl = "go",
            .unit = BENCH_NS,
            .params = {{.key = "tasks", .str = "100000 quick, 1000000 full"},
                       {.key = "measures", .str = "first spawn to last task ended, per task"}},
            .note = "`go f()` from the main goroutine, WaitGroup (perf/go/qfbench.go)",
            .run = go_spawn,
            .arg = &go_spawn_cfg,
        });
    }
}
