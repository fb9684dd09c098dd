/* bench_queue.c - the queue benchmarks of issue 3: which cases exist, with
 * which parameters and work sizes, and the exactly-once check they share.
 * The run functions are in bench_queue_tput.c, _pingpong.c and _alloc.c. */
#include <stdio.h>

#include "baseline_go.h"
#include "bench_queue.h"

/* 1 + 2 + ... + n and 1^2 + ... + n^2, modulo 2^64 like the sums kept by
 * qb_record() (the divisions happen before anything can wrap). */
static uint64_t sum_to(uint64_t n)
{
    return n % 2 ? n * ((n + 1) / 2) : (n / 2) * (n + 1);
}

static uint64_t sumsq_to(uint64_t n)
{
    uint64_t a = n, b = n + 1, c = 2 * n + 1;
    if (a % 2 == 0)
        a /= 2;
    else
        b /= 2;
    if (a % 3 == 0)
        a /= 3;
    else if (b % 3 == 0)
        b /= 3;
    else
        c /= 3;
    return a * b * c;
}

void qb_verify(const char *what, const uint64_t *sent, int producers, const qb_seen *seen,
               int consumers)
{
    uint64_t out_of_order = 0;
    for (int c = 0; c < consumers; c++)
        out_of_order += seen[c].out_of_order;
    for (int p = 0; p < producers; p++) {
        uint64_t count = 0, sum = 0, sumsq = 0;
        for (int c = 0; c < consumers; c++) {
            count += seen[c].count[p];
            sum += seen[c].sum[p];
            sumsq += seen[c].sumsq[p];
        }
        if (count != sent[p] || sum != sum_to(sent[p]) || sumsq != sumsq_to(sent[p]))
            bench_fail("%s: exactly-once check failed for producer %d: sent %llu elements, "
                       "consumers received %llu (sums %s)",
                       what, p, (unsigned long long)sent[p], (unsigned long long)count,
                       sum == sum_to(sent[p]) && sumsq == sumsq_to(sent[p]) ? "match" : "differ");
    }
    if (out_of_order)
        fprintf(stderr,
                "\nqflow-bench: warning: %s: %llu elements arrived out of their "
                "producer's order\n",
                what, (unsigned long long)out_of_order);
}

/* ------------------------------------------------------------ the cases */

#define K 1000
#define M 1000000

static const bq_impl *const mpmc_impls[] = {&bq_qflow, &bq_mutex_cond, &bq_gasyncqueue,
                                            &bq_ck_ring_spin};
#define N_MPMC (sizeof(mpmc_impls) / sizeof(mpmc_impls[0]))

/* The C++ peers, when their packages were there at build time; NULL ends
 * the list (loops stop at it: a bound of N_CXX = 0 would be a
 * -Wtype-limits warning). */
static const bq_impl *const cxx_impls[] = {
#ifdef QFB_HAVE_MOODYCAMEL
    &bq_moodycamel,
#endif
#ifdef QFB_HAVE_ATOMIC_QUEUE
    &bq_atomic_queue,
#endif
    NULL,
};
#define N_CXX (sizeof(cxx_impls) / sizeof(cxx_impls[0]) - 1)

/* The --quick time budget of a spinning peer's repetition. On a quiet
 * machine atomic_queue moves its million items in tens of milliseconds; on
 * a loaded one its threads spin away their time slices while the other
 * side waits for a CPU, and a repetition would use up the whole default
 * budget (1 s) for a few tens of thousands of items: a quarter of that
 * measures the same rate and keeps --quick near its length. */
#define SPIN_BUDGET_QUICK_S 0.25

static double quick_budget_of(const bq_impl *impl)
{
#ifdef QFB_HAVE_ATOMIC_QUEUE
    if (impl == &bq_atomic_queue)
        return SPIN_BUDGET_QUICK_S;
#endif
    (void)impl;
    return 0;
}

#define N_THREAD_CASES 5
static tput_cfg threads_cfg[N_THREAD_CASES][N_MPMC + N_CXX];
static go_cfg go_threads_cfg[N_THREAD_CASES], go_pingpong_cfg;
static tput_cfg batch_cfg[3], spsc_cfg[2];
/* The typed element kinds (issues 18 and 27), each at 1x1 and 4x4. */
#define N_TYPED 5
#define N_TYPED_SIZES 2
static tput_cfg typed_cfg[N_TYPED_SIZES][N_TYPED];
static pingpong_cfg pingpong_cfg_of[2 + N_CXX];
static alloc_cfg alloc_cfg_qflow, alloc_cfg_i64;

static const char *capacity_str(const bq_impl *impl)
{
    return impl == &bq_gasyncqueue ? "unbounded" : NULL;
}

