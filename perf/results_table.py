#!/usr/bin/env python3
"""results_table.py - the README's Measured table from a qflow-bench --json file.

Usage: perf/results_table.py RESULTS.json

One row per (benchmark, baseline) pair of the run: qflow's median, the
baseline's median and their ratio, written as "N.NNx" where more is better
and "N.NNx lower/higher" where less is better (latencies, spreads, expired
requests, allocations). Rows come in the file's order; nothing is measured
here, so the table says exactly what the file does."""
import json
import sys

LOWER_IS_BETTER = {"ns", "ratio", "expired/Mreq", "allocs/item", "count"}


def fmt(v, unit):
    if v is None:  # no repetition measured (a baseline that failed its check)
        return "-"
    if unit == "items/s":
        if v >= 1e6:
            return f"{v / 1e6:.2f} M/s"
        return f"{v / 1e3:.0f} k/s"
    if unit == "MB/s":
        return f"{v:.0f} MB/s"
    if unit == "ns":
        if v >= 1e6:
            return f"{v / 1e6:.1f} ms"
        if v >= 1e4:
            return f"{v / 1e3:.1f} µs"
        return f"{v:.0f} ns"
    return f"{v:.3g}"


def ratio(q, b, unit):
    if q is None or b is None or q == 0 or b == 0:
        return "-"
    if unit in LOWER_IS_BETTER:
        return f"{b / q:.2f}x lower" if q <= b else f"{q / b:.2f}x higher"
    return f"{q / b:.2f}x"


def main(path):
    results = json.load(open(path))["results"]
    by_bench = {}
    for r in results:
        by_bench.setdefault(r["bench"], []).append(r)
    print("| benchmark | qflow (median) | baseline (median) | qflow vs baseline |")
    print("|---|---|---|---|")
    for bench, rows in by_bench.items():
        mine = [r for r in rows if r["impl"] == "qflow"]
        if not mine:
            continue
        q = mine[0]
        for b in rows:
            if b is q:
                continue
            u = q["unit"]
            print(f"| `{bench}` | {fmt(q['median'], u)} | {b['impl']}: {fmt(b['median'], u)} "
                  f"| {ratio(q['median'], b['median'], u)} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
