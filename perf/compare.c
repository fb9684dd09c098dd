/* compare.c - --compare OLD.json: is this qflow slower than the one that
 * made OLD.json? A gate a CI can trust, on a machine it shares.
 *
 * What is compared. Not absolute figures: a shared machine runs 2x slower
 * from one minute to the next, and every implementation with it. qflow is
 * judged by its ratio to each baseline measured in the same run
 * (qflow/baseline, repetition by repetition: the cases of one bench run
 * interleaved, so repetition i of qflow and of a baseline ran moments
 * apart). A bench without baselines (queue.alloc) compares its raw
 * figures. Repetitions that hit their time budget (truncated) are left
 * out: their figure covers an unknown part of the work.
 *
 * How it is judged. The old run's ratios X and the new run's ratios Y are
 * two samples; a one-sided Mann-Whitney U test (exact distribution, which
 * needs no assumption about the shape of the noise) asks whether Y lies
 * below X moved by the threshold: "worse" needs Y < (1 - t) X with
 * p < ALPHA (for units where lower is better, Y > (1 + t) X), so a change
 * smaller than the threshold is never reported however consistent, and a
 * larger one only when the spread of the repetitions cannot explain it.
 * "better" is the mirror test. Otherwise "same" when the medians differ by
 * less than the threshold, and "inconclusive" when they differ by more but
 * the repetitions overlap too much to tell (or are too few: with 5 and 5
 * the smallest possible p is 1/252), never "worse".
 *
 * A qflow row is WORSE only when it is worse against every baseline it
 * can be compared with (one with enough repetitions left on both sides
 * to reach ALPHA): a baseline that got faster on its own (a mutex
 * whose threads happened to share a core) makes one ratio drop, a slower
 * qflow makes them all drop. Only WORSE rows make the exit status 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"

#define ALPHA 0.01
/* Above this many pairs the U distribution is approximated (normal, with
 * a continuity correction) rather than counted. */
#define EXACT_MAX_PAIRS 2500

typedef enum verdict {
    V_SAME,
    V_BETTER,
    V_WORSE,
    V_NOISY,   /* inconclusive: the spread is larger than the change */
    V_FEW,     /* inconclusive: too few usable repetitions to reach ALPHA */
    V_NO_DATA, /* nothing to compare */
} verdict;

static const char *verdict_word(verdict v)
{
    switch (v) {
    case V_SAME:
        return "same";
    case V_BETTER:
        return "better";
    case V_WORSE:
        return "worse";
    case V_NOISY:
        return "inconclusive (noise > threshold)";
    case V_FEW:
        return "inconclusive (too few reps)";
    default:
        return "inconclusive (no repetitions)";
    }
}

/* -------------------------------------------------------- Mann-Whitney U */

/* P(U <= u) for U = #{(a, b): a > b} of two independent samples of sizes m
 * and n from one distribution. The counts of U are the coefficients of the
 * Gaussian binomial [m+n choose m](q) = prod_{i=1..m} (1 - q^(n+i)) /
 * (1 - q^i), built one factor at a time. */
static double u_cdf(unsigned m, unsigned n, double u)
{
    if (u < 0)
        return 0;
    size_t top = (size_t)m * n;
    if (u >= (double)top)
        return 1;
    if (top > EXACT_MAX_PAIRS) {
        double mu = top / 2.0, sd = sqrt((double)m * n * (m + n + 1) / 12.0);
        return 0.5 * erfc(-((u + 0.5) - mu) / (sd * sqrt(2.0)));
    }
    double *c = calloc(top + 1, sizeof(double));
    if (!c) {
        perror("qflow-bench");
        exit(2);
    }
    c[0] = 1;
    for (unsigned i = 1; i <= m; i++) {
        /* times (1 - q^(n+i)) */
        for (size_t k = top; k >= n + i && k <= top; k--)
            c[k] -= c[k - (n + i)];
        /* divided by (1 - q^i): times 1 + q^i + q^2i + ... */
        for (size_t k = i; k <= top; k++)
            c[k] += c[k - i];
    }
    double total = 0, below = 0;
    for (size_t k = 0; k <= top; k++) {
        total += c[k];
        if ((double)k <= u)
            below += c[k];
    }
    free(c);
    return below / total;
}

/* p-value of "a tends to lie below b" (one-sided): small when most pairs
 * have a < b. Ties count half. */
static double p_below(const double *a, unsigned na, const double *b, unsigned nb)
{
    double u = 0;
    for (unsigned i = 0; i < na; i++)
        for (unsigned j = 0; j < nb; j++)
            u += a[i] > b[j] ? 1 : a[i] == b[j] ? 0.5 : 0;
    /* A half-integer U (ties) is rounded up: the conservative side. */
    return u_cdf(na, nb, ceil(u));
}

