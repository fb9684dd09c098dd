/* report.c - the terminal report: one table per bench, qflow first, each
 * baseline with the ratio qflow/baseline spelt out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"

void bench_format_value(char *buf, size_t len, double v, const char *unit)
{
    if (!isfinite(v)) {
        snprintf(buf, len, "-");
    } else if (strcmp(unit, BENCH_ITEMS_PER_S) == 0 || strcmp(unit, BENCH_BYTES) == 0) {
        static const char *const si[] = {"", "k", "M", "G", "T"};
        int i = 0;
        while (fabs(v) >= 1000 && i < 4) {
            v /= 1000;
            i++;
        }
        snprintf(buf, len, i ? "%.3g %s" : "%.0f", v, si[i]);
    } else if (strcmp(unit, BENCH_NS) == 0 || strcmp(unit, BENCH_MB_PER_S) == 0) {
        snprintf(buf, len, "%.0f", v);
    } else {
        snprintf(buf, len, "%.3g", v);
    }
}

static bool same_param(const bench_param *a, const bench_param *b)
{
    if (strcmp(a->key, b->key) != 0 || (a->str == NULL) != (b->str == NULL))
        return false;
    return a->str ? strcmp(a->str, b->str) == 0 : a->num == b->num;
}

/* True when `base` has a parameter equal to p. */
static bool base_has(const bench_case *base, const bench_param *p)
{
    for (int i = 0; base && i < BENCH_MAX_PARAMS && base->params[i].key; i++)
        if (same_param(&base->params[i], p))
            return true;
    return false;
}

/* "key=value ..." of c's params, leaving out those equal in `base`. */
static void format_params(char *buf, size_t len, const bench_case *c, const bench_case *base)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; c && i < BENCH_MAX_PARAMS && c->params[i].key && n < len; i++) {
        const bench_param *p = &c->params[i];
        if (base_has(base, p))
            continue;
        if (p->str)
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "", p->key, p->str);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s%s=%g", n ? " " : "", p->key, p->num);
    }
}

/* "4.84  (qflow 4.84x faster)"; ratio is qflow/baseline. */
static void format_ratio(char *buf, size_t len, double q, double b, const char *unit)
{
    if (!(q > 0) || !(b > 0) || !isfinite(q) || !isfinite(b)) {
        snprintf(buf, len, "-");
        return;
    }
    double ratio = q / b;
    bool higher_better = bench_unit_higher_is_better(unit);
    bool qflow_better = higher_better ? ratio >= 1 : ratio <= 1;
    double factor = ratio >= 1 ? ratio : 1 / ratio;
    const char *word;
    if (higher_better)
        word = qflow_better ? "faster" : "slower";
    else
        word = qflow_better ? "lower, better" : "higher, worse";
    snprintf(buf, len, "%-7.3g (qflow %.3gx %s)", ratio, factor, word);
}

/* The core-to-core latency the bench's rounds ran at (machine_c2c.c): the
 * same for every impl of a bench, one figure per round. */
static void print_c2c(const bench_result *r)
{
    if (!r->c2c_ns)
        return;
    double *v = bench_xcalloc(r->nvalues + 1, sizeof(double));
    unsigned n = 0;
    for (unsigned k = 0; k < r->nvalues; k++)
        if (isfinite(r->c2c_ns[k]))
            v[n++] = r->c2c_ns[k];
    if (n == 0) {
        free(v);
        return;
    }
    double lo = v[0], hi = v[0];
    for (unsigned k = 1; k < n; k++) {
        lo = v[k] < lo ? v[k] : lo;
        hi = v[k] > hi ? v[k] : hi;
    }
    printf("  machine: core-to-core latency %.0f ns (median of the rounds; %.0f-%.0f ns)\n",
           bench_median(v, n), lo, hi);
    free(v);
}

/* Rounds whose core-to-core latencies fall into two groups, the lowest of
 * the upper one at least REGIME_GAP times the highest of the lower one,
 * ran on two different machines as far as cache lines go (README,
 * Measured, "Two machines in one"): a median over both says neither. */
#define REGIME_GAP 2.0

/* The lowest latency of the upper group of r's rounds, or 0 when they
 * form one group (or carry no latencies). */
static double regime_split(const bench_result *r)
{
    if (!r->c2c_ns)
        return 0;
    double *v = bench_xcalloc(r->nvalues + 1, sizeof(double));
    unsigned n = 0;
    for (unsigned k = 0; k < r->nvalues; k++)
        if (isfinite(r->c2c_ns[k]) && r->c2c_ns[k] > 0)
            v[n++] = r->c2c_ns[k];
    double split = 0, step = REGIME_GAP;
    qsort(v, n, sizeof(*v), bench_cmp_double);
    for (unsigned k = 1; k < n; k++)
        if (v[k] / v[k - 1] >= step) {
            step = v[k] / v[k - 1];
            split = v[k];
        }
    free(v);
    return split;
}

/* One regime's line: qflow's median over the rounds of the group (upper:
 * latency >= split, else lower) and the median of its per-round ratio to
 * each other impl of the bench (repetition k of every impl ran in round
 * k). */
