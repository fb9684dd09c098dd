/* bench_run.h - the harness side of qflow-bench: running registered cases,
 * the results they give, and what is done with them (tables, JSON,
 * comparison, plots). Benchmark authors need only bench.h.
 */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "bench.h"

/* One result: a bench/impl pair summarised over its repetitions. */
typedef struct bench_result {
    char *bench; /* owned */
    char *impl;  /* owned */
    char *unit;  /* owned */
    double median, min, max;
    unsigned reps;
    unsigned truncated_reps; /* repetitions that hit a time budget */
    unsigned regrown_reps;   /* repetitions run again with a larger budget */
    const bench_case *bc;    /* params and note; NULL when read from a file */
    /* Each repetition's raw figure, in run order, and whether it hit its
     * time budget (owned; NULL when read from a file that lacks them).
     * Repetition i of every impl of one bench ran in the same round (see
     * bench_run_all), so values of one index are comparable. */
    double *values;
    bool *truncated;
    unsigned nvalues;
    /* Each repetition's CPU time over its wall time: the whole process's
     * user + system seconds (every thread of it, none of a child process)
     * per second of the repetition, as run_rep() measured them around its
     * last run (owned; NULL when read from a file that lacks them). With a
     * rate it gives CPU seconds per unit of work (compare.c). */
    double *cpu_util;
    /* The one-way core-to-core latency (ns, bench_core_to_core_ns())
     * measured just before each repetition's round (owned; NULL when read
     * from a file that lacks them; NAN where it could not be measured). */
    double *c2c_ns;
} bench_result;

/* What a run was made on and with: compare warns when two differ. Strings
 * are owned ("" when unknown). */
typedef struct bench_meta {
    char *host, *cpu, *arch, *kernel, *compiler;
    double nproc, memory_bytes;
    char *mode; /* "quick" or "default" */
    char *commit, *buildtype, *optimization, *sanitize, *knobs;
    char *skipped;   /* absent baselines: "impl (why); ...", or "none" */
    bool has_values; /* results carry per-repetition values */
} bench_meta;

typedef struct bench_results {
    bench_result *v;
    size_t n, cap;
    bench_meta meta;
} bench_results;

typedef struct bench_options {
    bool quick;
    unsigned reps;
    double budget_scale;   /* --budget-scale (1: as each bench says) */
    bool grow_budget;      /* run a cut repetition again with a 4x, then 16x, budget */
    const regex_t *filter; /* NULL: everything */
} bench_options;

/* Registry (bench.c). */
size_t bench_case_count(void);
/* The peers bench_skip_peer() was told of, as "impl (why); impl (why)" in
 * buf (truncated to len); returns how many. */
size_t bench_skipped_peers(char *buf, size_t len);
const bench_case *bench_case_at(size_t i);
/* The result names of a case (its .outputs, or its .name); returns count. */
unsigned bench_case_outputs(const bench_case *c, const char *ret_names[BENCH_MAX_OUTPUTS]);
/* True when "bench/impl" matches the filter (NULL matches everything). */
bool bench_filter_matches(const regex_t *filter, const char *bench, const char *impl);
/* True for units where a larger value is better (items/s). */
bool bench_unit_higher_is_better(const char *unit);

/* calloc of at least one byte that ends the program (exit 2, with a
 * message) when out of memory (bench_run.c). */
void *bench_xcalloc(size_t n, size_t size);

/* Results (bench_run.c). */
bench_result *bench_results_add(bench_results *rs, const char *bench, const char *impl,
                                const char *unit);
void bench_results_free(bench_results *rs);
const bench_result *bench_results_find(const bench_results *rs, const char *bench,
                                       const char *impl);
/* Move the results of `from` that pass `filter`, and its meta, into `to`
 * (empty); returns how many moved. `from` keeps the rest (free it). */
size_t bench_results_take(bench_results *from, const regex_t *filter, bench_results *to);

/* Run every matching case; progress goes to stderr. The cases of one bench
 * (same name: qflow and its baselines) run interleaved, repetition by
 * repetition, so the ratio of repetition i compares figures taken moments
 * apart under the same load. Returns the number of cases run. */
size_t bench_run_all(const bench_options *o, bench_results *ret);
/* Which call of bench_run_all() this process is in (1 for the first):
 * cases that share one measurement among several (runners, fairness)
 * measure afresh in each call, since a second look (confirm.c) must not
 * be handed the first look's figures again. */
unsigned bench_run_generation(void);
/* The one-way core-to-core latency now, in ns: a line passed back and
 * forth between the first two CPUs this process may use (machine_c2c.c);
 * NAN when it cannot be measured. Main thread only, one at a time. */
double bench_core_to_core_ns(void);
/* Fill rs->meta for this run (machine.c). */
void bench_meta_of_run(const bench_options *o, bench_meta *ret);
void bench_meta_free(bench_meta *m);
/* The test knob of this process: each qflow operation in the benchmarks
 * takes `factor` times as long (impl_qflow.c; QFLOW_BENCH_SLOWDOWN). 1:
 * none. */
double bench_slowdown(void);
/* --workers N (1..1024) for bench_workers(), and GOMAXPROCS=N in the
 * environment the Go peer is started with. Main thread, before any case. */
void bench_set_workers(int n);