/* The smallest p any outcome can give with these sizes: 1 / C(m+n, m). */
static double p_floor(unsigned m, unsigned n)
{
    double c = 1;
    for (unsigned i = 1; i <= m; i++)
        c = c * (n + i) / i;
    return 1 / c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, unsigned n)
{
    double *s = malloc(n * sizeof(*s));
    if (!s) {
        perror("qflow-bench");
        exit(2);
    }
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

/* One comparison of two samples (ratios, or raw figures). */
typedef struct judged {
    verdict v;
    double old_med, new_med;
    double change_pct; /* how much worse (+) or better (-) new is */
    double rel_pct;    /* (new - old) / old of the medians */
    double p_worse;
    unsigned n_old, n_new;
} judged;

static judged judge(const double *x, unsigned nx, const double *y, unsigned ny, bool higher_better,
                    double t)
{
    judged j = {.v = V_NO_DATA,
                .n_old = nx,
                .n_new = ny,
                .p_worse = NAN,
                .change_pct = NAN,
                .rel_pct = NAN};
    if (nx == 0 || ny == 0)
        return j;
    j.old_med = median(x, nx);
    j.new_med = median(y, ny);
    if (j.old_med != 0)
        j.rel_pct = (j.new_med - j.old_med) / fabs(j.old_med) * 100;
    else
        j.rel_pct = j.new_med == 0 ? 0 : j.new_med > 0 ? INFINITY : -INFINITY;
    j.change_pct = higher_better ? -j.rel_pct : j.rel_pct;
    double *lo = malloc(nx * sizeof(double)), *hi = malloc(nx * sizeof(double));
    if (!lo || !hi) {
        perror("qflow-bench");
        exit(2);
    }
    for (unsigned i = 0; i < nx; i++) {
        lo[i] = x[i] * (1 - t);
        hi[i] = x[i] * (1 + t);
    }
    double p_better;
    if (higher_better) {
        j.p_worse = p_below(y, ny, lo, nx); /* y < (1 - t) x */
        p_better = p_below(hi, nx, y, ny);  /* (1 + t) x < y */
    } else {
        j.p_worse = p_below(hi, nx, y, ny); /* (1 + t) x < y */
        p_better = p_below(y, ny, lo, nx);  /* y < (1 - t) x */
    }
    free(lo);
    free(hi);
    if (j.p_worse < ALPHA)
        j.v = V_WORSE;
    else if (p_better < ALPHA)
        j.v = V_BETTER;
    else if (p_floor(nx, ny) >= ALPHA)
        j.v = V_FEW;
    else if (fabs(j.change_pct) <= t * 100)
        j.v = V_SAME;
    else
        j.v = V_NOISY;
    return j;
}

/* The usable ratios q/b of one run: repetitions where both ran whole. */
static unsigned ratios(const bench_result *q, const bench_result *b, double *out)
{
    unsigned n = 0;
    if (!q->values || !b->values)
        return 0;
    for (unsigned i = 0; i < q->nvalues && i < b->nvalues; i++) {
        double qv = q->values[i], bv = b->values[i];
        if (q->truncated[i] || b->truncated[i] || !isfinite(qv) || !isfinite(bv) || bv == 0)
            continue;
        out[n++] = qv / bv;
    }
    return n;
}

/* The usable raw figures of one result. */
static unsigned figures(const bench_result *r, double *out)
{
    unsigned n = 0;
    for (unsigned i = 0; r->values && i < r->nvalues; i++)
        if (!r->truncated[i] && isfinite(r->values[i]))
            out[n++] = r->values[i];
    return n;
}

static unsigned max_reps(const bench_results *a, const bench_results *b)
{
    unsigned m = 1;
    for (size_t i = 0; i < a->n; i++)
        m = a->v[i].nvalues > m ? a->v[i].nvalues : m;
    for (size_t i = 0; i < b->n; i++)
        m = b->v[i].nvalues > m ? b->v[i].nvalues : m;
    return m;
}

static void fmt_change(char *buf, size_t len, const judged *j)
{
    if (!isfinite(j->rel_pct) || j->v == V_NO_DATA)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%+.1f%%", j->rel_pct);
}

static void fmt_p(char *buf, size_t len, double p)
{
    if (!isfinite(p))
        snprintf(buf, len, "-");
    else if (p < 0.001)
        snprintf(buf, len, "<0.001");
    else
        snprintf(buf, len, "%.3f", p);
}

/* ------------------------------------------------------------ warnings */

static int warn_differ(const char *what, const char *old, const char *now, const char *why)
{
    if (!old || !now || !*old || strcmp(old, now) == 0)
        return 0;
    printf("  warning: %s differs: '%s' in the old file, '%s' now (%s)\n", what, old, now, why);
    return 1;
}

static void warn_meta(const char *old_path, const bench_meta *o, const bench_meta *n)
{
    int w = 0;
    w += warn_differ("host", o->host, n->host, "another machine: ratios move with it");
    w += warn_differ("cpu", o->cpu, n->cpu, "another machine: ratios move with it");
    w += warn_differ("arch", o->arch, n->arch, "another machine");
    if (o->nproc > 0 && o->nproc != n->nproc) {
        printf("  warning: CPUs online differ: %g in the old file, %g now (threads per core "
               "change every ratio)\n",
               o->nproc, n->nproc);
        w++;
    }
    w += warn_differ("mode", o->mode, n->mode, "work sizes differ");
    w += warn_differ("buildtype", o->buildtype, n->buildtype, "another build");
    w += warn_differ("optimization", o->optimization, n->optimization, "another build");
    w += warn_differ("sanitizers", o->sanitize, n->sanitize, "another build");
    w += warn_differ("test knobs", o->knobs, n->knobs, "a deliberately slowed build");
    w += warn_differ("compiler", o->compiler, n->compiler, "another build");
    w += warn_differ("skipped peers", o->skipped, n->skipped,
                     "a qflow row is judged only against baselines both runs have");
    w += warn_differ("kernel", o->kernel, n->kernel, "system calls may cost differently");
    if (o->commit && *o->commit && strcmp(o->commit, n->commit) != 0)
        printf("  comparing commit %s (old) with %s (now)\n", o->commit, n->commit);
    if (!o->has_values) {
        printf("  warning: %s has no per-repetition figures (written by an earlier "
               "qflow-bench): nothing can be judged; run it again with this one\n",
               old_path);
        w++;
    }
    if (w)
        printf("  (warnings do not change the verdicts)\n");
}

/* --------------------------------------------------------------- compare */

int bench_compare(const char *old_path, const bench_results *old_rs, const bench_results *new_rs,
                  double threshold_pct, const regex_t *filter)
{
    double t = threshold_pct / 100;
    unsigned cap = max_reps(old_rs, new_rs);
    double *x = malloc(cap * sizeof(double)), *y = malloc(cap * sizeof(double));
    if (!x || !y) {
        perror("qflow-bench");
        exit(2);
    }
    int worse = 0, same = 0, better = 0, unsure = 0;

    printf("\n== compare with %s (threshold %g%%, one-sided Mann-Whitney U, alpha %g)\n", old_path,
           threshold_pct, ALPHA);
    printf("  qflow is judged by its ratio to each baseline of the same run, repetition by\n"
           "  repetition; repetitions cut by a time budget are left out. WORSE only when worse\n"
           "  against every baseline; only WORSE fails.\n");
    warn_meta(old_path, &old_rs->meta, &new_rs->meta);
    printf("  %-22s %-18s %10s %10s %8s %8s %7s  %s\n", "bench", "qflow against", "old", "new",
           "change", "p(worse)", "reps", "verdict");

    for (size_t i = 0; i < new_rs->n; i++) {
        const bench_result *q = &new_rs->v[i];
        if (strcmp(q->impl, "qflow") != 0)
            continue;
        const bench_result *oq = bench_results_find(old_rs, q->bench, "qflow");
        if (!oq) {
            printf("  %-22s %-18s %10s %10s %8s %8s %7s  %s\n", q->bench, "", "-", "-", "-", "-",
                   "-", "new");
            continue;
        }
        if (strcmp(oq->unit, q->unit) != 0) {
            printf("  %-22s %-18s %10s %10s %8s %8s %7s  %s\n", q->bench, "", "-", "-", "-", "-",
                   "-", "unit changed: not judged");
            unsure++;
            continue;
        }
        bool hib = bench_unit_higher_is_better(q->unit);
        int n_pairs = 0, n_worse = 0, n_better = 0, n_same = 0;
        bool any_baseline = false;
        for (size_t k = 0; k < new_rs->n; k++) {
            const bench_result *b = &new_rs->v[k];
            if (b == q || strcmp(b->bench, q->bench) != 0)
                continue;
            any_baseline = true;
            const bench_result *ob = bench_results_find(old_rs, b->bench, b->impl);
            if (!ob)
                continue;
            unsigned nx = ratios(oq, ob, x), ny = ratios(q, b, y);
            judged j = judge(x, nx, y, ny, hib, t);
            char against[40], ov[24], nv[24], chg[16], pw[16], reps[16];
            snprintf(against, sizeof(against), "%s", b->impl);
            if (j.v == V_NO_DATA) {
                snprintf(ov, sizeof(ov), "-");
                snprintf(nv, sizeof(nv), "-");
            } else {
                snprintf(ov, sizeof(ov), "%.3gx", j.old_med);
                snprintf(nv, sizeof(nv), "%.3gx", j.new_med);
            }
            fmt_change(chg, sizeof(chg), &j);
            fmt_p(pw, sizeof(pw), j.p_worse);
            snprintf(reps, sizeof(reps), "%u/%u", nx, ny);
            printf("  %-22s %-18s %10s %10s %8s %8s %7s  %s\n", q->bench, against, ov, nv, chg, pw,
                   reps, verdict_word(j.v));
            if (j.v == V_NO_DATA || j.v == V_FEW)
                continue; /* cannot be compared with: does not vote */
            n_pairs++;
            n_worse += j.v == V_WORSE;
            n_better += j.v == V_BETTER;
            n_same += j.v == V_SAME;
        }
        if (!any_baseline) {
            /* No baseline (queue.alloc): the raw figures themselves. */
            unsigned nx = figures(oq, x), ny = figures(q, y);
            judged j = judge(x, nx, y, ny, hib, t);
            char ov[24], nv[24], chg[16], pw[16], reps[16];
            bench_format_value(ov, sizeof(ov), j.old_med, q->unit);
            bench_format_value(nv, sizeof(nv), j.new_med, q->unit);
            if (j.v == V_NO_DATA)
                snprintf(ov, sizeof(ov), "-"), snprintf(nv, sizeof(nv), "-");
            fmt_change(chg, sizeof(chg), &j);
            fmt_p(pw, sizeof(pw), j.p_worse);
            snprintf(reps, sizeof(reps), "%u/%u", nx, ny);
            printf("  %-22s %-18s %10s %10s %8s %8s %7s  %s\n", q->bench, "(own figures)", ov, nv,
                   chg, pw, reps, verdict_word(j.v));
            if (j.v != V_NO_DATA && j.v != V_FEW) {
                n_pairs = 1;
                n_worse = j.v == V_WORSE;
                n_better = j.v == V_BETTER;
                n_same = j.v == V_SAME;
            }
        }
        const char *overall;
        if (n_pairs == 0) {
            overall = "inconclusive: nothing to compare with (too few usable repetitions)";
            unsure++;
        } else if (n_worse == n_pairs) {
            overall = "WORSE";
            worse++;
        } else if (n_better == n_pairs) {
            overall = "better";
            better++;
        } else if (n_worse > 0) {
            overall = "inconclusive: worse against some baselines only";
            unsure++;
        } else if (n_same + n_better == n_pairs) {
            overall = "same";
            same++;
        } else {
            overall = "inconclusive";
            unsure++;
        }
        printf("  %-22s => %s\n", q->bench, overall);
    }

    /* Baselines' own figures: a slower machine shows here, not in qflow's
     * ratios. Informational. */
    printf("  baselines, absolute medians (for telling a slower machine from a slower qflow):\n");
    for (size_t i = 0; i < new_rs->n; i++) {
        const bench_result *b = &new_rs->v[i];
        const bench_result *ob = bench_results_find(old_rs, b->bench, b->impl);
        if (strcmp(b->impl, "qflow") == 0 || !ob || strcmp(ob->unit, b->unit) != 0)
            continue;
        char ov[24], nv[24], chg[16] = "-";
        bench_format_value(ov, sizeof(ov), ob->median, ob->unit);
        bench_format_value(nv, sizeof(nv), b->median, b->unit);
        if (ob->median != 0 && isfinite(ob->median) && isfinite(b->median))
            snprintf(chg, sizeof(chg), "%+.1f%%", (b->median - ob->median) / ob->median * 100);
        printf("    %-22s %-16s %10s %10s %8s\n", b->bench, b->impl, ov, nv, chg);
    }
    for (size_t i = 0; i < old_rs->n; i++) {
        const bench_result *o = &old_rs->v[i];
        if (bench_results_find(new_rs, o->bench, o->impl) ||
            !bench_filter_matches(filter, o->bench, o->impl))
            continue;
        printf("    %-22s %-16s not run this time\n", o->bench, o->impl);
    }
    printf("  qflow rows: %d same, %d better, %d inconclusive, %d WORSE (threshold %g%%)\n", same,
           better, unsure, worse, threshold_pct);
    if (unsure)
        printf("  inconclusive rows are not failures: more --reps, or a quieter machine, decide "
               "them\n");
    free(x);
    free(y);
    return worse;
}