static void register_tput(const char *name, tput_cfg *cfg)
{
    const char *cap = capacity_str(cfg->impl);
    bench_register(&(bench_case){
        .name = name,
        .impl = cfg->impl->name,
        .unit = BENCH_ITEMS_PER_S,
        .params = {{.key = "producers", .num = cfg->producers},
                   {.key = "consumers", .num = cfg->consumers},
                   {.key = "capacity", .str = cap, .num = QB_CAPACITY},
                   {.key = "batch", .num = cfg->batch},
                   {.key = "flags",
                    .str = cfg->flags ? "single_producer|single_consumer" : "mpmc"}},
        .note = cfg->impl->note,
        .run = qb_run_tput,
        .arg = cfg,
    });
}

/* The Go baseline of a throughput case: a buffered channel of the same
 * capacity, the same numbers of producer and consumer goroutines. */
static void register_go_tput(const char *name, go_cfg *cfg)
{
    bench_register(&(bench_case){
        .name = name,
        .impl = "go_chan",
        .unit = BENCH_ITEMS_PER_S,
        .params = {{.key = "producers", .num = cfg->producers},
                   {.key = "consumers", .num = cfg->consumers},
                   {.key = "capacity", .num = cfg->capacity},
                   {.key = "batch", .num = 1},
                   {.key = "flags", .str = "mpmc"}},
        .note =
            "Go buffered channel, goroutines, GOMAXPROCS = CPUs or --workers (perf/go/qfbench.go)",
        .run = bench_go_tput,
        .arg = cfg,
    });
}

/* Peers whose rows this build cannot have: said on the run's first lines
 * and in its results file rather than left to be guessed from a table. */
static void note_absent_peers(void)
{
#ifndef QFB_HAVE_MOODYCAMEL
    bench_skip_peer("moodycamel", "not built: needs a C++ compiler and libconcurrentqueue-dev, "
                                  "and no ThreadSanitizer");
#endif
#ifndef QFB_HAVE_ATOMIC_QUEUE
    bench_skip_peer("atomic_queue", "not built: needs a C++ compiler and libatomic-queue-dev");
#endif
    if (!bench_go_available())
        bench_skip_peer("go_chan", bench_go_missing());
}

