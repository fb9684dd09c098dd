/* confirm.h - the second look of --compare at its WORSE rows (confirm.c).
 */
#ifndef BENCH_CONFIRM_H
#define BENCH_CONFIRM_H

#include "bench_run.h"

/* Runs the benches of sum's WORSE rows again, one bench at a time, then
 * (when none was WORSE again) those of each WORSE family, until one is
 * WORSE again; returns how many were (0: the first look was not
 * confirmed, the run passes). A family WORSE again beside the old build
 * is looked at live once more and decided on both live looks together.
 * With base_bin (a
 * qflow-bench of the old build; NULL: none) the old build runs those
 * benches too, turn about with this one, and the verdict is this build
 * against the old one measured now; when it cannot be run (a message says
 * why) or without it, both looks together are compared with old_rs (the
 * saved run of compare_path). Prints the comparison and each row's
 * outcome; exits 2 when out of memory. Runs for as long as the benches
 * take (seconds to minutes); not thread-safe (runs benchmarks). */
int bench_confirm_worse(const bench_options *o, const char *compare_path,
                        const bench_results *old_rs, const bench_results *new_rs,
                        const bench_cmp_summary *sum, double threshold, const char *base_bin);

#endif
