#!/usr/bin/env python3
"""test_compare.py QFLOW_BENCH - the verdicts of `qflow-bench --compare`.

Runs (almost) no benchmark: it writes results files with made-up repetitions
(seeded, so every run sees the same numbers), compares them with
`qflow-bench --from NEW.json --compare OLD.json`, and checks the exit
status and the verdicts: a real drop is WORSE, noise is inconclusive,
a change under the threshold is the same, truncated repetitions are left
out (a row left with too few is "not judged", and too few judged rows exit
3), a new median inside the old run's own range is not WORSE (a row with
two regimes), a baseline's count of rare events that is 0 leaves the row to
its own figures, qflow's own variants never vote, each row says the repetitions its
noise needs, a drop against one baseline only is not a failure, nor one
that a baseline's own move of more than 2x between the runs explains, too few
repetitions cannot fail, files from other machines or modes warn, old files
without repetitions cannot fail, a filter that matches nothing exits 2, and
(one real run of a sub-second bench) a WORSE row of a live run runs again
and fails only when it is WORSE again, and a family of rows each too noisy to
judge is WORSE as a whole when it is slower as a whole, not when it is noise,
and qflow's own CPU time per item counts only when the old build runs live
beside it (a real run against a fake old build whose CPU per item is far
lower is WORSE in CPU, confirmed; from files it is shown and does not fail).
perf/gate-test.sh does the same with real runs of a real and a slowed qflow.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

BENCH = sys.argv[1] if len(sys.argv) > 1 else "qflow-bench"
failures = []


def machine(**over):
    m = {"host": "ci-1", "cpu": "Test CPU", "nproc": 2, "kernel": "Linux 6", "arch": "x86_64",
         "compiler": "gcc 12", "date": "2026-11-25T00:00:00Z", "qflow_version": "0.1.0",
         "mode": "quick", "reps": 9}
    m.update(over)
    return m


def build(**over):
    b = {"commit": "abc", "buildtype": "release", "optimization": "3", "sanitize": "none",
         "test_knobs": "none"}
    b.update(over)
    return b


def result(bench, impl, values, unit="items/s", truncated=None):
    s = sorted(values)
    return {"bench": bench, "impl": impl, "unit": unit, "median": s[len(s) // 2],
            "min": s[0], "max": s[-1], "reps": len(values), "values": values,
            "truncated": truncated or [False] * len(values), "params": {}}


def verdict(failures, name, ok, *procs):
    """Prints a check's line; a failed one is counted, with what it printed."""
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if not ok:
        failures.append(name)
        print("".join(p.stdout + p.stderr for p in procs))


def noisy(rng, centre, spread, n):
    """n figures around centre, each times a factor in [1 - spread, 1 + spread]."""
    return [centre * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def write(path, results, mach=None, bld=None):
    doc = {"machine": mach or machine(), "build": bld or build(), "results": results}
    with open(path, "w") as f:
        json.dump(doc, f)


def compare(tmp, name, old, new, want_rc, want_in=(), want_not_in=(), args=()):
    op, np_ = os.path.join(tmp, name + "-old.json"), os.path.join(tmp, name + "-new.json")
    write(op, *old) if isinstance(old, tuple) else write(op, old)
    write(np_, *new) if isinstance(new, tuple) else write(np_, new)
    p = subprocess.run([BENCH, "--from", np_, "--compare", op, *args], capture_output=True,
                       text=True)
    out = p.stdout + p.stderr
    ok = p.returncode == want_rc
    for w in want_in:
        ok &= w in out
    for w in want_not_in:
        ok &= w not in out
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want {want_rc})")
    if not ok:
        failures.append(name)
        print(out)
        print(f"  wanted {list(want_in)}, not {list(want_not_in)}")


def live(name, old_path, filt, env, base_bin, want_rc, want_in, args=(), forbid=()):
    """A real run of `filt` compared with old_path, confirmed with --base-bin.

    What is tested is the second look, so the first must find the row WORSE;
    on a loaded machine a rare repetition can leave it inconclusive instead
    (the premise, not the verdict, failed): such a run is tried again, up to
    three times in all."""
    for _ in range(3):
        q = subprocess.run([BENCH, "--quick", "--filter", filt, "--compare", old_path,
                            "--base-bin", base_bin, *args], capture_output=True, text=True,
                           env={**os.environ, **env})
        if "== confirming" in q.stdout:
            break
    missing = [w for w in want_in if w not in q.stdout]
    missing += [f"(not) {w}" for w in forbid if w in q.stdout]
    ok = q.returncode == want_rc and not missing
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {q.returncode} (want {want_rc})")
    if not ok:
        failures.append(name)
        print(f"missing: {missing}\n" + q.stdout + q.stderr)


