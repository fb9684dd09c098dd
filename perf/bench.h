/* bench.h - how a benchmark joins qflow-bench.
 *
 * A benchmark *case* is one (bench, impl) pair: a bench name that says what
 * is measured ("queue.tput.p1c1"), an implementation name ("qflow",
 * "mutex_cond", ...), a unit, a few parameters, and a run function that
 * performs ONE repetition and stores its value. The harness runs every case
 * that passes --filter --reps times and reports median, min and max; qflow
 * rows are shown next to each baseline of the same bench with the ratio.
 *
 * Units decide what "better" means (--compare, ratios):
 *     BENCH_ITEMS_PER_S, BENCH_MB_PER_S, BENCH_ITEMS    higher is better
 *     BENCH_NS, BENCH_BYTES, BENCH_ALLOCS_PER_ITEM, BENCH_RATIO, BENCH_COUNT
 *                          lower is better
 *
 * One run may produce several results (a latency run gives p50 and p99):
 * list their full bench names in .outputs and store one value per output
 * in r->values[i]. Without .outputs the case has one result named .name.
 *
 * Adding a group of benchmarks (say the coordinator):
 *
 *     // perf/bench_coord.c
 *     #include "bench.h"
 *
 *     static void stop_latency(bench_rep *r)
 *     {
 *         size_t n = r->quick ? 10000 : 200000;   // scale work with --quick
 *         ... set up; time n operations with bench_now_ns() ...
 *         r->values[0] = p50_ns;
 *         r->values[1] = p99_ns;
 *     }
 *
 *     void bench_register_coord(void)
 *     {
 *         bench_register(&(bench_case){
 *             .name = "coord.stop",
 *             .impl = "qflow",
 *             .unit = BENCH_NS,
 *             .outputs = {"coord.stop.p50", "coord.stop.p99"},
 *             .params = {{.key = "waiters", .num = 4}, {.key = "note", .str = "futex"}},
 *             .run = stop_latency,
 *         });
 *     }
 *
 * then declare bench_register_coord() below, add it to the group table in
 * qflow-bench.c, and list the file in perf/meson.build.
 *
 * Rules for run functions: a repetition is self-contained (create, run,
 * destroy); it never asserts on speed; a correctness failure (lost or
 * duplicated items) calls bench_fail(), which ends the program. A run that
 * had to stop at a time budget still reports a value computed from what it
 * did and sets r->truncated; the report marks it.
 *
 * Everything here is called from the main thread only, before or between
 * runs; run functions may start and join their own threads.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_ITEMS_PER_S "items/s"
#define BENCH_MB_PER_S "MB/s" /* payload bytes / 10^6 per second: higher is better */
#define BENCH_NS "ns"
#define BENCH_BYTES "bytes"
#define BENCH_ALLOCS_PER_ITEM "allocs/item"
#define BENCH_ITEMS "items" /* a count of work done: higher is better */
#define BENCH_RATIO "ratio" /* a spread such as max / median: lower is better */
#define BENCH_COUNT "count" /* a count of failures such as starved runners: lower */

#define BENCH_MAX_PARAMS 8
#define BENCH_MAX_OUTPUTS 4

/* One parameter: a string when .str is non-NULL, else the number .num.
 * A list ends at the first entry whose key is NULL. */
typedef struct bench_param {
    const char *key;
    const char *str;
    double num;
} bench_param;

struct bench_case;

/* One repetition: inputs set by the harness, outputs set by the run. */
typedef struct bench_rep {
    bool quick;                       /* --quick: keep the whole run < 60 s */
    unsigned rep;                     /* 0 .. reps-1 */
    unsigned reps;                    /* --reps */
    void *arg;                        /* the case's .arg */
    const struct bench_case *bc;      /* the case being run */
    double budget_scale;              /* --budget-scale: times every time budget */
    double values[BENCH_MAX_OUTPUTS]; /* out: one per output */
    bool truncated;                   /* out: stopped at a time budget */
} bench_rep;

typedef void (*bench_run_fn)(bench_rep *r);

typedef struct bench_case {
    const char *name;                       /* "queue.tput.p1c1" */
    const char *impl;                       /* "qflow", "mutex_cond", ... */
    const char *unit;                       /* BENCH_ITEMS_PER_S, ... */
    const char *outputs[BENCH_MAX_OUTPUTS]; /* result names; none: .name */
    bench_param params[BENCH_MAX_PARAMS];   /* shown and written to JSON */
    const char *note;                       /* optional, printed with the table */
    bench_run_fn run;
    void *arg; /* must outlive the program run */
    /* Run the case once, untimed and unrecorded, before its first
     * repetition: for a case whose first pass in a process pays a one-time
     * cost as large as its work (the pipelines' buffers faulted in: see
     * bench_pipeline.h), so that each repetition measures the same thing.
     * Say so in the case's params ("warmup") so the table shows it. */
    bool warm_up;
} bench_case;

/**
 * bench_register() - add a case. The struct is copied; the strings and
 * .arg it points to must stay valid (string literals, static storage).
 * Registration order is run order and table order (register qflow first).
 */
void bench_register(const bench_case *c);

/**
 * bench_skip_peer() - say that the baseline `impl` is absent from this run
 * and why (its package was not installed when qflow-bench was built, say),
 * instead of registering its cases. The run prints it on its first lines
 * and the results file records it (build.skipped_peers), so a table or a
 * file without that peer's rows is never mistaken for one where it lost.
 * Once per impl (a repeat is ignored); string literals.
 */
void bench_skip_peer(const char *impl, const char *why);

/**
 * bench_workers() - the worker count to give every qflow runtime a benchmark
 * makes (qf_runtime_options.workers): qflow-bench's --workers N, or -1 (one
 * worker per CPU, the runtime's default) without it. The Go peer runs with
 * GOMAXPROCS = N then, so both runtimes get the same number of CPUs' worth
 * of schedulers. Any thread; fixed before the first case runs.
 */
int bench_workers(void);

/** bench_now_ns() - CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t bench_now_ns(void);

/** bench_fail() - report a correctness failure and exit with status 2. */
_Noreturn void bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** bench_scale() - pick the work size for this mode. */
static inline uint64_t bench_scale(const bench_rep *r, uint64_t quick, uint64_t full)
{
    return r->quick ? quick : full;
}

/** bench_budget_ns() - a repetition's time budget: quick_s or full_s
 *  seconds by mode, times --budget-scale (a gate on a loaded machine raises
 *  it so that no repetition is cut and left unjudged). */
static inline uint64_t bench_budget_ns(const bench_rep *r, double quick_s, double full_s)
{
    return (uint64_t)((r->quick ? quick_s : full_s) * r->budget_scale * 1e9);
}

/* Groups: one bench_register_<group>() per bench_<group>.c. */
void bench_register_queue(void);
void bench_register_pipeline(void);
void bench_register_pipeline_tfrecord(void);
void bench_register_coord(void);
void bench_register_runners(void);
void bench_register_task(void);
void bench_register_task_tput(void);
void bench_register_kinds(void);
void bench_register_fair(void);
void bench_register_nats(void); /* only with QF_HAVE_NATS (bench_nats.c) */
void bench_register_serve(void);
void bench_register_serve_adaptive(void); /* issue 30 */

#endif
