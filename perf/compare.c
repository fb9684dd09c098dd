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
 * A pair whose test says worse is still not WORSE while its new median is
 * no worse than the old run's worst repetition (beyond_worst). "better" is
 * the mirror test. Otherwise "same" when the medians differ by
 * less than the threshold, and "inconclusive" when they differ by more but
 * the repetitions overlap too much to tell (or are too few: with 5 and 5
 * the smallest possible p is 1/252), never "worse".
 *
 * A qflow row is WORSE only when it is worse against every baseline it
 * can be compared with (one with enough repetitions left on both sides
 * to reach ALPHA): a baseline that got faster on its own (a mutex
 * whose threads happened to share a core) makes one ratio drop, a slower
 * qflow makes them all drop. Only WORSE rows make the exit status 1.
 *
 * Nor when a baseline explains the drop: its own median moved by more than
 * BASELINE_MOVED between the two runs, in the direction that makes qflow's
 * ratio worse, and the ratio's change less that move is under
 * BASELINE_MOVED. The machine then changed under the row: on a shared
 * 2-vCPU VM whole runs switch between regimes, and a mutex baseline went
 * from 0.72 to 1.99 M items/s between two runs of one binary while qflow's
 * own figure fell 1.9x, WORSE twice, confirmed, on the same binary. A qflow
 * slowdown leaves the baselines where they were, so this costs the gate
 * only rows it could not judge fairly (and a slowdown of more than
 * BASELINE_MOVED beyond the baseline's move is still caught); such a row
 * is inconclusive, never WORSE, and still counts as judged.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"

#define ALPHA 0.01
/* A baseline whose median moved by more than this factor between the runs
 * (either way) cannot make its row WORSE. */
#define BASELINE_MOVED 2.0
/* Above this many pairs the U distribution is approximated (normal, with
 * a continuity correction) rather than counted. */
#define EXACT_MAX_PAIRS 2500

typedef enum verdict {
    V_SAME,
    V_BETTER,
    V_WORSE,
    V_NOISY,   /* inconclusive: the spread is larger than the change */
    V_WITHIN,  /* inconclusive: the new median is inside the old run's own range */
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
    case V_WITHIN:
        return "inconclusive (within the old run's range)";
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

/* Whether `med` lies beyond the worst of the old repetitions x: below
 * their least when higher is better, above their greatest otherwise.
 *
 * A rank test trusts every repetition alike; a row whose repetitions fall
 * into two regimes (runners.stop_join.100 under 2 x `yes`: most of a run's
 * stops take 0.3-0.5 ms, some a whole time slice, 2-8 ms, whenever a worker
 * or the joiner is descheduled) is WORSE whenever the new run draws more of
 * the slow regime than the old, on the same binary. A row can only tell a
 * change larger than the spread it has shown: when the new median is still
 * a figure the old run itself produced, the change is not the row's to
 * call. A real slowdown of a steady row moves its median past the old
 * extreme; one in a spread-out row is left to its family
 * (compare_family.c). At 5 repetitions against 5 this never changes a
 * verdict (p < ALPHA needs U <= 1 there, the samples all but apart); it
 * does with more (test_compare.py, 9 against 9). */
static bool beyond_worst(const double *x, unsigned nx, double med, bool higher_better)
{
    double worst = x[0];
    for (unsigned i = 1; i < nx; i++)
        worst = higher_better ? (x[i] < worst ? x[i] : worst) : (x[i] > worst ? x[i] : worst);
    return higher_better ? med < worst : med > worst;
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

/* `slack`: a change must also exceed this much (in the units of x and y)
 * to be worse or better (memory figures: see BYTES_FLOOR). */
static judged judge(const double *x, unsigned nx, const double *y, unsigned ny, bool higher_better,
                    double t, double slack)
{
    judged j = {.v = V_NO_DATA,
                .n_old = nx,
                .n_new = ny,
                .p_worse = NAN,
                .change_pct = NAN,
                .rel_pct = NAN};
    if (nx == 0 || ny == 0)
        return j;
    j.old_med = bench_median(x, nx);
    j.new_med = bench_median(y, ny);
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
        lo[i] = x[i] * (1 - t) - slack;
        hi[i] = x[i] * (1 + t) + slack;
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
    if (j.p_worse < ALPHA && !beyond_worst(x, nx, j.new_med, higher_better))
        j.v = V_WITHIN;
    else if (j.p_worse < ALPHA)
        j.v = V_WORSE;
    else if (p_better < ALPHA)
        j.v = V_BETTER;
    else if (p_floor(nx, ny) >= ALPHA)
        j.v = V_FEW;
    else if (fabs(j.new_med - j.old_med) <= t * fabs(j.old_med) + slack)
        j.v = V_SAME;
    else
        j.v = V_NOISY;
    return j;
}

/* Memory figures (peak RSS growth) are the same in every repetition of a
 * run, to the page, yet move between runs of one binary by tens of pages:
 * how much of the parent's freed heap a forked child finds resident depends
 * on what the parent did before (a compare run has read the old file). In
 * CI, runners.rss.100 went from 745 to 815 KiB (+17 pages), a 12% change
 * with p < 0.001 and nothing changed. So a byte figure must also move by
 * more than BYTES_FLOOR to be worse or better. */
#define BYTES_FLOOR (256.0 * 1024)

static double units_floor(const char *unit)
{
    return strcmp(unit, "bytes") == 0 ? BYTES_FLOOR : 0;
}

/* The floor of a qflow figure in `unit` as a part of its ratio to baseline
 * b (the floor over b's median). */
static double floor_as_ratio(const char *unit, const bench_result *b)
{
    double f = units_floor(unit);
    return f > 0 && b->median > 0 ? f / b->median : 0;
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

/* Whether a WORSE pair is explained by its baseline rather than by qflow:
 * the baseline's own median moved more than BASELINE_MOVED between the
 * runs, in the direction that lowers qflow's ratio, and what is left of the
 * ratio's change once that move is taken out is under BASELINE_MOVED.
 * *ret_moved: the baseline's move as a factor >= 1. buf: room for every
 * repetition. */
static bool baseline_explains(const bench_result *old_b, const bench_result *b, const judged *j,
                              bool higher_better, double *buf, double *ret_moved)
{
    unsigned n = figures(old_b, buf);
    double m_old = n ? bench_median(buf, n) : NAN;
    n = figures(b, buf);
    double m_new = n ? bench_median(buf, n) : NAN;
    *ret_moved = 1;
    if (!(m_old > 0) || !(m_new > 0) || !(j->old_med > 0) || !(j->new_med > 0))
        return false;
    double up = m_new / m_old; /* the baseline's figure, new over old */
    *ret_moved = up > 1 ? up : 1 / up;
    /* A higher baseline figure lowers qflow's ratio; for lower-is-better
     * units a lower one raises it. Either makes qflow look worse. */
    bool toward_worse = higher_better ? up > 1 : up < 1;
    double ratio_worse = higher_better ? j->old_med / j->new_med : j->new_med / j->old_med;
    return *ret_moved > BASELINE_MOVED && toward_worse && ratio_worse / *ret_moved < BASELINE_MOVED;
}

/* Units whose own figures, with no baseline, may make a row WORSE: counts
 * that the machine's load does not move. */
static bool own_figures_can_fail(const char *unit)
{
    return strcmp(unit, "allocs/item") == 0 || strcmp(unit, "count") == 0;
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
    w += warn_differ("test knobs", o->knobs, n->knobs,
                     "a deliberately slowed build, or another pool size (--workers)");
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

/* ------------------------------------------------ noise, interval, reps */

static double mad_sd(const double *v, unsigned n, double med)
{
    double *d = malloc((n ? n : 1) * sizeof(double));
    if (!d) {
        perror("qflow-bench");
        exit(2);
    }
    for (unsigned i = 0; i < n; i++)
        d[i] = fabs(v[i] - med);
    double m = n ? bench_median(d, n) : 0;
    free(d);
    return 1.4826 * m; /* the SD of a normal sample with this MAD */
}

static bool all_positive(const double *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!(v[i] > 0))
            return false;
    return true;
}

/* The repetitions per run a rank test needs, at the noise measured in x
 * and y, to call "worse" (p < ALPHA) with 90% power when the figure really
 * moved by twice the threshold: the normal approximation of the U test
 * (the t test's sample size over its efficiency 3/pi) on the logarithms,
 * with the robust (MAD) spread of both runs pooled. Never under 5, the
 * least that can reach ALPHA at all. */
static unsigned reps_needed(const double *x, unsigned nx, const double *y, unsigned ny,
                            bool higher_better, double t)
{
    if (nx < 2 || ny < 2 || !all_positive(x, nx) || !all_positive(y, ny) || t <= 0 || t >= 0.5)
        return 0;
    double *lx = malloc(nx * sizeof(double)), *ly = malloc(ny * sizeof(double));
    if (!lx || !ly) {
        perror("qflow-bench");
        exit(2);
    }
    for (unsigned i = 0; i < nx; i++)
        lx[i] = log(x[i]);
    for (unsigned i = 0; i < ny; i++)
        ly[i] = log(y[i]);
    double sx = mad_sd(lx, nx, bench_median(lx, nx)), sy = mad_sd(ly, ny, bench_median(ly, ny));
    free(lx);
    free(ly);
    double var = (sx * sx * (nx - 1) + sy * sy * (ny - 1)) / (nx + ny - 2);
    /* The margin between the threshold and a change of twice it. */
    double delta = higher_better ? log((1 - t) / (1 - 2 * t)) : log((1 + 2 * t) / (1 + t));
    const double z = 2.3263 + 1.2816; /* one-sided alpha 0.01, power 0.9 */
    double n = 2 * z * z * var / (delta * delta) * (3.14159265358979 / 3);
    if (!(n < 999))
        return 999;
    return n < 5 ? 5 : (unsigned)ceil(n);
}

/* new / old as a Hodges-Lehmann estimate (the median of every y_j / x_i)
 * with its distribution-free 95% interval (the ranks the U distribution
 * gives). NAN when a figure is not positive. */
static void ratio_interval(const double *x, unsigned nx, const double *y, unsigned ny, double *est,
                           double *lo, double *hi)
{
    *est = *lo = *hi = NAN;
    if (nx == 0 || ny == 0 || !all_positive(x, nx) || !all_positive(y, ny))
        return;
    size_t mn = (size_t)nx * ny;
    double *d = malloc(mn * sizeof(double));
    if (!d) {
        perror("qflow-bench");
        exit(2);
    }
    for (unsigned i = 0; i < nx; i++)
        for (unsigned j = 0; j < ny; j++)
            d[(size_t)i * ny + j] = log(y[j]) - log(x[i]);
    qsort(d, mn, sizeof(double), bench_cmp_double);
    *est = exp(mn % 2 ? d[mn / 2] : (d[mn / 2 - 1] + d[mn / 2]) / 2);
    /* c: the largest count with P(U <= c - 1) <= 2.5%; the interval runs
     * from the c-th smallest difference to the c-th largest. */
    size_t c = 0;
    while (c < mn / 2 && u_cdf(nx, ny, (double)c) <= 0.025)
        c++;
    if (c == 0) {
        *lo = exp(d[0]);
        *hi = exp(d[mn - 1]);
    } else {
        *lo = exp(d[c - 1]);
        *hi = exp(d[mn - c]);
    }
    free(d);
}

static void pair_add(bench_cmp_summary *s, const char *bench, const char *against, const char *unit,
                     bool hib, const double *x, unsigned nx, const double *y, unsigned ny,
                     unsigned cut_old, unsigned cut_new, const judged *j, unsigned need)
{
    if (s->npairs == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->pairs = realloc(s->pairs, s->cap * sizeof(*s->pairs));
        if (!s->pairs) {
            perror("qflow-bench");
            exit(2);
        }
    }
    bench_cmp_pair *p = &s->pairs[s->npairs++];
    memset(p, 0, sizeof(*p));
    p->bench = strdup(bench);
    p->against = strdup(against);
    p->unit = strdup(unit);
    p->old_v = malloc((nx ? nx : 1) * sizeof(double));
    p->new_v = malloc((ny ? ny : 1) * sizeof(double));
    if (!p->bench || !p->against || !p->unit || !p->old_v || !p->new_v) {
        perror("qflow-bench");
        exit(2);
    }
    memcpy(p->old_v, x, nx * sizeof(double));
    memcpy(p->new_v, y, ny * sizeof(double));
    p->n_old = nx;
    p->n_new = ny;
    p->cut_old = cut_old;
    p->cut_new = cut_new;
    p->higher_better = hib;
    p->p_worse = j->p_worse;
    p->need = need;
    ratio_interval(x, nx, y, ny, &p->est, &p->lo, &p->hi);
    snprintf(p->verdict, sizeof(p->verdict), "%s", verdict_word(j->v));
}

void bench_cmp_summary_free(bench_cmp_summary *s)
{
    for (size_t i = 0; i < s->npairs; i++) {
        free(s->pairs[i].bench);
        free(s->pairs[i].against);
        free(s->pairs[i].unit);
        free(s->pairs[i].old_v);
        free(s->pairs[i].new_v);
    }
    free(s->pairs);
    memset(s, 0, sizeof(*s));
}

/* A variant of qflow (qflow_int64, qflow_tuple, ...) runs qflow's code: a
 * slower qflow makes it slower too, so as a baseline it would hide the
 * very change the gate looks for. It never votes. */
static bool is_qflow_variant(const char *impl)
{
    return strncmp(impl, "qflow", 5) == 0;
}

/* Whether a baseline's figure in this unit measures the machine, so that
 * qflow's ratio to it takes the machine's speed out. A rate, a time or a
 * count of items in a fixed window does. A "ratio" (runners.fair.*.spread,
 * max / median of per-runner counts) does not: it is the baseline's own
 * fairness, which swings with its scheduler's luck (Go's spread over 10,000
 * goroutines: 30 to 9878 within one run), and qflow's spread divided by it
 * went WORSE, confirmed, on the same binary in CI. Such a row is judged on
 * its own figures, which cannot fail the gate. */
static bool baseline_is_yardstick(const char *unit)
{
    return strcmp(unit, "ratio") != 0;
}

/* Repetitions of a pair left out because either side hit its time budget
 * (the rest of what ratios() leaves out are figures that are missing or a
 * baseline's 0, which no budget would fix). */
static unsigned cut_pair(const bench_result *q, const bench_result *b)
{
    unsigned n = 0;
    for (unsigned i = 0; q->truncated && i < q->nvalues; i++)
        n += q->truncated[i] || (b && b->truncated && i < b->nvalues && b->truncated[i]);
    return n;
}

/* Whether some repetition of r measured 0: a count of rare events
 * (requests expired, runners starved) whose ratio is then undefined. */
static bool some_zero(const bench_result *r)
{
    for (unsigned i = 0; r->values && i < r->nvalues; i++)
        if (r->values[i] == 0)
            return true;
    return false;
}

static unsigned cut_reps(const bench_result *r)
{
    unsigned n = 0;
    for (unsigned i = 0; r->truncated && i < r->nvalues; i++)
        n += r->truncated[i];
    return n;
}

/* ------------------------------------------------------- CPU per unit */

/* The CPU cost of a rate's unit of work, as the pair's unit ("" when the
 * row is not a rate: a time, a count or a ratio has no work to divide by). */
static const char *cpu_unit(const char *unit)
{
    if (strcmp(unit, BENCH_ITEMS_PER_S) == 0)
        return "CPU ns/item";
    if (strcmp(unit, BENCH_MB_PER_S) == 0)
        return "CPU ns/MB";
    return "";
}

/* The CPU nanoseconds per unit of work of each usable repetition of a rate
 * row: the process's CPU seconds per wall second over the rate
 * (bench_run.h). The wall time of a repetition stretches with the other
 * load on a shared machine; its CPU time does not (time spent waiting for
 * a core is not counted), and in a measurement of the knob's 1.3x under
 * two `yes`es the CPU per item of queue.tput.p4c4 was 188-211 ns against
 * 266-272 ns in every run while the rates of the very same repetitions
 * overlapped. A spinning wait costs CPU time too, so a row whose threads
 * spin more in one run than another moves on its own (queue.tput.p1c1:
 * 84 and 184 ns/item in two runs of one binary): a CPU verdict is
 * therefore only taken on a second look against the old build, run live
 * (confirm.c). */
static unsigned cpu_costs(const bench_result *r, double *out)
{
    unsigned n = 0;
    for (unsigned i = 0; r->cpu_util && r->values && i < r->nvalues; i++) {
        double u = r->cpu_util[i], v = r->values[i];
        if (r->truncated[i] || !isfinite(u) || !(u > 0) || !isfinite(v) || !(v > 0))
            continue;
        out[n++] = u / v * 1e9;
    }
    return n;
}

/* The pairs of one row that vote, counted by verdict. */
typedef struct tally {
    int pairs, worse, better, same;
    unsigned need_max; /* the most repetitions any of them needs */
    unsigned have_min; /* the fewest any of them had on one side */
} tally;

static void tally_add(tally *t, verdict v, unsigned need, unsigned nx, unsigned ny)
{
    t->pairs++;
    t->worse += v == V_WORSE;
    t->better += v == V_BETTER;
    t->same += v == V_SAME;
    t->need_max = need > t->need_max ? need : t->need_max;
    unsigned have = nx < ny ? nx : ny;
    t->have_min = t->have_min == 0 || have < t->have_min ? have : t->have_min;
}

/* --------------------------------------------------------------- compare */

#define ROW_FMT "  %-22s %-16s %9s %9s %8s %8s %7s %5s  %s\n"

/* Append `name` to the comma-separated list in buf (cut at its size). */
static void name_list_add(char *buf, size_t cap, const char *name)
{
    size_t l = strlen(buf);
    snprintf(buf + l, cap - l, "%s%s", l ? ", " : "", name);
}

void bench_compare(const char *old_path, const bench_results *old_rs, const bench_results *new_rs,
                   double threshold_pct, const regex_t *filter, bool cpu_votes,
                   bench_cmp_summary *ret)
{
    double t = threshold_pct / 100;
    unsigned cap = max_reps(old_rs, new_rs);
    double *x = malloc(cap * sizeof(double)), *y = malloc(cap * sizeof(double)),
           *z = malloc(cap * sizeof(double));
    if (!x || !y || !z) {
        perror("qflow-bench");
        exit(2);
    }
    memset(ret, 0, sizeof(*ret));
    ret->cpu_votes = cpu_votes;

    printf("\n== compare with %s (threshold %g%%, one-sided Mann-Whitney U, alpha %g)\n", old_path,
           threshold_pct, ALPHA);
    printf("  qflow is judged by its ratio to each baseline of the same run, repetition by\n"
           "  repetition; qflow's own variants (qflow_*) are not baselines; repetitions cut by a\n"
           "  time budget are left out (counted in 'cut'). WORSE only when worse against every\n"
           "  baseline with the new median beyond the old run's worst repetition, and never\n"
           "  when a baseline whose own median moved more than %gx between the runs\n"
           "  explains the drop (the machine changed); only WORSE fails. 'need': repetitions\n"
           "  per run that catch a change of twice the threshold at this row's noise (90%%\n"
           "  of the time). '(own CPU/unit)': qflow's CPU time per unit of work (a rate's\n"
           "  rows); worse there makes the row WORSE when the old build runs beside this one\n"
           "  (--base-bin's second look, and the first look that leads to it).\n",
           BASELINE_MOVED);
    warn_meta(old_path, &old_rs->meta, &new_rs->meta);
    printf(ROW_FMT, "bench", "qflow against", "old", "new", "change", "p(worse)", "reps", "need",
           "verdict");

    for (size_t i = 0; i < new_rs->n; i++) {
        const bench_result *q = &new_rs->v[i];
        if (strcmp(q->impl, "qflow") != 0)
            continue;
        const bench_result *oq = bench_results_find(old_rs, q->bench, "qflow");
        if (!oq) {
            printf(ROW_FMT, q->bench, "", "-", "-", "-", "-", "-", "-", "new");
            continue;
        }
        ret->rows++;
        if (strcmp(oq->unit, q->unit) != 0) {
            printf(ROW_FMT, q->bench, "", "-", "-", "-", "-", "-", "-", "unit changed: not judged");
            ret->unsure++;
            continue;
        }
        bool hib = bench_unit_higher_is_better(q->unit);
        tally tl = {0};
        int n_explained = 0; /* WORSE pairs their baseline's own move explains */
        unsigned cut = 0;
        bool any_baseline = false, baselines_zero = true;
        size_t first_pair = ret->npairs;
        char variants[160] = "", not_yardsticks[160] = "";
        for (size_t k = 0; k < new_rs->n; k++) {
            const bench_result *b = &new_rs->v[k];
            if (b == q || strcmp(b->bench, q->bench) != 0)
                continue;
            if (!baseline_is_yardstick(q->unit)) {
                name_list_add(not_yardsticks, sizeof(not_yardsticks), b->impl);
                continue;
            }
            if (is_qflow_variant(b->impl)) {
                name_list_add(variants, sizeof(variants), b->impl);
                continue;
            }
            any_baseline = true;
            const bench_result *ob = bench_results_find(old_rs, b->bench, b->impl);
            /* A baseline the old run lacks is no reason to judge absolute
             * figures: the row is then not judged. */
            baselines_zero &= ob && (some_zero(ob) || some_zero(b));
            if (!ob)
                continue;
            unsigned nx = ratios(oq, ob, x), ny = ratios(q, b, y);
            unsigned cut_o = cut_pair(oq, ob), cut_n = cut_pair(q, b);
            cut += cut_o + cut_n;
            judged j = judge(x, nx, y, ny, hib, t, floor_as_ratio(q->unit, b));
            unsigned need = reps_needed(x, nx, y, ny, hib, t);
            pair_add(ret, q->bench, b->impl, "ratio", hib, x, nx, y, ny, cut_o, cut_n, &j, need);
            char ov[24], nv[24], chg[16], pw[16], reps[24], nd[16];
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
            snprintf(nd, sizeof(nd), need ? "%u" : "-", need);
            char vw[64];
            double moved = 1;
            bool explained = j.v == V_WORSE && baseline_explains(ob, b, &j, hib, z, &moved);
            n_explained += explained;
            if ((j.v == V_FEW || j.v == V_NO_DATA) && cut_o + cut_n)
                snprintf(vw, sizeof(vw), "not judged: %u+%u reps cut by the time budget", cut_o,
                         cut_n);
            else if (explained)
                snprintf(vw, sizeof(vw), "worse, but %s itself moved %.2gx", b->impl, moved);
            else
                snprintf(vw, sizeof(vw), "%s", verdict_word(j.v));
            snprintf(ret->pairs[ret->npairs - 1].verdict, sizeof(ret->pairs[0].verdict), "%s", vw);
            printf(ROW_FMT, q->bench, b->impl, ov, nv, chg, pw, reps, nd, vw);
            ret->pairs[ret->npairs - 1].change_pct = j.change_pct;
            if (j.v == V_NO_DATA || j.v == V_FEW)
                continue; /* cannot be compared with: does not vote */
            ret->pairs[ret->npairs - 1].votes = true;
            tally_add(&tl, j.v, need, nx, ny);
        }
        if (*variants)
            printf("  %-22s (%s: qflow's own variants, do not vote)\n", q->bench, variants);
        if (*not_yardsticks)
            printf("  %-22s (%s: a %s is not a measure of the machine, does not vote)\n", q->bench,
                   not_yardsticks, q->unit);
        if (!any_baseline || (tl.pairs == 0 && cut == 0 && baselines_zero)) {
            /* No baseline (queue.alloc), or too few ratios to judge because
             * the baselines' figures are 0 in some repetitions (a count of
             * rare events: runners.fair.*.zero, nothing starved, or
             * serve.expired.50k, where the mutex batcher's count was 0 in 4
             * of 5 repetitions and the row was never judged): the raw
             * figures themselves. Only then: an absolute figure moves with the
             * machine's load (serve.expired counts did, 3x, between two
             * runs of one binary), a ratio much less. */
            unsigned nx = figures(oq, x), ny = figures(q, y);
            unsigned cut_o = cut_pair(oq, NULL), cut_n = cut_pair(q, NULL);
            cut += cut_o + cut_n;
            judged j = judge(x, nx, y, ny, hib, t, units_floor(q->unit));
            unsigned need = reps_needed(x, nx, y, ny, hib, t);
            /* A time or a rate with nothing of the same run to hold it
             * against moves with the machine's load (serve.answer.50k.p99
             * rose 28% on both looks of one binary compared with itself,
             * in CI): it may say worse, but cannot fail the gate. Counts
             * that do not depend on the load (allocations per element,
             * runners that starved) still can. */
            bool load_bound = j.v == V_WORSE && !own_figures_can_fail(q->unit);
            if (load_bound)
                j.v = V_NOISY;
            pair_add(ret, q->bench, "(own figures)", q->unit, hib, x, nx, y, ny, cut_o, cut_n, &j,
                     need);
            char ov[24], nv[24], chg[16], pw[16], reps[16], nd[16];
            bench_format_value(ov, sizeof(ov), j.old_med, q->unit);
            bench_format_value(nv, sizeof(nv), j.new_med, q->unit);
            if (j.v == V_NO_DATA)
                snprintf(ov, sizeof(ov), "-"), snprintf(nv, sizeof(nv), "-");
            fmt_change(chg, sizeof(chg), &j);
            fmt_p(pw, sizeof(pw), j.p_worse);
            snprintf(reps, sizeof(reps), "%u/%u", nx, ny);
            snprintf(nd, sizeof(nd), need ? "%u" : "-", need);
            printf(ROW_FMT, q->bench, "(own figures)", ov, nv, chg, pw, reps, nd,
                   load_bound ? "worse, but an absolute figure (moves with load)"
                              : verdict_word(j.v));
            if (j.v != V_NO_DATA && j.v != V_FEW)
                tally_add(&tl, j.v, need, nx, ny); /* no baseline voted */
        }
        /* qflow's own CPU per unit of work (above): a pair of its own, which
         * does not vote with the baselines; WORSE on it makes the row WORSE. */
        verdict cpu_v = V_NO_DATA;
        const char *cu = cpu_unit(q->unit);
        if (*cu && oq->cpu_util && q->cpu_util) {
            unsigned nx = cpu_costs(oq, x), ny = cpu_costs(q, y);
            judged j = judge(x, nx, y, ny, false, t, 0);
            unsigned need = reps_needed(x, nx, y, ny, false, t);
            pair_add(ret, q->bench, "(own CPU/unit)", cu, false, x, nx, y, ny, cut_reps(oq),
                     cut_reps(q), &j, need);
            ret->pairs[ret->npairs - 1].change_pct = j.change_pct;
            ret->pairs[ret->npairs - 1].cpu = j.v != V_NO_DATA && j.v != V_FEW;
            char ov[24], nv[24], chg[16], pw[16], reps[16], nd[16];
            snprintf(ov, sizeof(ov), j.v == V_NO_DATA ? "-" : "%.4g", j.old_med);
            snprintf(nv, sizeof(nv), j.v == V_NO_DATA ? "-" : "%.4g", j.new_med);
            fmt_change(chg, sizeof(chg), &j);
            fmt_p(pw, sizeof(pw), j.p_worse);
            snprintf(reps, sizeof(reps), "%u/%u", nx, ny);
            snprintf(nd, sizeof(nd), need ? "%u" : "-", need);
            bool counts = j.v != V_WORSE || cpu_votes;
            const char *vw =
                counts ? verdict_word(j.v) : "worse, counted only against a live old build";
            snprintf(ret->pairs[ret->npairs - 1].verdict, sizeof(ret->pairs[0].verdict), "%s", vw);
            printf(ROW_FMT, q->bench, "(own CPU/unit)", ov, nv, chg, pw, reps, nd, vw);
            cpu_v = counts ? j.v : V_NOISY;
            /* No baseline could judge the row (queue.tput.spsc under load:
             * its spinning baseline is cut every time): its CPU figure does. */
            if (cpu_votes && tl.pairs == 0 && j.v != V_NO_DATA && j.v != V_FEW)
                tally_add(&tl, j.v, need, nx, ny);
        }
        char overall[160];
        if (cpu_v == V_WORSE) {
            /* Counted as judged and WORSE whatever the baselines said. */
            snprintf(overall, sizeof(overall), "WORSE in CPU per unit of work (%s)", cu);
            ret->judged++;
            ret->worse++;
        } else if (tl.pairs == 0) {
            if (cut)
                snprintf(overall, sizeof(overall),
                         "NOT JUDGED: %u repetitions cut by the time budget", cut);
            else
                snprintf(overall, sizeof(overall),
                         "NOT JUDGED: too few usable repetitions (or no baseline in both runs)");
            ret->unsure++;
        } else {
            ret->judged++;
            const char *w;
            if (tl.worse == tl.pairs && n_explained > 0) {
                w = "inconclusive: worse, but a baseline moved too (the machine changed)";
                ret->unsure++;
            } else if (tl.worse == tl.pairs) {
                w = "WORSE";
                ret->worse++;
            } else if (tl.better == tl.pairs) {
                w = "better";
                ret->better++;
            } else if (tl.worse > 0) {
                w = "inconclusive: worse against some baselines only";
                ret->unsure++;
            } else if (tl.same + tl.better == tl.pairs) {
                w = "same";
                ret->same++;
            } else {
                w = "inconclusive";
                ret->unsure++;
            }
            if (tl.need_max == 0)
                snprintf(overall, sizeof(overall), "%s", w);
            else if (tl.need_max > tl.have_min)
                snprintf(overall, sizeof(overall), "%s (needs %u reps, had %u)", w, tl.need_max,
                         tl.have_min);
            else
                snprintf(overall, sizeof(overall), "%s (needs %u reps)", w, tl.need_max);
        }
        printf("  %-22s => %s\n", q->bench, overall);
        for (size_t k = first_pair; k < ret->npairs; k++)
            snprintf(ret->pairs[k].row_verdict, sizeof(ret->pairs[k].row_verdict), "%s", overall);
    }

    /* A change too small for any row's noise, in a whole family of rows. */
    bench_compare_families(ret, threshold_pct);

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
        printf("    %-22s %-20s %10s %10s %8s%s\n", b->bench, b->impl, ov, nv, chg,
               cut_reps(b) ? " (cut by the time budget)" : "");
    }
    for (size_t i = 0; i < old_rs->n; i++) {
        const bench_result *o = &old_rs->v[i];
        if (bench_results_find(new_rs, o->bench, o->impl) ||
            !bench_filter_matches(filter, o->bench, o->impl))
            continue;
        printf("    %-22s %-20s not run this time\n", o->bench, o->impl);
    }
    printf("  qflow rows: %d same, %d better, %d inconclusive or not judged, %d WORSE; %d of %d "
           "judged (threshold %g%%); %d famil%s WORSE as a whole\n",
           ret->same, ret->better, ret->unsure, ret->worse, ret->judged, ret->rows, threshold_pct,
           ret->worse_families, ret->worse_families == 1 ? "y" : "ies");
    if (ret->unsure)
        printf("  inconclusive rows are not failures: more --reps (see 'need'), or a quieter "
               "machine, decide them\n");
    free(x);
    free(y);
    free(z);
}
