/* compare_family.c - --compare's second look: families of rows pooled.
 *
 * One row decides on its own repetitions, and on a busy 2-core machine 5
 * repetitions of one row often cannot tell a 1.3x change from the noise
 * (perf/README.md, "need"): each of its pairs is "inconclusive", so no row
 * is WORSE. But a slower qflow is slower in every row its code runs in at
 * once, while the noise of one row has no reason to agree with the next.
 * So the rows of a family (the bench name up to its second '.': the
 * queue.tput rows of every producer and consumer count, say) are also
 * judged together: each row's change is the median of the changes of its
 * voting pairs (qflow's ratio to each baseline, as the rows are judged),
 * and the family is WORSE as a whole when
 *   - it has at least FAMILY_MIN_ROWS such rows (a small family's median
 *     is one or two rows' noise),
 *   - the median of its rows' changes is worse by more than
 *     FAMILY_FACTOR times the threshold, and
 *   - at least 2 in 3 of its rows changed the worse way.
 * Measured on whole --quick runs under 2 x `yes` on 2 cores (perf/README.md,
 * "Families"): the queue.tput family of one binary compared with its own
 * other runs moved +5.4%, -5.8% and +2.5%, with 6, 4 and 6 of its 10 rows
 * the worse way; two runs with the FIFO path slowed 1.3x, compared with
 * three runs of the normal binary, moved +38%, +30%, +29% and +20%, +25%,
 * +22%, with 7 or 8 of 10 rows the worse way, while at most one row of
 * the family was WORSE on its own. A WORSE family is confirmed like a
 * WORSE row: its rows run again and both looks together must find it
 * WORSE again (confirm.c).
 *
 * A family is a trigger on this rule; the look that decides (both live
 * looks beside the old build, or both looks against the saved run:
 * confirm.c; the first look when it decides alone: --from, --no-confirm)
 * must also pass a one-sided sign test, p < FAMILY_ALPHA: so many of its
 * rows the worse way that a family of rows each as likely to move either
 * way would seldom show it (10 of 11, 9 of 9, 10 of 10). 2 in 3 is a lean,
 * not a verdict: a CI run under a load average of 8 failed one binary
 * against itself on it, its queue.tput family +28.4% with 8 of 11 rows the
 * worse way over both live looks (p 0.11). A test of the sizes as well
 * (signed ranks) was tried first; one row that swings the better way by
 * the most (a queue.tput row's CPU per item moves by up to +-100% under
 * load) then outweighs ten the worse way, so the sign test counts rows
 * only. From the logs of whole --quick runs under 2 x `yes`: five live
 * looks of one binary against itself, p 0.17-0.99 in either view; the FIFO
 * path slowed 1.3x, two live looks together, p 0.0005 and 0.0059 (CPU per
 * item; 11 of 11 and 10 of 11 rows). Either view may confirm, so a family
 * judged in both is held to two tests at 0.01 each.
 *
 * Rows judged on their own figures (no baseline) do not count: their
 * figures move with the machine's load.
 *
 * Where the CPU pairs vote (the old build run live beside this one:
 * compare.c), the family is also pooled over them, each row's change its
 * CPU time per unit of work, by the same rule; either view WORSE makes the
 * family WORSE. One row's 5 against 5 repetitions reach p < 0.01 only when
 * they lie all apart, which a live look of the knob's 1.3x often missed
 * (queue.tput rows +17% to +66% in CPU per item, p = 0.016-0.075) while
 * every slowed row of the family moved the same way.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"

#define FAMILY_MIN_ROWS 8
#define FAMILY_FACTOR 1.5
#define FAMILY_ALPHA 0.01

void bench_family_of(const char *bench, char *buf, size_t len)
{
    const char *dot = strchr(bench, '.');
    dot = dot ? strchr(dot + 1, '.') : NULL;
    size_t n = dot ? (size_t)(dot - bench) : strlen(bench);
    snprintf(buf, len, "%.*s", (int)n, bench);
}

/* The rows of s, one change each: rows[i] is the median change of the
 * voting pairs of the i-th row that has any (pairs of a row are adjacent). */
typedef struct row_change {
    const char *bench;
    double change;
} row_change;

static size_t row_changes(const bench_cmp_summary *s, bool cpu_view, row_change *out,
                          double *scratch)
{
    size_t n = 0;
    for (size_t i = 0; i < s->npairs;) {
        size_t j = i, k = 0;
        for (; j < s->npairs && strcmp(s->pairs[j].bench, s->pairs[i].bench) == 0; j++)
            if (cpu_view ? s->pairs[j].cpu : s->pairs[j].votes)
                scratch[k++] = s->pairs[j].change_pct;
        if (k)
            out[n++] = (row_change){s->pairs[i].bench, bench_median(scratch, k)};
        i = j;
    }
    return n;
}

