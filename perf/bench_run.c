/* bench_run.c - run the registered cases and summarise the repetitions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
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
        free(rs->v[i].values);
        free(rs->v[i].truncated);
        free(rs->v[i].cpu_util);
        free(rs->v[i].c2c_ns);
    }
    free(rs->v);
    bench_meta_free(&rs->meta);
    memset(rs, 0, sizeof(*rs));
}

void bench_meta_free(bench_meta *m)
{
    char **strs[] = {&m->host,         &m->cpu,      &m->arch,   &m->kernel,
                     &m->compiler,     &m->mode,     &m->commit, &m->buildtype,
                     &m->optimization, &m->sanitize, &m->knobs,  &m->skipped};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
}

const bench_result *bench_results_find(const bench_results *rs, const char *bench, const char *impl)
{
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].bench, bench) == 0 && strcmp(rs->v[i].impl, impl) == 0)
            return &rs->v[i];
    return NULL;
}

size_t bench_results_take(bench_results *from, const regex_t *filter, bench_results *to)
{
    size_t kept = 0, moved = 0;
    for (size_t i = 0; i < from->n; i++) {
        bench_result *r = &from->v[i];
        if (!bench_filter_matches(filter, r->bench, r->impl)) {
            from->v[kept++] = *r;
            continue;
        }
        bench_result *d = bench_results_add(to, r->bench, r->impl, r->unit);
        free(d->bench);
        free(d->impl);
        free(d->unit);
        *d = *r; /* the strings and arrays move */
        moved++;
    }
    from->n = kept;
    to->meta = from->meta;
    memset(&from->meta, 0, sizeof(from->meta));
    return moved;
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A sorted copy of v[0 .. n) (n > 0; the caller frees it): the raw order
 * of the repetitions is kept for the JSON and the compare. */
static double *sorted_copy(const double *v, size_t n)
{
    double *s = malloc(n * sizeof(*s));
    if (!s) {
        perror("qflow-bench");
        exit(2);
    }
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), bench_cmp_double);
    return s;
}

/* The median of sorted s[0 .. n): the mean of the middle two for an even n. */
static double sorted_median(const double *s, size_t n)
{
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double bench_median(const double *v, size_t n)
{
    if (n == 0)
        return NAN;
    double *s = sorted_copy(v, n);
    double m = sorted_median(s, n);
    free(s);
    return m;
}

/* Median, min and max of v[0 .. n) (n > 0). */
static void summarise(const double *v, unsigned n, bench_result *r)
{
    double *s = sorted_copy(v, n);
    r->min = s[0];
    r->max = s[n - 1];
    r->median = sorted_median(s, n);
    r->reps = n;
    free(s);
}

void *bench_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        perror("qflow-bench");
        exit(2);
    }
    return p;
}

/* One selected case while its bench runs: the repetitions so far. */
typedef struct running {
    const bench_case *c;
    size_t idx; /* for progress lines: [idx/total] */
    unsigned nout;
    const char *names[BENCH_MAX_OUTPUTS];
    double *vals;     /* nout x reps */
    bool *trunc;      /* reps */
    double *util;     /* reps: CPU seconds per wall second */
    double *c2c;      /* reps: core-to-core ns before the round */
    uint64_t ns;      /* time spent in its repetitions */
    unsigned regrown; /* repetitions run again with a larger budget */
} running;

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* CPU seconds so far of this process and of its children that have ended
 * and been waited for (a case that measures in a forked child, as
 * runners.tput does, waits for it before it returns). */
static double cpu_now_s(void)
{
    struct timespec ts;
    struct rusage ch;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0 || getrusage(RUSAGE_CHILDREN, &ch) != 0)
        return NAN;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + tv_s(ch.ru_utime) + tv_s(ch.ru_stime);
}

/* One run of the case, with its CPU time over its wall time into *util.
 * On a shared machine a repetition's wall time grows with whatever else
 * runs there; its CPU time much less (time the process waits for a core is
 * not counted, nor, in a guest with a steal clock, time the hypervisor
 * took), so CPU time per unit of work tells a slower qflow from a busier
 * machine where the wall-clock figure cannot (compare.c). The CPU time is
 * the process's and its waited-for children's: a case runs alone in the
 * process, and one that measures in a forked child (runners.tput) or a
 * peer's program (Go's) has its child's counted when it waits for it. */
static void run_timed(const bench_case *c, bench_rep *r, double *util)
{
    double c0 = cpu_now_s();
    uint64_t t0 = bench_now_ns();
    c->run(r);
    uint64_t wall_ns = bench_now_ns() - t0;
    double cpu = cpu_now_s() - c0;
    *util = wall_ns > 0 && isfinite(cpu) ? cpu / ((double)wall_ns / 1e9) : NAN;
}

/* Repetition `rep` of case c as the options set it up. */
static bench_rep rep_of(const bench_options *o, const bench_case *c, unsigned rep)
{
    return (bench_rep){.quick = o->quick,
                       .rep = rep,
                       .reps = o->reps,
                       .arg = c->arg,
                       .bc = c,
                       .budget_scale = o->budget_scale > 0 ? o->budget_scale : 1};
}

