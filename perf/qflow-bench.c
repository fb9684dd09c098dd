/* qflow-bench - qflow's benchmark program: runs the registered benchmark
 * cases (bench.h), prints a table per benchmark with qflow next to each
 * baseline, and optionally writes JSON, compares with an earlier run
 * (compare.c: a regression gate) and draws charts. Exit status: 0; 1 when
 * --compare judged a qflow result worse; 2 on a usage error, a --filter
 * that matches nothing, or a failed check; 3 when --compare could judge
 * too few rows. */
#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_run.h"
#include "confirm.h"

/* Every group of benchmarks; add yours here (see bench.h). */
static void (*const groups[])(void) = {
    bench_register_queue,          bench_register_pipeline, bench_register_pipeline_tfrecord,
    bench_register_coord,          bench_register_runners,  bench_register_task,
    bench_register_task_tput,      bench_register_kinds,    bench_register_fair,
    bench_register_serve,
#ifdef QF_HAVE_NATS
    bench_register_nats,
#endif
    bench_register_serve_adaptive, /* issue 30 */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: qflow-bench [options]\n"
               "  --quick            small work sizes: a few minutes at most on 2 cores\n"
               "                     (default: full sizes, a few minutes)\n"
               "  --filter REGEX     run only cases whose \"bench/impl\" matches the POSIX\n"
               "                     extended REGEX (e.g. 'tput.p1c1', '/qflow$')\n"
               "  --reps N           repetitions per case (default 5): median, min, max\n"
               "  --json FILE        write the results as JSON to FILE\n"
               "  --compare OLD.json after the run, judge qflow against OLD.json by its ratios to\n"
               "                     the baselines of each run (a rank test over the\n"
               "                     repetitions) and exit 1 when a qflow result is worse by\n"
               "                     more than the threshold; noise larger than the threshold\n"
               "                     is reported as inconclusive, never as worse\n"
               "  --threshold PCT    threshold of --compare, e.g. 10%% (default 10%%)\n"
               "  --plot DIR         write PNG charts to DIR (needs gnuplot)\n"
               "  --list             list the cases (after --filter) and exit\n"
               "  --budget-scale F   multiply every repetition's time budget by F (1..1000):\n"
               "                     on a loaded machine, so that no repetition is cut short\n"
               "                     (a cut one is never judged by --compare)\n"
               "  --workers N        every qflow runtime the benchmarks make gets N workers\n"
               "                     (1..1024; default one per CPU), and the Go peer\n"
               "                     GOMAXPROCS=N: both runtimes scheduled on N CPUs' worth\n"
               "                     of threads (recorded in the results as a test knob)\n"
               "  --fixed-budget     never run a repetition cut by its time budget again (by\n"
               "                     default it runs again with 4x, then 16x, the budget)\n"
               "  --report DIR       with --compare: DIR/index.html, a self-contained page with\n"
               "                     every row's old and new repetitions side by side\n"
               "  --min-judged PCT   with --compare: exit 3 when fewer than PCT of the qflow\n"
               "                     rows could be judged (default 80%%)\n"
               "  --no-confirm       with --compare: fail on the first look (by default the\n"
               "                     WORSE rows run again, and fail only when both looks\n"
               "                     together are WORSE again); a WORSE family fails only\n"
               "                     with a sign test over its rows at p < 0.01\n"
               "  --base-bin OLD     with --compare: OLD is the qflow-bench of the build\n"
               "                     OLD.json came from; a WORSE row is confirmed by running\n"
               "                     OLD beside this build, turn about, and fails only when\n"
               "                     this build is worse than OLD measured now too (OLD runs\n"
               "                     without QFLOW_BENCH_SLOWDOWN); with it, qflow's own CPU\n"
               "                     time per unit of work can make a row WORSE too\n"
               "  --from NEW.json    run nothing: take the results from NEW.json (with\n"
               "                     --compare: compare two files, e.g. a CI's artifacts)\n"
               "  --help             this text\n"
               "Exit status: 0; 1 --compare found a qflow result worse; 2 usage error, a\n"
               "--filter that matches nothing, or a failed check; 3 --compare could judge too\n"
               "few rows (--min-judged).\n"
               "Test knob: QFLOW_BENCH_SLOWDOWN=F in the environment makes every qflow queue\n"
               "operation of the benchmarks take F times as long (to test the gate; recorded in\n"
               "the JSON and warned about).\n");
}

/* Lists the cases that pass the filter; returns how many. */
static size_t list_cases(const regex_t *filter)
{
    size_t listed = 0;
    printf("%-22s %-14s %-12s %s\n", "bench", "impl", "unit", "params");
    for (size_t i = 0; i < bench_case_count(); i++) {
        const bench_case *c = bench_case_at(i);
        const char *names[BENCH_MAX_OUTPUTS];
        unsigned n = bench_case_outputs(c, names);
        for (unsigned k = 0; k < n; k++) {
            if (!bench_filter_matches(filter, names[k], c->impl))
                continue;
            listed++;
            printf("%-22s %-14s %-12s", names[k], c->impl, c->unit);
            for (int p = 0; p < BENCH_MAX_PARAMS && c->params[p].key; p++) {
                if (c->params[p].str)
                    printf(" %s=%s", c->params[p].key, c->params[p].str);
                else
                    printf(" %s=%g", c->params[p].key, c->params[p].num);
            }
            printf("\n");
        }
    }
    return listed;
}