def pair(rng, q, b, spread, n=9, bench="queue.tput.p1c1", base="mutex_cond"):
    """qflow around q and a baseline around b: per-repetition ratios near q/b."""
    return [result(bench, "qflow", noisy(rng, q, spread, n)),
            result(bench, base, noisy(rng, b, spread, n))]


def main():
    rng = random.Random(1234)
    with tempfile.TemporaryDirectory() as tmp:
        old = pair(rng, 10e6, 4e6, 0.05)
        compare(tmp, "identical", old, old, 0, ["=> same", "0 WORSE"])

        # The whole machine 2x slower: absolute figures halve, ratios do not.
        slow_machine = [dict(r, values=[v / 2 for v in r["values"]],
                             median=r["median"] / 2) for r in old]
        compare(tmp, "slower_machine_is_not_worse", old, slow_machine, 0, ["=> same"],
                ["=> WORSE"])

        # qflow 2x slower against the same baseline: WORSE, exit 1.
        compare(tmp, "half_speed_is_worse", old, pair(rng, 5e6, 4e6, 0.05), 1,
                ["=> WORSE", "1 WORSE"])

        # 5% slower, consistently: under the 10% threshold, the same.
        compare(tmp, "under_threshold_is_same", pair(rng, 10e6, 4e6, 0.01),
                pair(rng, 9.5e6, 4e6, 0.01), 0, ["=> same"])

        # Medians 25% lower, but the repetitions overlap widely: inconclusive.
        base = result("queue.tput.p1c1", "mutex_cond", [4e6] * 7)
        wide_old = [result("queue.tput.p1c1", "qflow", [4e6, 6e6, 8e6, 10e6, 12e6, 14e6, 16e6]),
                    base]
        wide_new = [result("queue.tput.p1c1", "qflow", [3e6, 4.5e6, 6e6, 7.5e6, 9e6, 10.5e6, 12e6]),
                    base]
        compare(tmp, "noise_is_inconclusive", wide_old, wide_new, 0,
                ["inconclusive (noise > threshold)"], ["=> WORSE"])

        # Repetitions cut by a time budget are never judged.
        cut = pair(rng, 5e6, 4e6, 0.05)
        cut[0]["truncated"] = [True] * 9
        compare(tmp, "truncated_reps_are_left_out", old, cut, 3,
                ["not judged: 0+9 reps cut by the time budget",
                 "NOT JUDGED: 9 repetitions cut by the time budget",
                 "only 0 of 1 qflow rows could be judged"], ["=> WORSE"])
        partly = pair(rng, 10e6, 4e6, 0.05)
        partly[0]["values"][:4] = [1e6] * 4  # four slow reps, cut short
        partly[0]["truncated"][:4] = [True] * 4
        compare(tmp, "truncated_slow_reps_do_not_count", old, partly, 0, ["=> same"])

        # The machine changed under a row between the runs (seen in CI: one
        # binary, padding.tput.p1c1's mutex baseline 0.72 -> 1.99 M items/s
        # while qflow's figure fell 1.9x, WORSE twice): a baseline that moved
        # more than 2x and explains the drop leaves the row inconclusive.
        moved_old = [result("padding.tput.p1c1", "qflow", noisy(rng, 2.3e6, 0.03, 5)),
                     result("padding.tput.p1c1", "mutex_cond", noisy(rng, 0.72e6, 0.03, 5))]
        moved_new = [result("padding.tput.p1c1", "qflow", noisy(rng, 1.2e6, 0.03, 5)),
                     result("padding.tput.p1c1", "mutex_cond", noisy(rng, 2.0e6, 0.03, 5))]
        compare(tmp, "a_baseline_that_moved_cannot_make_worse", moved_old, moved_new, 0,
                ["mutex_cond itself moved", "inconclusive: worse, but a baseline moved too"],
                ["=> WORSE"])
        # The baseline moved 2.8x, but qflow fell 3.5x on top of it: WORSE.
        far_new = [result("padding.tput.p1c1", "qflow", noisy(rng, 2.3e6 / 3.5, 0.03, 5)),
                   result("padding.tput.p1c1", "mutex_cond", noisy(rng, 2.0e6, 0.03, 5))]
        compare(tmp, "a_slowdown_beyond_the_baseline_move_is_worse", moved_old, far_new, 1,
                ["=> WORSE"])
        # qflow half as fast while its baseline moved less than 2x: WORSE.
        still_old = [result("padding.tput.p1c1", "qflow", noisy(rng, 2.3e6, 0.03, 5)),
                     result("padding.tput.p1c1", "mutex_cond", noisy(rng, 0.72e6, 0.03, 5))]
        still_new = [result("padding.tput.p1c1", "qflow", noisy(rng, 1.0e6, 0.03, 5)),
                     result("padding.tput.p1c1", "mutex_cond", noisy(rng, 0.9e6, 0.03, 5))]
        compare(tmp, "a_baseline_that_moved_less_still_judges", still_old, still_new, 1,
                ["=> WORSE"])

        # A row with two regimes (runners.stop_join.100 under load: most
        # stops 0.3-0.5 ms, some a whole time slice): the new run drew more
        # slow repetitions than the old, on the same binary. The rank test
        # alone said WORSE; the new median is a figure the old run itself
        # produced, so the row cannot call it.
        def stop_rows(qms):
            return [result("runners.stop_join.100", "qflow", [v * 1e6 for v in qms], unit="ns"),
                    result("runners.stop_join.100", "thread_per_runner", [2e6] * len(qms),
                           unit="ns")]
        bi_old = stop_rows([0.30, 0.32, 0.35, 0.38, 0.40, 0.42, 0.45, 0.48, 6.0])
        bi_new = stop_rows([0.45, 2.1, 2.4, 2.6, 3.2, 3.6, 4.0, 4.4, 5.1])
        compare(tmp, "two_regimes_within_the_old_range_are_not_worse", bi_old, bi_new, 0,
                ["inconclusive (within the old run's range)"], ["=> WORSE"])
        # The same row 1.3x slower in every repetition, old run steady: the
        # new median lies past the old run's slowest stop, WORSE.
        steady = [0.30, 0.31, 0.32, 0.33, 0.34, 0.35, 0.36, 0.37, 0.38]
        compare(tmp, "a_steady_row_1_3x_slower_is_worse", stop_rows(steady),
                stop_rows([v * 1.3 for v in steady]), 1, ["=> WORSE"])

        # A count of rare events whose baseline is 0 in most repetitions
        # (serve.expired.50k: the mutex batcher expired 0 requests in 4 of 5
        # repetitions, so no ratio and the row was never judged): qflow's
        # own figures are judged instead.
        def expired(qv, bv):
            return [result("serve.expired.50k", "qflow", qv, unit="expired/Mreq"),
                    result("serve.expired.50k", "mutex_cond", bv, unit="expired/Mreq")]
        compare(tmp, "rare_baseline_counts_judge_own_figures", expired([0] * 5, [0, 0, 0, 0, 1120]),
                expired([0] * 5, [320, 0, 0, 0, 0]), 0, ["(own figures)", "=> same"],
                ["NOT JUDGED"])

        # Worse against one baseline, not against the other: not a failure.
        three = old + [result("queue.tput.p1c1", "gasyncqueue", noisy(rng, 5e6, 0.05, 9))]
        one_faster = old[:1] + [result("queue.tput.p1c1", "mutex_cond",
                                       noisy(rng, 8e6, 0.05, 9)),
                                result("queue.tput.p1c1", "gasyncqueue",
                                       noisy(rng, 5e6, 0.05, 9))]
        compare(tmp, "worse_against_one_baseline_only", three, one_faster, 0,
                ["worse against some baselines only"], ["=> WORSE"])

        # The exact distribution: 5 against 5 fully apart is p = 1/252
        # (0.004); 6 against 6 with one pair out of order is p = 2/924.
        five = result("queue.tput.p1c1", "mutex_cond", [1e6] * 5)
        compare(tmp, "exact_p_5_5", [result("queue.tput.p1c1", "qflow", [10e6, 11e6, 12e6, 13e6,
                                                                         14e6]), five],
                [result("queue.tput.p1c1", "qflow", [5e6, 5.1e6, 5.2e6, 5.3e6, 5.4e6]), five], 1,
                ["   0.004 ", "=> WORSE"])
        six = result("queue.tput.p1c1", "mutex_cond", [1e6] * 6)
        compare(tmp, "exact_p_6_6", [result("queue.tput.p1c1", "qflow", [5e6, 10e6, 11e6, 12e6,
                                                                         13e6, 14e6]), six],
                [result("queue.tput.p1c1", "qflow", [4e6, 4.1e6, 4.2e6, 4.3e6, 4.4e6, 5e6]), six],
                1, ["   0.002 ", "=> WORSE"])

        # A baseline with too few whole repetitions does not vote: the row
        # is judged by the others (here: 2x slower against mutex_cond).
        few_old = old + [result("queue.tput.p1c1", "gasyncqueue", noisy(rng, 5e6, 0.05, 9))]
        few_new = pair(rng, 5e6, 4e6, 0.05) + [
            result("queue.tput.p1c1", "gasyncqueue", noisy(rng, 5e6, 0.05, 9),
                   truncated=[True] * 7 + [False] * 2)]
        compare(tmp, "a_baseline_with_few_reps_does_not_vote", few_old, few_new, 1,
                ["not judged: 0+7 reps cut by the time budget", "=> WORSE"])

        # Three repetitions cannot reach alpha 0.01: never worse, and the
        # row is not judged, which fails the run (exit 3) unless allowed.
        compare(tmp, "too_few_reps", pair(rng, 10e6, 4e6, 0.01, n=3),
                pair(rng, 5e6, 4e6, 0.01, n=3), 3, ["inconclusive (too few reps)", "NOT JUDGED"],
                ["=> WORSE"])
        compare(tmp, "too_few_reps_allowed", pair(rng, 10e6, 4e6, 0.01, n=3),
                pair(rng, 5e6, 4e6, 0.01, n=3), 0, ["NOT JUDGED"], ["=> WORSE"],
                args=("--min-judged", "0%"))

        # qflow's own variants slow down with it: they never vote. qflow and
        # qflow_int64 both 2x slower, mutex_cond unchanged: WORSE (were the
        # variant a baseline, qflow would be "the same" against it).
        var_old = old + [result("queue.tput.p1c1", "qflow_int64", noisy(rng, 5e6, 0.05, 9))]
        var_new = pair(rng, 5e6, 4e6, 0.05) + [
            result("queue.tput.p1c1", "qflow_int64", noisy(rng, 2.5e6, 0.05, 9))]
        compare(tmp, "self_baselines_do_not_vote", var_old, var_new, 1,
                ["qflow_int64: qflow's own variants, do not vote", "=> WORSE"],
                ["worse against some baselines only"])

        # The repetitions the threshold needs, from the noise: quiet rows
        # need the least (5), noisy ones more, and the row says so.
        compare(tmp, "need_quiet", pair(rng, 10e6, 4e6, 0.01), pair(rng, 10e6, 4e6, 0.01), 0,
                ["=> same (needs 5 reps)"])
        compare(tmp, "need_noisy", pair(rng, 10e6, 4e6, 0.3), pair(rng, 10e6, 4e6, 0.3), 0,
                ["reps, had 9)"])

        # Too few rows judged: one row of two cut entirely is 50%, under the
        # default 80%: exit 3; --min-judged 50% lets it pass.
        two_old = old + pair(rng, 1e6, 1e6, 0.05, bench="queue.tput.p4c4")
        two_new = pair(rng, 10e6, 4e6, 0.05) + pair(rng, 1e6, 1e6, 0.05, bench="queue.tput.p4c4")
        two_new[2]["truncated"] = [True] * 9
        compare(tmp, "too_few_rows_judged", two_old, two_new, 3,
                ["1 of 2 judged", "only 1 of 2 qflow rows could be judged"])
        compare(tmp, "min_judged_lowered", two_old, two_new, 0, ["1 of 2 judged"],
                args=("--min-judged", "50%"))

        # Lower is better (ns): qflow's latency doubled against the baseline.
        lat_old = pair(rng, 400, 9000, 0.05, bench="queue.pingpong.p50")
        for r in lat_old:
            r["unit"] = "ns"
        lat_new = pair(rng, 800, 9000, 0.05, bench="queue.pingpong.p50")
        for r in lat_new:
            r["unit"] = "ns"
        compare(tmp, "latency_doubled_is_worse", lat_old, lat_new, 1, ["=> WORSE"])

        # No baseline: the figures themselves (allocations per element).
        zero = [result("queue.alloc", "qflow", [0.0] * 9, unit="allocs/item")]
        two = [result("queue.alloc", "qflow", [2.0] * 9, unit="allocs/item")]
        compare(tmp, "allocs_same", zero, zero, 0, ["=> same"])
        compare(tmp, "allocs_appear_is_worse", zero, two, 1, ["=> WORSE"])

        # Another machine, mode and build: warnings (verdicts unchanged).
        compare(tmp, "other_machine_warns", (old, machine(host="laptop", cpu="Other CPU",
                                                          nproc=8, mode="default")),
                (old, machine(), build(test_knobs="slowdown=2")), 0,
                ["warning: host differs", "warning: cpu differs", "warning: CPUs online differ",
                 "warning: mode differs", "warning: test knobs differ", "=> same"])

        # A file of an earlier qflow-bench (medians only): warned, never worse.
        legacy = [{k: v for k, v in r.items() if k not in ("values", "truncated")}
                  for r in pair(rng, 10e6, 4e6, 0.05)]
        compare(tmp, "old_format_cannot_fail", legacy, pair(rng, 5e6, 4e6, 0.05), 3,
                ["has no per-repetition figures", "NOT JUDGED"], ["=> WORSE"])

        # No baseline and a time unit (serve.answer.*.p99, whose only other
        # impl is a qflow variant): the absolute figure moves with the load
        # (+28% on both looks of one binary in CI), so it cannot fail.
        lat1 = [result("serve.answer.50k.p99", "qflow", noisy(rng, 2.6e6, 0.03, 5), unit="ns")]
        lat2 = [result("serve.answer.50k.p99", "qflow", noisy(rng, 3.3e6, 0.03, 5), unit="ns")]
        compare(tmp, "own_figure_latency_cannot_fail", lat1, lat2, 0,
                ["moves with load", "=> inconclusive"],
                ["=> WORSE"])

        # A spread (max / median, unit "ratio") of a baseline is its own
        # fairness, not the machine's speed: Go's fell 1.5x between two runs
        # of one binary and qflow's spread over it went WORSE, confirmed, in
        # CI. The row is judged on qflow's own figures, which cannot fail.
        sp_old = [result("runners.fair.10000.spread", "qflow", noisy(rng, 1.1, 0.02, 5),
                         unit="ratio"),
                  result("runners.fair.10000.spread", "go_chan", noisy(rng, 144, 0.05, 5),
                         unit="ratio")]
        sp_new = [result("runners.fair.10000.spread", "qflow", noisy(rng, 1.1, 0.02, 5),
                         unit="ratio"),
                  result("runners.fair.10000.spread", "go_chan", noisy(rng, 95, 0.05, 5),
                         unit="ratio")]
        compare(tmp, "spread_baseline_does_not_vote", sp_old, sp_new, 0,
                ["go_chan: a ratio is not a measure of the machine", "(own figures)"],
                ["=> WORSE"])
        sp_worse = [dict(sp_new[0], values=[v * 1.3 for v in sp_new[0]["values"]]), sp_new[1]]
        compare(tmp, "spread_own_figures_cannot_fail", sp_old, sp_worse, 0,
                ["moves with load"], ["=> WORSE"])

        # A baseline the old run lacks (a peer not installed then): the row
        # is not judged, its absolute figures are not compared instead.
        compare(tmp, "baseline_missing_in_old_is_not_judged", old[:1],
                pair(rng, 5e6, 4e6, 0.05), 3, ["NOT JUDGED"], ["=> WORSE", "(own figures)"])

        # Memory figures: the same in every repetition of a run, but 17 pages
        # more in another run of one binary (what CI saw for runners.rss.100):
        # under the 256 KiB floor, the same. 1 MiB more is WORSE.
        def rss(q, b):
            return [result("runners.rss.100", "qflow", [q] * 5, unit="bytes"),
                    result("runners.rss.100", "thread_per_runner", [b] * 5, unit="bytes")]
        compare(tmp, "bytes_under_the_floor_are_same", rss(745472, 1167360), rss(815104, 1138688),
                0, ["=> same"], ["=> WORSE"])
        compare(tmp, "bytes_over_the_floor_are_worse", rss(745472, 1167360),
                rss(745472 + (1 << 20), 1167360), 1, ["=> WORSE"])

        # A family of rows (queue.tput.*), each too noisy to be WORSE on its
        # own (5 repetitions spread +-20%: a 30% drop gives p ~ 0.03 per
        # row): all 10 rows 30% slower is WORSE as a whole; rows moved +-5%
        # (noise) are not; 8 of 10 rows 8% slower (a median under 1.5x the
        # threshold) are not; nor is a family of 7 rows 30% slower.
        def family(drops, name="queue.tput.p%dc%d"):
            res = []
            for i, d in enumerate(drops):
                bench = name % (i + 1, i + 1)
                res += [result(bench, "qflow", [v * 1e6 * (1 - d) for v in (8, 9, 10, 11, 12)]),
                        result(bench, "mutex_cond", [4e6] * 5)]
            return res
        fam_old = family([0] * 10)
        compare(tmp, "family_slower_as_a_whole_is_worse", fam_old, family([0.3] * 10), 1,
                ["family queue.tput", "=> WORSE (pooled)", "1 family WORSE as a whole",
                 "0 WORSE;"])
        compare(tmp, "family_noise_is_not_worse", fam_old, family([0.05, -0.05] * 5), 0,
                ["not worse as a whole", "0 families WORSE as a whole"])
        compare(tmp, "family_small_change_is_not_worse", fam_old, family([0.08] * 8 + [0] * 2), 0,
                ["0 families WORSE as a whole"])
        compare(tmp, "small_family_is_not_pooled", family([0] * 7), family([0.3] * 7), 0,
                ["0 families WORSE as a whole"], ["family queue.tput"])
        # The sign test a family's deciding look must pass at p < 0.01:
        # every row of 10 the worse way gives 1/2^10; 7 rows 20% slower and
        # 3 faster pass the median and the 2 in 3 count but not the sign
        # test (p 0.17); 10 of 11 rows 30% slower pass it even when the
        # eleventh swung 50% the better way (a test of sizes let that one
        # row outweigh the ten).
        compare(tmp, "family_sign_test_all_worse", fam_old, family([0.3] * 10), 1,
                ["10 the worse way (sign test p 0.0010)", "=> WORSE (pooled)"])
        compare(tmp, "family_sign_test_lean_is_not_a_failure", fam_old,
                family([0.2] * 7 + [-0.4] * 3), 0,
                ["7 the worse way (sign test p 0.1719)", "=> WORSE (pooled)",
                 "too few of its rows moved the worse way", "not a failure"])
        compare(tmp, "family_sign_test_one_outlier_no_veto", family([0] * 11),
                family([0.3] * 10 + [-0.5]), 1,
                ["10 the worse way (sign test p 0.0059)", "=> WORSE (pooled)"],
                ["too few of its rows"])

        # A live run: a WORSE row runs again and fails only when WORSE
        # again (coord.should_stop: under a second). The old file is this
        # run with every repetition set to its row's median, qflow's made a
        # million times better (its ns per call swing 40x on a loaded
        # machine, and a slow repetition kept in the old file once left the
        # first look inconclusive), so both looks are worse.
        real = os.path.join(tmp, "real.json")
        p = subprocess.run([BENCH, "--quick", "--filter", "^coord.should_stop/", "--json", real],
                           capture_output=True, text=True)
        doc = json.load(open(real))
        for r in doc["results"]:
            if r["impl"] == "qflow":
                r["median"] /= 1e6
            r["values"] = [r["median"]] * len(r["values"])
            r["min"] = r["max"] = r["median"]
        better_old = os.path.join(tmp, "better-old.json")
        json.dump(doc, open(better_old, "w"))
        for args, want_rc, want in (([], 1, ["== confirming: run again '^(coord\\.should_stop)/'",
                                             "WORSE again: confirmed", "confirmed: 1 of 1"]),
                                    (["--no-confirm"], 1, ["=> WORSE"])):
            for _ in range(3):  # as in live(): the first look must be WORSE
                q = subprocess.run([BENCH, "--quick", "--filter", "^coord.should_stop/",
                                    "--compare", better_old, *args], capture_output=True,
                                   text=True)
                if "=> WORSE" in q.stdout:
                    break
            name = "live_worse_is_confirmed" + (" --no-confirm" if args else "")
            ok = q.returncode == want_rc and all(w in q.stdout for w in want)
            ok &= ("confirming" in q.stdout) == (not args)
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {q.returncode} (want {want_rc})")
            if not ok:
                failures.append(name)
                print(p.stdout + q.stdout + q.stderr)

        # --base-bin: the second look runs the old build beside this one.
        # The same build against a saved run that is out of its regime (the
        # million times better file above): WORSE at first, not against the old
        # build measured now, so the run passes. (A threshold of 300%: the
        # test runs beside others, where the mutex baseline of this 1 ns row
        # swings 2x between turns; that is not what it tests.)
        live("live_same_build_is_not_worse", better_old, "^coord.should_stop/", {}, BENCH, 0,
             ["turn about with the old build", "not WORSE again: not a failure",
              "confirmed: 0 of 1"], ("--threshold", "300%"))
        # A build WORSE than the old one measured now: the old build is a
        # script that checks what it is given (its mode, filter, results
        # file, and no test knob in its environment) and "measures" the
        # million times better figures, so the verdict does not hang on this
        # machine's noise.
        fake = os.path.join(tmp, "old-qflow-bench")
        with open(fake, "w") as f:
            f.write(f"""#!/bin/sh
[ -z "${{QFLOW_BENCH_SLOWDOWN+x}}" ] || {{ echo "the test knob reached the old build"; exit 9; }}
json= quick= filter= reps=
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=$2; shift ;;
    --filter) filter=$2; shift ;;
    --reps) reps=$2; shift ;;
    --quick) quick=1 ;;
    esac
    shift
done
[ "$quick" = 1 ] && [ "$filter" = '^(coord\\.should_stop)/' ] && [ "$reps" = 5 ] && [ -n "$json" ] ||
    {{ echo "bad arguments: quick=$quick filter=$filter reps=$reps json=$json"; exit 8; }}
cp '{better_old}' "$json"
""")
        os.chmod(fake, 0o755)
        live("live_worse_than_old_build_is_confirmed", better_old, "^coord.should_stop/",
             {"QFLOW_BENCH_SLOWDOWN": "2"}, fake, 1,
             ["turn about with the old build: old 5, new 10, old 5", "WORSE again: confirmed"],
             forbid=["could not be run"])
        # An old build that fails: said so, and the saved run decides.
        live("live_broken_old_build_falls_back", better_old, "^coord.should_stop/", {},
             "/bin/false", 1, ["--base-bin /bin/false ended with status 1",
                               "confirming against", "WORSE again: confirmed"])
        for args, why in ((["--base-bin", BENCH], "--base-bin needs --compare"),
                          (["--compare", better_old, "--base-bin", "/no/such/file"],
                           "not an executable file")):
            p = subprocess.run([BENCH, "--quick", "--filter", "^coord.should_stop/", *args],
                               capture_output=True, text=True)
            name = "base_bin_usage " + " ".join(args[-2:])
            ok = p.returncode == 2 and why in p.stderr
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want 2)")
            if not ok:
                failures.append(name)
                print(p.stdout + p.stderr)

        # qflow's CPU per item: twice as much at the same rate. From files
        # (no old build to run beside it) it is shown and does not fail; a
        # file without CPU figures (an earlier qflow-bench) has no such pair.
        CPU_ROW = "queue.tput.p1c1        (own CPU/unit)"  # the row, not the header
        cpu_old = pair(random.Random(7), 10e6, 4e6, 0.02)
        cpu_new = [dict(r) for r in cpu_old]
        cpu_old[0] = dict(cpu_old[0], cpu_util=[1.0] * 9)
        cpu_new[0] = dict(cpu_new[0], cpu_util=[2.0] * 9)
        compare(tmp, "cpu_worse_from_files_does_not_fail", cpu_old, cpu_new, 0,
                [CPU_ROW, "worse, counted only against a live old build", "=> same"],
                ["=> WORSE"])
        compare(tmp, "cpu_absent_in_old_file", old, cpu_new, 0, ["=> same"], [CPU_ROW])
        # Live: a real run of the spsc row against an old build that
        # "measured" a CPU time per item a million times lower (a script
        # that copies that file): WORSE in CPU on the first look and again
        # beside the old build, so the run fails.
        cheap = [result("queue.tput.spsc", "qflow", [1e9] * 5)]
        cheap[0]["cpu_util"] = [1e-6] * 5
        cheap_old = os.path.join(tmp, "cheap-old.json")
        write(cheap_old, cheap)
        cheap_bin = os.path.join(tmp, "cheap-qflow-bench")
        with open(cheap_bin, "w") as f:
            f.write(f"""#!/bin/sh
while [ $# -gt 0 ]; do
    [ "$1" = --json ] && {{ cp '{cheap_old}' "$2"; exit 0; }}
    shift
done
echo "no --json"; exit 8
""")
        os.chmod(cheap_bin, 0o755)
        live("live_cpu_worse_is_confirmed", cheap_old, "^queue.tput.spsc/qflow$", {}, cheap_bin, 1,
             ["(own CPU/unit)", "WORSE in CPU per unit of work (CPU ns/item)",
              "WORSE again: confirmed"], forbid=["could not be run"])

        # Each round's core-to-core latency: measured in a live run (one
        # figure per repetition, the same for every impl of the bench, a
        # latency a line takes between two CPUs: finite and positive, under
        # a second), written to the file, read back and shown (median and
        # range) under the bench's table; a file without it shows none.
        c2c_json = os.path.join(tmp, "c2c.json")
        p = subprocess.run([BENCH, "--quick", "--reps", "3", "--filter", "^queue.tput.spsc/",
                            "--json", c2c_json], capture_output=True, text=True)
        doc = json.load(open(c2c_json)) if p.returncode == 0 else {"results": []}
        rows = [r for r in doc["results"] if r["bench"] == "queue.tput.spsc"]
        c2c = [r.get("c2c_ns") for r in rows]
        ok = (len(rows) >= 2 and all(c == c2c[0] for c in c2c) and c2c[0] is not None and
              len(c2c[0]) == 3 and (os.cpu_count() or 1) >= 2 and
              all(isinstance(x, (int, float)) and 0 < x < 1e9 for x in c2c[0]) and
              "machine: core-to-core latency" in p.stdout)
        print(f"{'ok  ' if ok else 'FAIL'} c2c_live: {c2c}")
        if not ok:
            failures.append("c2c_live")
            print(p.stdout + p.stderr)
        shown = [result("queue.tput.spsc", "qflow", [1e7] * 6)]
        shown[0]["c2c_ns"] = [40, 180, 35, None, 41, 39]
        shown_path = os.path.join(tmp, "c2c-shown.json")
        write(shown_path, shown)
        p = subprocess.run([BENCH, "--from", shown_path], capture_output=True, text=True)
        want = "machine: core-to-core latency 40 ns (median of the rounds; 35-180 ns)"
        ok = p.returncode == 0 and want in p.stdout
        write(shown_path, [result("queue.tput.spsc", "qflow", [1e7] * 5)])
        p2 = subprocess.run([BENCH, "--from", shown_path], capture_output=True, text=True)
        ok &= p2.returncode == 0 and "core-to-core" not in p2.stdout
        verdict(failures, "c2c_shown_from_file", ok, p, p2)

        # Rounds in two regimes (latencies apart by 2x or more): qflow's
        # median and its per-round ratios shown for each group; rounds of
        # one regime, or without latencies, show no such line.
        c2c = [40, 180, 35, None, 41, 39]
        rows = [result("queue.tput.spsc", "qflow", [1e7, 2e7, 3e7, 4e7, 5e7, 6e7]),
                result("queue.tput.spsc", "go_chan", [1e7] * 6)]
        for r in rows:
            r["c2c_ns"] = c2c
        rg_path = os.path.join(tmp, "regimes.json")
        write(rg_path, rows)
        p = subprocess.run([BENCH, "--from", rg_path], capture_output=True, text=True)
        want = ["regime: core-to-core 35-41 ns, 4 rounds: qflow 40 M; qflow/go_chan 4\n",
                "regime: core-to-core 180-180 ns, 1 round: qflow 20 M; qflow/go_chan 2\n"]
        ok = p.returncode == 0 and all(w in p.stdout for w in want)
        for r in rows:
            r["c2c_ns"] = [40, 45, 35, None, 41, 60]  # one regime: under 2x apart
        write(rg_path, rows)
        p2 = subprocess.run([BENCH, "--from", rg_path], capture_output=True, text=True)
        ok &= p2.returncode == 0 and "regime:" not in p2.stdout
        verdict(failures, "regimes_from_file", ok, p, p2)

        # --workers N: qflow's runtimes and Go's GOMAXPROCS both N (the Go
        # peer prints what it got and the harness fails a run where it
        # differs), recorded as a test knob; a bad N, or N with --from,
        # is a usage error.
        w_json = os.path.join(tmp, "workers.json")
        p = subprocess.run([BENCH, "--quick", "--reps", "1", "--workers", "1", "--filter",
                            "^task.spawn/", "--json", w_json], capture_output=True, text=True)
        doc = json.load(open(w_json)) if p.returncode == 0 else {"build": {}, "results": []}
        impls = {r["impl"] for r in doc["results"]}
        go_ran = "go" in impls or "qfbench-go" in doc["build"].get("skipped_peers", "")
        ok = (p.returncode == 0 and doc["build"].get("test_knobs") == "workers=1" and
              "qflow" in impls and go_ran and
              "--workers 1: qflow's runtimes have 1 worker, Go runs with GOMAXPROCS=1" in p.stdout)
        print(f"{'ok  ' if ok else 'FAIL'} workers_knob: {sorted(impls)}")
        if not ok:
            failures.append("workers_knob")
            print(p.stdout + p.stderr)
        for args in (["--workers", "0"], ["--workers", "1025"], ["--workers", "two"],
                     ["--workers", "1", "--from", w_json]):
            p = subprocess.run([BENCH, *args], capture_output=True, text=True)
            name = "workers_refused " + " ".join(args[:3])
            ok = p.returncode == 2 and "--workers" in p.stderr
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want 2)")
            if not ok:
                failures.append(name)
                print(p.stdout + p.stderr)

        # A filter that matches nothing is an error, with or without a run.
        compare(tmp, "empty_filter_from_file", old, old, 2, ["no case matches"],
                args=("--filter", "no-such-bench"))
        for args in (["--filter", "no-such-bench", "--reps", "1"],
                     ["--list", "--filter", "no-such-bench"]):
            p = subprocess.run([BENCH, *args], capture_output=True, text=True)
            name = "empty_filter " + " ".join(args)
            ok = p.returncode == 2 and "no case matches" in p.stderr
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want 2)")
            if not ok:
                failures.append(name)
                print(p.stdout + p.stderr)

    if failures:
        print(f"{len(failures)} failed: {', '.join(failures)}")
        return 1
    print("all compare verdicts as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