/* The index of WORSE family `fam` among s's named ones, or -1. */
static int family_index(const bench_cmp_summary *s, const char *fam)
{
    int n = s->worse_families < BENCH_FAMILIES_MAX ? s->worse_families : BENCH_FAMILIES_MAX;
    for (int i = 0; i < n; i++)
        if (strcmp(s->family[i], fam) == 0)
            return i;
    return -1;
}

/* One-sided sign test: the probability that at least `worse` of n rows
 * move the worse way when each is as likely to move either way,
 * P(Bin(n, 1/2) >= worse) (each term in logs: no overflow at any n). */
static double sign_test_p(size_t worse, size_t n)
{
    double p = 0;
    for (size_t k = worse; k <= n; k++)
        p += exp(lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) -
                 (double)n * log(2.0));
    return p < 1 ? p : 1;
}

/* Pools the rows of each family in one view (the baselines' ratios, or
 * qflow's CPU per unit of work) and records the WORSE families. */
static void pool_view(bench_cmp_summary *s, bool cpu_view, double threshold_pct, bool *header)
{
    row_change *rows = malloc((s->npairs + 1) * sizeof(*rows));
    double *v = malloc((s->npairs + 1) * sizeof(double));
    bool *done = calloc(s->npairs + 1, sizeof(bool));
    if (!rows || !v || !done) {
        perror("qflow-bench");
        exit(2);
    }
    size_t n = row_changes(s, cpu_view, rows, v);
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        char fam[48], other[48];
        bench_family_of(rows[i].bench, fam, sizeof(fam));
        size_t k = 0, worse_way = 0;
        for (size_t j = i; j < n; j++) {
            bench_family_of(rows[j].bench, other, sizeof(other));
            if (strcmp(fam, other) != 0)
                continue;
            done[j] = true;
            v[k++] = rows[j].change;
            worse_way += rows[j].change > 0;
        }
        if (k < FAMILY_MIN_ROWS)
            continue;
        double med = bench_median(v, k);
        bool worse = med > FAMILY_FACTOR * threshold_pct && worse_way * 3 >= k * 2;
        double p = sign_test_p(worse_way, k);
        if (!*header) {
            printf(
                "  families (rows judged together: WORSE as a whole when >= %d rows, their median "
                "change\n  worse by > %gx the threshold and >= 2 in 3 of them the worse way):\n",
                FAMILY_MIN_ROWS, FAMILY_FACTOR);
            *header = true;
        }
        printf("  family %-15s %s%zu rows, %zu the worse way (sign test p %.4f), median change "
               "%+.1f%% => %s\n",
               fam, cpu_view ? "CPU per unit: " : "", k, worse_way, p, med,
               worse ? "WORSE (pooled)" : "not worse as a whole");
        if (!worse)
            continue;
        int g = family_index(s, fam);
        if (g >= 0) {
            s->family_p[g] = p < s->family_p[g] ? p : s->family_p[g];
            continue;
        }
        if (s->worse_families < BENCH_FAMILIES_MAX) {
            snprintf(s->family[s->worse_families], sizeof(s->family[0]), "%s", fam);
            s->family_p[s->worse_families] = p;
        }
        s->worse_families++;
    }
    free(rows);
    free(v);
    free(done);
}

void bench_compare_families(bench_cmp_summary *s, double threshold_pct)
{
    s->worse_families = 0;
    bool header = false;
    pool_view(s, false, threshold_pct, &header);
    if (s->cpu_votes)
        pool_view(s, true, threshold_pct, &header);
}

bool bench_family_is_worse(const bench_cmp_summary *s, const char *bench)
{
    char fam[48];
    bench_family_of(bench, fam, sizeof(fam));
    return family_index(s, fam) >= 0;
}

bool bench_family_is_confirmed(const bench_cmp_summary *s, const char *family)
{
    int g = family_index(s, family);
    return g >= 0 && s->family_p[g] < FAMILY_ALPHA;
}

int bench_families_confirmed(const bench_cmp_summary *s)
{
    int n = s->worse_families < BENCH_FAMILIES_MAX ? s->worse_families : BENCH_FAMILIES_MAX;
    int confirmed = 0;
    for (int g = 0; g < n; g++) {
        if (s->family_p[g] < FAMILY_ALPHA) {
            confirmed++;
            continue;
        }
        printf("  family %-15s WORSE as a whole, but too few of its rows moved the worse way "
               "(sign test p %.4f >= %g): not a failure\n",
               s->family[g], s->family_p[g], FAMILY_ALPHA);
    }
    return confirmed;
}