static double parse_threshold(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || (*end && strcmp(end, "%") != 0) || v < 0) {
        fprintf(stderr, "qflow-bench: bad --threshold '%s' (want e.g. 10%%)\n", s);
        exit(2);
    }
    return v;
}

/* A whole number from 1 to hi for option `opt`, or exit 2 saying so. */
static long parse_count(const char *opt, const char *s, long hi)
{
    char *end;
    long n = strtol(s, &end, 10);
    if (end == s || *end || n < 1 || n > hi) {
        fprintf(stderr, "qflow-bench: bad %s '%s' (1..%ld)\n", opt, s, hi);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    enum {
        OPT_QUICK = 1,
        OPT_FILTER,
        OPT_REPS,
        OPT_JSON,
        OPT_COMPARE,
        OPT_THRESHOLD,
        OPT_PLOT,
        OPT_LIST,
        OPT_FROM,
        OPT_BUDGET_SCALE,
        OPT_FIXED_BUDGET,
        OPT_WORKERS,
        OPT_REPORT,
        OPT_MIN_JUDGED,
        OPT_NO_CONFIRM,
        OPT_BASE_BIN,
        OPT_HELP
    };
    static const struct option longopts[] = {
        {"quick", no_argument, NULL, OPT_QUICK},
        {"filter", required_argument, NULL, OPT_FILTER},
        {"reps", required_argument, NULL, OPT_REPS},
        {"json", required_argument, NULL, OPT_JSON},
        {"compare", required_argument, NULL, OPT_COMPARE},
        {"threshold", required_argument, NULL, OPT_THRESHOLD},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"list", no_argument, NULL, OPT_LIST},
        {"from", required_argument, NULL, OPT_FROM},
        {"budget-scale", required_argument, NULL, OPT_BUDGET_SCALE},
        {"fixed-budget", no_argument, NULL, OPT_FIXED_BUDGET},
        {"workers", required_argument, NULL, OPT_WORKERS},
        {"report", required_argument, NULL, OPT_REPORT},
        {"min-judged", required_argument, NULL, OPT_MIN_JUDGED},
        {"no-confirm", no_argument, NULL, OPT_NO_CONFIRM},
        {"base-bin", required_argument, NULL, OPT_BASE_BIN},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    bench_options o = {
        .quick = false, .reps = 5, .filter = NULL, .budget_scale = 1, .grow_budget = true};
    const char *filter_src = NULL, *json_path = NULL, *compare_path = NULL, *plot_dir = NULL,
               *from_path = NULL, *report_dir = NULL, *base_bin = NULL;
    double threshold = 10, min_judged = 80;
    bool list = false, confirm = true;
    int workers = -1; /* --workers: -1, one per CPU */
    regex_t filter;

    int opt;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case OPT_QUICK:
            o.quick = true;
            break;
        case OPT_FILTER:
            filter_src = optarg;
            break;
        case OPT_REPS:
            o.reps = (unsigned)parse_count("--reps", optarg, 1000);
            break;
        case OPT_JSON:
            json_path = optarg;
            break;
        case OPT_COMPARE:
            compare_path = optarg;
            break;
        case OPT_THRESHOLD:
            threshold = parse_threshold(optarg);
            break;
        case OPT_PLOT:
            plot_dir = optarg;
            break;
        case OPT_FROM:
            from_path = optarg;
            break;
        case OPT_BUDGET_SCALE: {
            char *end;
            double f = strtod(optarg, &end);
            if (end == optarg || *end || !(f >= 1 && f <= 1000)) {
                fprintf(stderr, "qflow-bench: bad --budget-scale '%s' (1..1000)\n", optarg);
                return 2;
            }
            o.budget_scale = f;
            break;
        }
        case OPT_FIXED_BUDGET:
            o.grow_budget = false;
            break;
        case OPT_WORKERS:
            workers = (int)parse_count("--workers", optarg, 1024);
            break;
        case OPT_REPORT:
            report_dir = optarg;
            break;
        case OPT_MIN_JUDGED:
            min_judged = parse_threshold(optarg);
            if (min_judged > 100) {
                fprintf(stderr, "qflow-bench: bad --min-judged '%s' (0..100%%)\n", optarg);
                return 2;
            }
            break;
        case OPT_NO_CONFIRM:
            confirm = false;
            break;
        case OPT_BASE_BIN:
            base_bin = optarg;
            break;
        case OPT_LIST:
            list = true;
            break;
        case OPT_HELP:
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (report_dir && !compare_path) {
        fprintf(stderr, "qflow-bench: --report needs --compare OLD.json\n");
        return 2;
    }
    if (base_bin && (!compare_path || from_path || !confirm)) {
        fprintf(stderr, "qflow-bench: --base-bin needs --compare OLD.json, and runs benchmarks "
                        "(not with --from or --no-confirm)\n");
        return 2;
    }
    if (workers > 0 && from_path) {
        fprintf(stderr, "qflow-bench: --workers sets how benchmarks run; --from runs none\n");
        return 2;
    }
    if (base_bin && access(base_bin, X_OK) != 0) {
        fprintf(stderr, "qflow-bench: --base-bin '%s': not an executable file\n", base_bin);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "qflow-bench: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (filter_src) {
        int err = regcomp(&filter, filter_src, REG_EXTENDED | REG_NOSUB);
        if (err) {
            char msg[256];
            regerror(err, &filter, msg, sizeof(msg));
            fprintf(stderr, "qflow-bench: bad --filter '%s': %s\n", filter_src, msg);
            return 2;
        }
        o.filter = &filter;
    }

    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
        groups[i]();
    if (list) {
        size_t listed = list_cases(o.filter);
        if (filter_src)
            regfree(&filter);
        if (listed == 0) {
            fprintf(stderr, "qflow-bench: no case matches the filter '%s'\n", filter_src);
            return 2;
        }
        return 0;
    }

    bench_results old_rs = {0}, new_rs = {0};
    if (compare_path && bench_read_json(compare_path, &old_rs) != 0)
        return 2;

    uint64_t t0 = bench_now_ns();
    size_t got;
    if (from_path) {
        bench_results all = {0};
        if (bench_read_json(from_path, &all) != 0) {
            bench_results_free(&old_rs);
            return 2;
        }
        printf("qflow-bench: results of %s (nothing run)%s%s\n", from_path,
               filter_src ? ", filter " : "", filter_src ? filter_src : "");
        got = bench_results_take(&all, o.filter, &new_rs);
        bench_results_free(&all);
    } else {
        if (workers > 0)
            bench_set_workers(workers);
        bench_meta_of_run(&o, &new_rs.meta);
        printf("qflow-bench: %s mode, %u reps, %ld CPUs online%s%s\n",
               o.quick ? "quick" : "default", o.reps, sysconf(_SC_NPROCESSORS_ONLN),
               filter_src ? ", filter " : "", filter_src ? filter_src : "");
        if (workers > 0)
            printf("qflow-bench: --workers %d: qflow's runtimes have %d worker%s, Go runs with "
                   "GOMAXPROCS=%d\n",
                   workers, workers, workers == 1 ? "" : "s", workers);
        if (strcmp(new_rs.meta.skipped, "none") != 0)
            printf("qflow-bench: peers absent from this run (their rows are missing): %s\n",
                   new_rs.meta.skipped);
        if (bench_slowdown() != 1)
            printf("qflow-bench: TEST KNOB: QFLOW_BENCH_SLOWDOWN=%g: qflow's FIFO path does %gx "
                   "the work\n",
                   bench_slowdown(), bench_slowdown());
        fflush(stdout);
        got = bench_run_all(&o, &new_rs);
    }
    if (got == 0) {
        /* A gate that ran nothing must not pass. */
        fprintf(stderr, "qflow-bench: no case matches the filter '%s' (see --list)\n",
                filter_src ? filter_src : "");
        bench_results_free(&old_rs);
        bench_results_free(&new_rs);
        if (filter_src)
            regfree(&filter);
        return 2;
    }
    bench_print_tables(&new_rs);
    printf("\ntotal time %.1f s\n", (double)(bench_now_ns() - t0) / 1e9);

    int status = 0;
    if (json_path) {
        if (bench_write_json(json_path, &new_rs, &o) != 0)
            status = 2;
        else
            printf("results: %s\n", json_path);
    }
    if (plot_dir && bench_plot(plot_dir, &new_rs) != 0)
        status = 2;
    if (compare_path) {
        bench_cmp_summary sum;
        /* qflow's CPU per unit of work may fail a row only when the old
         * build will be run beside this one before it fails (confirm.c). */
        bool cpu_votes = base_bin && confirm && !from_path;
        bench_compare(compare_path, &old_rs, &new_rs, threshold, o.filter, cpu_votes, &sum);
        if (report_dir) {
            if (bench_html_report(report_dir, compare_path, &old_rs, &new_rs, threshold, &sum) != 0)
                status = 2;
            else
                printf("report: %s/index.html\n", report_dir);
        }
        int worse = sum.worse + sum.worse_families;
        if (worse > 0 && confirm && !from_path)
            worse =
                bench_confirm_worse(&o, compare_path, &old_rs, &new_rs, &sum, threshold, base_bin);
        else if (worse > 0) /* the first look decides */
            worse = sum.worse + bench_families_confirmed(&sum);
        if (worse > 0 && status == 0)
            status = 1;
        /* A gate that could judge little must not pass as if it had
         * judged everything. */
        if (status == 0 && sum.rows > 0 && sum.judged * 100.0 < min_judged * sum.rows) {
            printf("  FAILED: only %d of %d qflow rows could be judged (--min-judged %g%%)\n",
                   sum.judged, sum.rows, min_judged);
            status = 3;
        }
        bench_cmp_summary_free(&sum);
    }

    bench_results_free(&old_rs);
    bench_results_free(&new_rs);
    if (filter_src)
        regfree(&filter);
    return status;
}