/* Terminal tables, one per bench (report.c). */
void bench_print_tables(const bench_results *rs);
/* Format a value with its unit's usual precision ("5.81 M", "412 ns"). */
void bench_format_value(char *buf, size_t len, double v, const char *unit);

/* JSON (results_json.c). Return 0, or -1 with a message on stderr. */
int bench_write_json(const char *path, const bench_results *rs, const bench_options *o);
int bench_read_json(const char *path, bench_results *ret);

/* The "machine" and "build" objects of the results file (machine.c). */
struct json_writer;
void bench_write_machine(struct json_writer *w, const bench_options *o, const bench_meta *m);
void bench_write_build(struct json_writer *w, const bench_meta *m);

/* One pair of a comparison: a qflow row against one baseline (or its own
 * figures), what the report draws. Arrays and strings owned. */
typedef struct bench_cmp_pair {
    char *bench, *against; /* against: a baseline's impl, or "(own figures)" */
    char *unit;            /* "ratio" (qflow / baseline), or the row's unit */
    bool higher_better;
    double *old_v, *new_v; /* the usable repetitions of each run */
    unsigned n_old, n_new;
    unsigned cut_old, cut_new; /* repetitions left out: cut by a time budget */
    double est, lo, hi;        /* new / old: Hodges-Lehmann estimate, 95% interval */
    double p_worse;
    unsigned need;     /* repetitions per run the threshold needs at this noise */
    double change_pct; /* how much worse (+) or better (-) the median ratio is */
    bool votes;        /* a baseline's ratio that counted in the row's verdict */
    bool cpu;          /* qflow's own CPU time per unit of work (compare.c) */
    char verdict[64], row_verdict[160];
} bench_cmp_pair;

/* Families of rows (compare_family.c): at most this many are WORSE as a
 * whole in one comparison (more are counted, not named). */
#define BENCH_FAMILIES_MAX 16

typedef struct bench_cmp_summary {
    int rows, judged, worse, better, same, unsure;
    bool cpu_votes; /* CPU pairs could make rows and families WORSE */
    bench_cmp_pair *pairs;
    size_t npairs, cap;
    /* Families WORSE as a whole (pooled), by name ("queue.tput"), and for
     * each the one-sided sign test's p of its rows' moves (the smaller
     * of its WORSE views'; compare_family.c). */
    int worse_families;
    char family[BENCH_FAMILIES_MAX][48];
    double family_p[BENCH_FAMILIES_MAX];
} bench_cmp_summary;

/* Doubles in ascending order (for qsort), and the median of v[0..n) (the
 * mean of the middle two for an even n; NAN for none), v left as it is. */
int bench_cmp_double(const void *a, const void *b);
double bench_median(const double *v, size_t n);

/* The family of a bench: its name up to the second '.' ("queue.tput" of
 * "queue.tput.p4c4"), into buf. */
void bench_family_of(const char *bench, char *buf, size_t len);
/* After the rows (compare.c): pool the rows of each family and print and
 * record the families that are WORSE as a whole (compare_family.c). */
void bench_compare_families(bench_cmp_summary *s, double threshold_pct);
/* Whether `bench`'s family is among s's WORSE families. */
bool bench_family_is_worse(const bench_cmp_summary *s, const char *bench);
/* Whether `family` is WORSE in s and so many of its rows moved the worse
 * way that a one-sided sign test gives p < 0.01: what a family's deciding
 * look must find to fail a run (confirm.c). */
bool bench_family_is_confirmed(const bench_cmp_summary *s, const char *family);
/* How many of s's named WORSE families are confirmed so, each of the
 * others printed as not a failure: for a look that decides on its own
 * (--from, --no-confirm). Families past BENCH_FAMILIES_MAX, unnamed,
 * cannot be confirmed (as confirm.c cannot look at them again). */
int bench_families_confirmed(const bench_cmp_summary *s);

/* --compare (compare.c): warns when the runs differ in machine, mode or
 * build, prints the table (old results outside `filter` are left out) and
 * fills `ret` (free with bench_cmp_summary_free): rows compared, judged
 * (at least one baseline, or its own figures, with enough whole
 * repetitions on both sides), and the verdicts (see compare.c).
 * cpu_votes: a row worse in qflow's own CPU time per unit of work is
 * WORSE (true when the old build is, or will be, measured live beside
 * this one: confirm.c); else that pair is shown and counts for nothing. */
void bench_compare(const char *old_path, const bench_results *old_rs, const bench_results *new_rs,
                   double threshold_pct, const regex_t *filter, bool cpu_votes,
                   bench_cmp_summary *ret);
void bench_cmp_summary_free(bench_cmp_summary *s);

/* --report DIR (html_report.c): DIR/index.html, one self-contained page
 * (inline SVG and CSS, no script, nothing fetched) with every pair's old
 * and new repetitions side by side, the ratio with its interval and the
 * verdicts. Returns 0, or -1 with a message on stderr. */
int bench_html_report(const char *dir, const char *old_path, const bench_results *old_rs,
                      const bench_results *new_rs, double threshold_pct,
                      const bench_cmp_summary *s);

/* --plot (plot.c): returns 0 when the charts were written or gnuplot is
 * absent (a note is printed), -1 on error. */
int bench_plot(const char *dir, const bench_results *rs);

#endif
