/* bench_run.c - run the registered cases and summarise the repetitions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_run.h"

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        perror("qflow-bench");
        exit(2);
    }
    return d;
}

bench_result *bench_results_add(bench_results *rs, const char *bench, const char *impl,
                                const char *unit)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 32;
        rs->v = realloc(rs->v, rs->cap * sizeof(*rs->v));
        if (!rs->v) {
            perror("qflow-bench");
            exit(2);
        }
    }
    bench_result *r = &rs->v[rs->n++];
    memset(r, 0, sizeof(*r));
    r->bench = xstrdup(bench);
    r->impl = xstrdup(impl);
    r->unit = xstrdup(unit);
    return r;
}

void bench_results_free(bench_results *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->v[i].bench);
        free(rs->v[i].impl);
        free(rs->v[i].unit);
    }
    free(rs->v);
    memset(rs, 0, sizeof(*rs));
}

const bench_result *bench_results_find(const bench_results *rs, const char *bench, const char *impl)
{
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].bench, bench) == 0 && strcmp(rs->v[i].impl, impl) == 0)
            return &rs->v[i];
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median (mean of the middle two for an even count), min and max. */
static void summarise(double *v, unsigned n, bench_result *r)
{
    qsort(v, n, sizeof(*v), cmp_double);
    r->min = v[0];
    r->max = v[n - 1];
    r->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    r->reps = n;
}

static void run_case(const bench_options *o, const bench_case *c, size_t idx, size_t total,
                     bench_results *ret)
{
    const char *names[BENCH_MAX_OUTPUTS];
    unsigned nout = bench_case_outputs(c, names);
    bool wanted[BENCH_MAX_OUTPUTS];
    for (unsigned k = 0; k < nout; k++)
        wanted[k] = bench_filter_matches(o->filter, names[k], c->impl);

    double *vals = calloc((size_t)nout * o->reps, sizeof(*vals));
    if (!vals) {
        perror("qflow-bench");
        exit(2);
    }
    unsigned truncated = 0;
    uint64_t t0 = bench_now_ns();
    bool tty = isatty(STDERR_FILENO);
    for (unsigned rep = 0; rep < o->reps; rep++) {
        if (tty)
            fprintf(stderr, "\r[%zu/%zu] %s/%s rep %u/%u ", idx + 1, total, c->name, c->impl,
                    rep + 1, o->reps);
        bench_rep r = {.quick = o->quick, .rep = rep, .reps = o->reps, .arg = c->arg, .bc = c};
        c->run(&r);
        truncated += r.truncated;
        for (unsigned k = 0; k < nout; k++)
            vals[k * o->reps + rep] = r.values[k];
    }
    fprintf(stderr, "%s[%zu/%zu] %s/%s: %u reps in %.1f s%s\n", tty ? "\r" : "", idx + 1, total,
            c->name, c->impl, o->reps, (double)(bench_now_ns() - t0) / 1e9,
            truncated ? " (time budget hit)" : "");
    for (unsigned k = 0; k < nout; k++) {
        if (!wanted[k])
            continue;
        bench_result *r = bench_results_add(ret, names[k], c->impl, c->unit);
        summarise(&vals[k * o->reps], o->reps, r);
        r->truncated_reps = truncated;
        r->bc = c;
    }
    free(vals);
}

void bench_run_all(const bench_options *o, bench_results *ret)
{
    size_t total = 0;
    const char *names[BENCH_MAX_OUTPUTS];
    bool *selected = calloc(bench_case_count() + 1, sizeof(*selected));
    if (!selected) {
        perror("qflow-bench");
        exit(2);
    }
    for (size_t i = 0; i < bench_case_count(); i++) {
        const bench_case *c = bench_case_at(i);
        unsigned nout = bench_case_outputs(c, names);
        for (unsigned k = 0; k < nout && !selected[i]; k++)
            selected[i] = bench_filter_matches(o->filter, names[k], c->impl);
        total += selected[i];
    }
    size_t idx = 0;
    for (size_t i = 0; i < bench_case_count(); i++)
        if (selected[i])
            run_case(o, bench_case_at(i), idx++, total, ret);
    free(selected);
}