static void print_regime(const bench_results *rs, const bench_result *q, double split, bool upper)
{
    double *qv = bench_xcalloc(q->nvalues + 1, sizeof(double));
    double *ratio = bench_xcalloc(q->nvalues + 1, sizeof(double));
    double lo = INFINITY, hi = 0;
    unsigned n = 0;
    for (unsigned k = 0; k < q->nvalues; k++) {
        double c = q->c2c_ns[k];
        if (!isfinite(c) || !(c > 0) || (c >= split) != upper || !isfinite(q->values[k]))
            continue;
        qv[n++] = q->values[k];
        lo = c < lo ? c : lo;
        hi = c > hi ? c : hi;
    }
    if (n > 0) {
        char med[32];
        bench_format_value(med, sizeof(med), bench_median(qv, n), q->unit);
        printf("  regime: core-to-core %.0f-%.0f ns, %u round%s: qflow %s", lo, hi, n,
               n == 1 ? "" : "s", med);
        const char *sep = ";";
        for (size_t i = 0; i < rs->n; i++) {
            const bench_result *r = &rs->v[i];
            if (r == q || strcmp(r->bench, q->bench) != 0 || !r->values)
                continue;
            unsigned m = 0;
            for (unsigned k = 0; k < q->nvalues && k < r->nvalues; k++) {
                double c = q->c2c_ns[k];
                if (isfinite(c) && c > 0 && (c >= split) == upper && q->values[k] > 0 &&
                    r->values[k] > 0 && isfinite(q->values[k] / r->values[k]))
                    ratio[m++] = q->values[k] / r->values[k];
            }
            if (m > 0) {
                printf("%s qflow/%s %.3g", sep, r->impl, bench_median(ratio, m));
                sep = ",";
            }
        }
        printf("\n");
    }
    free(qv);
    free(ratio);
}

/* Under a bench whose rounds ran in both regimes: qflow and its ratios in
 * each, as print_table() shows them over all rounds. */
static void print_regimes(const bench_results *rs, const bench_result *q)
{
    double split = q && q->values ? regime_split(q) : 0;
    if (split <= 0)
        return;
    print_regime(rs, q, split, false);
    print_regime(rs, q, split, true);
}

static void print_table(const bench_results *rs, const char *bench)
{
    const bench_result *q = bench_results_find(rs, bench, "qflow");
    const bench_result *first = NULL;
    for (size_t i = 0; i < rs->n && !first; i++)
        if (strcmp(rs->v[i].bench, bench) == 0)
            first = &rs->v[i];
    const bench_result *head = q ? q : first;
    char params[256], head_params[256];
    format_params(head_params, sizeof(head_params), head->bc, NULL);

    printf("\n== %s  [%s, %s is better]  %s\n", bench, head->unit,
           bench_unit_higher_is_better(head->unit) ? "higher" : "lower", head_params);
    bool others = false;
    for (size_t i = 0; i < rs->n; i++)
        others |= strcmp(rs->v[i].bench, bench) == 0 && &rs->v[i] != q;
    printf("  %-20s %10s %10s %10s   %s\n", "impl", "median", "min", "max",
           q && others ? "qflow/impl" : "");
    bool any_truncated = false;
    /* qflow first, then the others in run order. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < rs->n; i++) {
            const bench_result *r = &rs->v[i];
            if (strcmp(r->bench, bench) != 0 || ((pass == 0) != (r == q)))
                continue;
            char med[32], mn[32], mx[32], ratio[64] = "", name[40];
            bench_format_value(med, sizeof(med), r->median, r->unit);
            bench_format_value(mn, sizeof(mn), r->min, r->unit);
            bench_format_value(mx, sizeof(mx), r->max, r->unit);
            if (q && r != q)
                format_ratio(ratio, sizeof(ratio), q->median, r->median, r->unit);
            snprintf(name, sizeof(name), "%s%s", r->impl, r->truncated_reps ? " *" : "");
            any_truncated |= r->truncated_reps > 0;
            format_params(params, sizeof(params), r->bc, head->bc);
            bool own = params[0] != '\0';
            printf("  %-20s %10s %10s %10s   %s%s%s%s\n", name, med, mn, mx, ratio,
                   own ? "  [" : "", own ? params : "", own ? "]" : "");
        }
    }
    for (size_t i = 0; any_truncated && i < rs->n; i++) {
        const bench_result *r = &rs->v[i];
        if (strcmp(r->bench, bench) == 0 && r->truncated_reps)
            printf("  * %s: %u of %u repetitions stopped at their time budget; the value "
                   "covers the work done until then\n",
                   r->impl, r->truncated_reps, r->reps);
    }
    for (size_t i = 0; i < rs->n; i++) {
        const bench_result *r = &rs->v[i];
        if (strcmp(r->bench, bench) == 0 && r->bc && r->bc->note)
            printf("  note (%s): %s\n", r->impl, r->bc->note);
    }
    print_c2c(head);
    print_regimes(rs, q);
}

void bench_print_tables(const bench_results *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(rs->v[j].bench, rs->v[i].bench) == 0;
        if (!seen)
            print_table(rs, rs->v[i].bench);
    }
}