void bench_register_queue(void)
{
    note_absent_peers();
    static const char *const names[N_THREAD_CASES] = {"queue.tput.p1c1", "queue.tput.p2c2",
                                                      "queue.tput.p4c4", "queue.tput.p8c8",
                                                      "queue.tput.p16c16"};
    static const int threads[N_THREAD_CASES] = {1, 2, 4, 8, 16};
    for (int t = 0; t < N_THREAD_CASES; t++) {
        const bq_impl *impls[N_MPMC + N_CXX];
        size_t n = 0;
        for (size_t i = 0; i < N_MPMC; i++)
            /* The spinning ring collapses once threads outnumber cores: it
             * would only run into its time budget there. */
            if (mpmc_impls[i] != &bq_ck_ring_spin || threads[t] <= 4)
                impls[n++] = mpmc_impls[i];
        for (const bq_impl *const *x = cxx_impls; *x; x++)
            impls[n++] = *x;
        for (size_t i = 0; i < n; i++) {
            threads_cfg[t][i] = (tput_cfg){.impl = impls[i],
                                           .producers = threads[t],
                                           .consumers = threads[t],
                                           .batch = 1,
                                           .items_quick = 1 * M,
                                           .items_full = 5 * M,
                                           .budget_quick_s = quick_budget_of(impls[i])};
            register_tput(names[t], &threads_cfg[t][i]);
        }
        if (bench_go_available()) {
            go_threads_cfg[t] = (go_cfg){.mode = "tput",
                                         .producers = threads[t],
                                         .consumers = threads[t],
                                         .capacity = QB_CAPACITY,
                                         .items_quick = 1 * M,
                                         .items_full = 5 * M};
            register_go_tput(names[t], &go_threads_cfg[t]);
        }
    }

    /* The element path beside the pointer path (issue 18), and packed
     * elements of two int64 and of a TF1 example (issue 27), through
     * elements and through the values calls; at 4x4 too, where producers
     * contend for the ring's cells. The tuple's ratio needs fewer items:
     * that keeps --quick short. */
    static const bq_impl *const typed[N_TYPED] = {&bq_qflow_i64, &bq_qflow_i64_pair,
                                                  &bq_qflow_tuple, &bq_qflow_i64_pair_values,
                                                  &bq_qflow_tuple_values};
    static const char *const typed_names[N_TYPED_SIZES] = {"queue.tput.p1c1", "queue.tput.p4c4"};
    static const int typed_threads[N_TYPED_SIZES] = {1, 4};
    for (int t = 0; t < N_TYPED_SIZES; t++)
        for (int i = 0; i < N_TYPED; i++) {
            bool tuple = typed[i] == &bq_qflow_tuple || typed[i] == &bq_qflow_tuple_values;
            typed_cfg[t][i] = (tput_cfg){.impl = typed[i],
                                         .producers = typed_threads[t],
                                         .consumers = typed_threads[t],
                                         .batch = 1,
                                         .items_quick = tuple ? M / 2 : 1 * M,
                                         .items_full = 5 * M};
            register_tput(typed_names[t], &typed_cfg[t][i]);
        }

    const bq_impl *batch_impls[3] = {&bq_qflow, &bq_mutex_cond, &bq_qflow_i64};
    for (int i = 0; i < 3; i++) {
        batch_cfg[i] = (tput_cfg){.impl = batch_impls[i],
                                  .producers = 1,
                                  .consumers = 1,
                                  .batch = 32,
                                  .items_quick = 4 * M,
                                  .items_full = 20 * M};
        register_tput("queue.tput.batch32", &batch_cfg[i]);
    }

    const bq_impl *spsc_impls[2] = {&bq_qflow, &bq_ck_ring_spsc};
    for (int i = 0; i < 2; i++) {
        spsc_cfg[i] = (tput_cfg){.impl = spsc_impls[i],
                                 .producers = 1,
                                 .consumers = 1,
                                 .batch = 1,
                                 .flags = BQ_SINGLE_PRODUCER | BQ_SINGLE_CONSUMER,
                                 .items_quick = 4 * M,
                                 .items_full = 20 * M};
        register_tput("queue.tput.spsc", &spsc_cfg[i]);
    }

    const bq_impl *pp_impls[2 + N_CXX] = {&bq_qflow, &bq_mutex_cond};
    size_t n_pp = 2;
    for (const bq_impl *const *x = cxx_impls; *x; x++)
        pp_impls[n_pp++] = *x;
    for (size_t i = 0; i < n_pp; i++) {
        pingpong_cfg_of[i] =
            (pingpong_cfg){.impl = pp_impls[i], .budget_quick_s = quick_budget_of(pp_impls[i])};
        bench_register(&(bench_case){
            .name = "queue.pingpong",
            .impl = pp_impls[i]->name,
            .unit = BENCH_NS,
            .outputs = {"queue.pingpong.p50", "queue.pingpong.p99"},
            .params = {{.key = "capacity", .num = QB_CAPACITY},
                       {.key = "flags", .str = "mpmc"},
                       {.key = "measures", .str = "round trip"}},
            .note = pp_impls[i]->note,
            .run = qb_run_pingpong,
            .arg = &pingpong_cfg_of[i],
        });
    }
    /* The same Go program as queue.pingpong.task/go_chan: goroutines are
     * what a Go user's two threads of control would be. */
    if (bench_go_available()) {
        go_pingpong_cfg = (go_cfg){.mode = "pingpong",
                                   .capacity = QB_CAPACITY,
                                   .items_quick = 20000,
                                   .items_full = 200000};
        bench_register(&(bench_case){
            .name = "queue.pingpong",
            .impl = "go_chan",
            .unit = BENCH_NS,
            .outputs = {"queue.pingpong.p50", "queue.pingpong.p99"},
            .params = {{.key = "capacity", .num = QB_CAPACITY},
                       {.key = "flags", .str = "mpmc"},
                       {.key = "measures", .str = "round trip"}},
            .note = "two goroutines through two buffered channels (perf/go/qfbench.go)",
            .run = bench_go_pingpong,
            .arg = &go_pingpong_cfg,
        });
    }

    alloc_cfg_qflow = (alloc_cfg){.impl = &bq_qflow, .producers = 2, .consumers = 2};
    alloc_cfg_i64 = (alloc_cfg){.impl = &bq_qflow_i64, .producers = 2, .consumers = 2};
    alloc_cfg *alloc_cfgs[2] = {&alloc_cfg_qflow, &alloc_cfg_i64};
    for (int i = 0; i < 2; i++)
        bench_register(&(bench_case){
            .name = "queue.alloc",
            .impl = alloc_cfgs[i]->impl->name,
            .unit = BENCH_ALLOCS_PER_ITEM,
            .params = {{.key = "producers", .num = 2},
                       {.key = "consumers", .num = 2},
                       {.key = "capacity", .num = QB_CAPACITY},
                       {.key = "counts", .str = "malloc calloc realloc memalign family"}},
            .note = i == 0 ? "allocations per element (enqueue + dequeue) after a warm-up, all "
                             "threads"
                           : "the same through one-int64 elements (a tensor and an element per "
                             "item on each side)",
            .run = qb_run_alloc,
            .arg = alloc_cfgs[i],
        });
}
