/* compare.c - --compare OLD.json: the change of every result present in
 * both runs. "Worse" follows the unit: a drop for items/s, a rise for
 * ns, bytes and allocs/item. Only qflow results decide the exit status;
 * baselines are shown to tell a slower machine from a slower qflow. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_run.h"

/* How much worse `now` is than `old`, in percent (negative: better). */
static double worse_pct(double old, double now, const char *unit)
{
    if (old == now)
        return 0;
    if (old == 0)
        return bench_unit_higher_is_better(unit) ? -INFINITY : INFINITY;
    double change = (now - old) / fabs(old) * 100;
    return bench_unit_higher_is_better(unit) ? -change : change;
}

int bench_compare(const bench_results *old_rs, const bench_results *new_rs, double threshold_pct,
                  const regex_t *filter)
{
    int regressions = 0;
    printf("\n== compare (threshold %g%%; only qflow rows decide the exit status)\n",
           threshold_pct);
    printf("  %-22s %-14s %-12s %10s %10s %9s  %s\n", "bench", "impl", "unit", "old", "new",
           "change", "verdict");
    for (size_t i = 0; i < new_rs->n; i++) {
        const bench_result *n = &new_rs->v[i];
        const bench_result *o = bench_results_find(old_rs, n->bench, n->impl);
        char ov[32] = "-", nv[32], chg[32] = "-";
        const char *verdict = "new";
        bench_format_value(nv, sizeof(nv), n->median, n->unit);
        if (o && strcmp(o->unit, n->unit) != 0) {
            verdict = "unit changed";
        } else if (o && !(isfinite(o->median) && isfinite(n->median))) {
            bench_format_value(ov, sizeof(ov), o->median, o->unit);
            verdict = "n/a";
        } else if (o) {
            bench_format_value(ov, sizeof(ov), o->median, o->unit);
            double w = worse_pct(o->median, n->median, n->unit);
            if (o->median != 0)
                snprintf(chg, sizeof(chg), "%+.1f%%", (n->median - o->median) / o->median * 100);
            else if (n->median != 0)
                snprintf(chg, sizeof(chg), "from 0");
            bool is_qflow = strcmp(n->impl, "qflow") == 0;
            if (w > threshold_pct) {
                verdict = is_qflow ? "WORSE" : "worse (baseline)";
                regressions += is_qflow;
            } else if (w < -threshold_pct) {
                verdict = "better";
            } else {
                verdict = "same";
            }
        }
        printf("  %-22s %-14s %-12s %10s %10s %9s  %s\n", n->bench, n->impl, n->unit, ov, nv, chg,
               verdict);
    }
    for (size_t i = 0; i < old_rs->n; i++) {
        const bench_result *o = &old_rs->v[i];
        if (bench_results_find(new_rs, o->bench, o->impl) ||
            !bench_filter_matches(filter, o->bench, o->impl))
            continue;
        char ov[32];
        bench_format_value(ov, sizeof(ov), o->median, o->unit);
        printf("  %-22s %-14s %-12s %10s %10s %9s  %s\n", o->bench, o->impl, o->unit, ov, "-", "-",
               "not run");
    }
    printf("  %d qflow result%s worse by more than %g%%\n", regressions,
           regressions == 1 ? "" : "s", threshold_pct);
    return regressions;
}