static void run_rep(const bench_options *o, running *x, unsigned rep, size_t total, bool tty)
{
    const bench_case *c = x->c;
    if (tty)
        fprintf(stderr, "\r[%zu/%zu] %s/%s rep %u/%u ", x->idx + 1, total, c->name, c->impl,
                rep + 1, o->reps);
    bench_rep r = rep_of(o, c, rep);
    uint64_t t0 = bench_now_ns();
    run_timed(c, &r, &x->util[rep]);
    /* A repetition cut by its budget measured an unknown part of the work
     * and --compare cannot judge it; dropping it quietly let a slowed
     * qflow pass the gate (its slow repetitions were the ones cut). So the
     * budget grows and the repetition runs again, at most twice (x4, x16);
     * one still cut is kept as truncated and counted. Only for qflow and
     * its variants, the figures the gate judges: a baseline whose threads
     * spin (atomic_queue) is cut on a loaded machine however long it gets,
     * and growing its budget cost minutes; its cut repetitions are shown
     * and do not vote. */
    bool mine = strncmp(c->impl, "qflow", 5) == 0;
    for (unsigned grow = 0; r.truncated && mine && grow < 2 && o->grow_budget; grow++) {
        r.budget_scale *= 4;
        r.truncated = false;
        memset(r.values, 0, sizeof(r.values));
        x->regrown++;
        run_timed(c, &r, &x->util[rep]);
    }
    x->ns += bench_now_ns() - t0;
    x->trunc[rep] = r.truncated;
    for (unsigned k = 0; k < x->nout; k++)
        x->vals[k * o->reps + rep] = r.values[k];
}

/* bench_case.warm_up: one run whose figures are dropped. */
static void warm_up(const bench_options *o, const bench_case *c)
{
    bench_rep r = rep_of(o, c, 0);
    c->run(&r);
}

static void finish_case(const bench_options *o, running *x, size_t total, bool tty,
                        bench_results *ret)
{
    const bench_case *c = x->c;
    unsigned truncated = 0;
    for (unsigned rep = 0; rep < o->reps; rep++)
        truncated += x->trunc[rep];
    fprintf(stderr, "%s[%zu/%zu] %s/%s: %u reps in %.1f s", tty ? "\r" : "", x->idx + 1, total,
            c->name, c->impl, o->reps, (double)x->ns / 1e9);
    if (x->regrown)
        fprintf(stderr, " (%u run again with a larger time budget)", x->regrown);
    fprintf(stderr, "%s\n", truncated ? " (time budget hit: cut repetitions are not judged)" : "");
    for (unsigned k = 0; k < x->nout; k++) {
        if (!bench_filter_matches(o->filter, x->names[k], c->impl))
            continue;
        bench_result *r = bench_results_add(ret, x->names[k], c->impl, c->unit);
        summarise(&x->vals[k * o->reps], o->reps, r);
        r->truncated_reps = truncated;
        r->regrown_reps = x->regrown;
        r->bc = c;
        r->nvalues = o->reps;
        r->values = bench_xcalloc(o->reps, sizeof(double));
        r->truncated = bench_xcalloc(o->reps, sizeof(bool));
        memcpy(r->values, &x->vals[k * o->reps], o->reps * sizeof(double));
        memcpy(r->truncated, x->trunc, o->reps * sizeof(bool));
        r->cpu_util = bench_xcalloc(o->reps, sizeof(double));
        memcpy(r->cpu_util, x->util, o->reps * sizeof(double));
        r->c2c_ns = bench_xcalloc(o->reps, sizeof(double));
        memcpy(r->c2c_ns, x->c2c, o->reps * sizeof(double));
    }
    free(x->vals);
    free(x->trunc);
    free(x->util);
    free(x->c2c);
}

static unsigned run_generation;

unsigned bench_run_generation(void)
{
    return run_generation;
}

size_t bench_run_all(const bench_options *o, bench_results *ret)
{
    run_generation++;
    size_t n = bench_case_count(), total = 0;
    const char *names[BENCH_MAX_OUTPUTS];
    bool *selected = bench_xcalloc(n + 1, sizeof(*selected));
    bool *done = bench_xcalloc(n + 1, sizeof(*done));
    for (size_t i = 0; i < n; i++) {
        const bench_case *c = bench_case_at(i);
        unsigned nout = bench_case_outputs(c, names);
        for (unsigned k = 0; k < nout && !selected[i]; k++)
            selected[i] = bench_filter_matches(o->filter, names[k], c->impl);
        total += selected[i];
    }
    bool tty = isatty(STDERR_FILENO);
    running *group = bench_xcalloc(n + 1, sizeof(*group));
    size_t idx = 0;
    /* Benches in registration order; each one's cases interleaved. */
    for (size_t i = 0; i < n; i++) {
        if (!selected[i] || done[i])
            continue;
        size_t g = 0;
        for (size_t j = i; j < n; j++) {
            const bench_case *c = bench_case_at(j);
            if (!selected[j] || done[j] || strcmp(c->name, bench_case_at(i)->name) != 0)
                continue;
            done[j] = true;
            running *x = &group[g++];
            memset(x, 0, sizeof(*x));
            x->c = c;
            x->idx = idx++;
            x->nout = bench_case_outputs(c, x->names);
            x->vals = bench_xcalloc((size_t)x->nout * o->reps, sizeof(double));
            x->trunc = bench_xcalloc(o->reps, sizeof(bool));
            x->util = bench_xcalloc(o->reps, sizeof(double));
            x->c2c = bench_xcalloc(o->reps, sizeof(double));
        }
        for (size_t k = 0; k < g; k++)
            if (group[k].c->warm_up)
                warm_up(o, group[k].c);
        for (unsigned rep = 0; rep < o->reps; rep++) {
            /* The machine's core-to-core latency moves (machine_c2c.c):
             * each round says which one it ran on. */
            double c2c = bench_core_to_core_ns();
            for (size_t k = 0; k < g; k++) {
                group[k].c2c[rep] = c2c;
                run_rep(o, &group[k], rep, total, tty);
            }
        }
        for (size_t k = 0; k < g; k++)
            finish_case(o, &group[k], total, tty, ret);
    }
    free(group);
    free(done);
    free(selected);
    return total;
}
