/* plot.c - --plot DIR: PNG charts drawn by gnuplot, when it is installed.
 *
 *   <prefix>.png for every family of items/s benches named <prefix>.pNcM
 *       (queue.tput.p1c1, .p2c2, ...): throughput against threads (N+M),
 *       one line per implementation, min..max as error bars, log scale.
 *   <prefix>.png for every family of ns benches named <prefix>.pNN
 *       (queue.pingpong.p50, .p99): latency percentiles per
 *       implementation, clustered bars, log scale.
 *
 * Next to each chart: the .dat data and the .gp script, so a chart can be
 * redrawn or restyled by hand.
 */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_run.h"

extern char **environ;

#define MAX_SERIES 16
#define MAX_POINTS 16

static bool have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char dir[4096];
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof(dir), "%.*s/gnuplot", (int)n, path);
        if (n > 0 && access(dir, X_OK) == 0)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

static int run_gnuplot(const char *script)
{
    pid_t pid;
    char *argv[] = {"gnuplot", (char *)script, NULL};
    int err = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
    if (err) {
        fprintf(stderr, "qflow-bench: cannot run gnuplot: %s\n", strerror(err));
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "qflow-bench: gnuplot failed on %s\n", script);
        return -1;
    }
    return 0;
}

static void script_header(FILE *f, const char *png, const char *title, const char *ylabel)
{
    fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo size 900,540 noenhanced\n"
               "} else {\n"
               "    set terminal png size 900,540 noenhanced\n"
               "}\n");
    fprintf(f, "set output '%s'\nset title '%s'\nset ylabel '%s'\n", png, title, ylabel);
    fprintf(f, "set logscale y\nset grid ytics\nset key outside right\n"
               "set datafile missing 'NaN'\n");
}

/* "<prefix>.p<N>c<M>" -> prefix length and N+M, or 0. */
static size_t tput_family(const char *bench, int *ret_threads)
{
    const char *dot = strrchr(bench, '.');
    int p, c, end = 0;
    if (!dot || sscanf(dot, ".p%dc%d%n", &p, &c, &end) != 2 || dot[end] != '\0')
        return 0;
    *ret_threads = p + c;
    return (size_t)(dot - bench);
}

/* "<prefix>.p<NN>" -> prefix length, or 0. */
static size_t pct_family(const char *bench, int *ret_pct)
{
    const char *dot = strrchr(bench, '.');
    int pct, end = 0;
    if (!dot || sscanf(dot, ".p%d%n", &pct, &end) != 1 || dot[end] != '\0')
        return 0;
    *ret_pct = pct;
    return (size_t)(dot - bench);
}

typedef struct family {
    char prefix[128];
    const char *impls[MAX_SERIES];
    int nimpl;
    int xs[MAX_POINTS]; /* threads or percentiles, ascending */
    int nx;
} family;

static int index_of_impl(family *f, const char *impl)
{
    for (int i = 0; i < f->nimpl; i++)
        if (strcmp(f->impls[i], impl) == 0)
            return i;
    if (f->nimpl == MAX_SERIES)
        return -1;
    f->impls[f->nimpl] = impl;
    return f->nimpl++;
}

static void add_x(family *f, int x)
{
    for (int i = 0; i < f->nx; i++)
        if (f->xs[i] == x)
            return;
    if (f->nx == MAX_POINTS)
        return;
    int i = f->nx++;
    while (i > 0 && f->xs[i - 1] > x) {
        f->xs[i] = f->xs[i - 1];
        i--;
    }
    f->xs[i] = x;
}

/* Collect the family `prefix` of kind `tput` from the results. */
static void collect(const bench_results *rs, const char *prefix, bool tput, family *f)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->prefix, sizeof(f->prefix), "%s", prefix);
    for (size_t i = 0; i < rs->n; i++) {
        int x;
        size_t n = tput ? tput_family(rs->v[i].bench, &x) : pct_family(rs->v[i].bench, &x);
        if (n && strlen(prefix) == n && strncmp(rs->v[i].bench, prefix, n) == 0) {
            index_of_impl(f, rs->v[i].impl);
            add_x(f, x);
        }
    }
}

static const bench_result *find_point(const bench_results *rs, const family *f, bool tput,
                                      const char *impl, int x)
{
    for (size_t i = 0; i < rs->n; i++) {
        int rx;
        const bench_result *r = &rs->v[i];
        size_t n = tput ? tput_family(r->bench, &rx) : pct_family(r->bench, &rx);
        if (n && rx == x && strlen(f->prefix) == n && strncmp(r->bench, f->prefix, n) == 0 &&
            strcmp(r->impl, impl) == 0)
            return r;
    }
    return NULL;
}

static int plot_family(const char *dir, const bench_results *rs, const family *f, bool tput)
{
    char base[4096], dat[4200], gp[4200], png[4200];
    snprintf(base, sizeof(base), "%s/%s", dir, f->prefix);
    for (char *p = base + strlen(dir) + 1; *p; p++)
        if (*p == '.')
            *p = '_';
    snprintf(dat, sizeof(dat), "%s.dat", base);
    snprintf(gp, sizeof(gp), "%s.gp", base);
    snprintf(png, sizeof(png), "%s.png", base);

    FILE *d = fopen(dat, "w");
    if (!d) {
        fprintf(stderr, "qflow-bench: cannot write %s: %s\n", dat, strerror(errno));
        return -1;
    }
    if (tput) {
        /* One row per thread count: median min max for each impl. */
        fprintf(d, "# threads");
        for (int s = 0; s < f->nimpl; s++)
            fprintf(d, " %s(median min max)", f->impls[s]);
        fprintf(d, "\n");
        for (int x = 0; x < f->nx; x++) {
            fprintf(d, "%d", f->xs[x]);
            for (int s = 0; s < f->nimpl; s++) {
                const bench_result *r = find_point(rs, f, true, f->impls[s], f->xs[x]);
                if (r)
                    fprintf(d, " %g %g %g", r->median, r->min, r->max);
                else
                    fprintf(d, " NaN NaN NaN");
            }
            fprintf(d, "\n");
        }
    } else {
        /* One row per impl: the median of each percentile. */
        fprintf(d, "# impl");
        for (int x = 0; x < f->nx; x++)
            fprintf(d, " p%d", f->xs[x]);
        fprintf(d, "\n");
        for (int s = 0; s < f->nimpl; s++) {
            fprintf(d, "%s", f->impls[s]);
            for (int x = 0; x < f->nx; x++) {
                const bench_result *r = find_point(rs, f, false, f->impls[s], f->xs[x]);
                fprintf(d, " %g", r ? r->median : NAN);
            }
            fprintf(d, "\n");
        }
    }
    fclose(d);

    FILE *g = fopen(gp, "w");
    if (!g) {
        fprintf(stderr, "qflow-bench: cannot write %s: %s\n", gp, strerror(errno));
        return -1;
    }
    char title[256];
    if (tput) {
        snprintf(title, sizeof(title), "%s: throughput against threads (median, min..max)",
                 f->prefix);
        script_header(g, png, title, "items/s");
        fprintf(g, "set xlabel 'threads (producers + consumers)'\nset xtics (");
        for (int x = 0; x < f->nx; x++)
            fprintf(g, "%s%d", x ? ", " : "", f->xs[x]);
        fprintf(g, ")\nset logscale x 2\nset offsets graph 0.05, graph 0.05\nplot ");
        for (int s = 0; s < f->nimpl; s++)
            fprintf(g, "%s'%s' using 1:%d:%d:%d with yerrorlines lw 2 title '%s'",
                    s ? ", \\\n     " : "", dat, 2 + 3 * s, 3 + 3 * s, 4 + 3 * s, f->impls[s]);
        fprintf(g, "\n");
    } else {
        snprintf(title, sizeof(title), "%s: latency percentiles (median over repetitions)",
                 f->prefix);
        script_header(g, png, title, "ns");
        /* Bars grow from the bottom of a log axis: start a decade below
         * the smallest value. */
        double lo = INFINITY;
        for (int s = 0; s < f->nimpl; s++)
            for (int x = 0; x < f->nx; x++) {
                const bench_result *r = find_point(rs, f, false, f->impls[s], f->xs[x]);
                if (r && r->median > 0 && r->median < lo)
                    lo = r->median;
            }
        double bottom = isfinite(lo) ? pow(10, floor(log10(lo))) : 1;
        fprintf(g,
                "set style data histogram\nset style histogram cluster gap 1\n"
                "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset yrange [%g:*]\n"
                "plot ",
                bottom);
        for (int x = 0; x < f->nx; x++)
            fprintf(g, "%s'%s' using %d%s title 'p%d'", x ? ", " : "", dat, 2 + x,
                    x ? "" : ":xtic(1)", f->xs[x]);
        fprintf(g, "\n");
    }
    fclose(g);
    if (run_gnuplot(gp) != 0)
        return -1;
    printf("plot: %s\n", png);
    return 0;
}

int bench_plot(const char *dir, const bench_results *rs)
{
    if (!have_gnuplot()) {
        printf("plot: gnuplot is not installed; no charts written (apt-get install "
               "gnuplot-nox)\n");
        return 0;
    }
    if (strchr(dir, '\'')) {
        fprintf(stderr, "qflow-bench: --plot DIR must not contain a single quote\n");
        return -1;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "qflow-bench: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int status = 0, charts = 0;
    for (size_t i = 0; i < rs->n; i++) {
        for (int tput = 0; tput < 2; tput++) {
            const char *bench = rs->v[i].bench;
            int x;
            size_t n = tput ? tput_family(bench, &x) : pct_family(bench, &x);
            if (!n || strcmp(rs->v[i].unit, tput ? BENCH_ITEMS_PER_S : BENCH_NS) != 0)
                continue;
            /* Draw each family once: at its first result. */
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++) {
                int y;
                size_t m = tput ? tput_family(rs->v[j].bench, &y) : pct_family(rs->v[j].bench, &y);
                seen = m == n && strncmp(rs->v[j].bench, bench, n) == 0;
            }
            if (seen)
                continue;
            char prefix[128];
            snprintf(prefix, sizeof(prefix), "%.*s", (int)n, bench);
            family f;
            collect(rs, prefix, tput, &f);
            if (plot_family(dir, rs, &f, tput) != 0)
                status = -1;
            charts++;
        }
    }
    if (charts == 0)
        printf("plot: no throughput (.pNcM) or percentile (.pNN) results to draw\n");
    return status;
}
