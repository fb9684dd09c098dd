#!/usr/bin/env python3
"""test_report.py QFLOW_BENCH OUT_DIR - the page of `qflow-bench --report DIR`.

Writes two results files with made-up repetitions (seeded): a row 2x
slower (WORSE), a row unchanged, a row whose new repetitions were all cut
by their time budget (not judged), a row with a qflow variant beside it and
a row without baselines. Compares them with --report OUT_DIR/report, then:

- checks the page as a file: one document, no script, nothing fetched from
  the network, one chart per compared pair with one dot per usable
  repetition, every row with its verdict;
- opens it in a real browser (Debian's chromium, headless): a screenshot
  (OUT_DIR/report.png: a PNG of the window's size that is not blank) and
  the DOM the browser built (--dump-dom), which must hold every row, its
  verdict, the ratios and the charts.

Without chromium the browser half is skipped with a message (exit 77, which
meson counts as skipped): `apt-get install -y chromium`; .ci/run installs it.
"""
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

BENCH = sys.argv[1] if len(sys.argv) > 1 else "qflow-bench"
OUT = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="qflow-report-")
WIDTH, HEIGHT = 1200, 2400
failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if not ok:
        failures.append(name)
        if detail:
            print(detail[:4000])


def result(bench, impl, values, unit="items/s", truncated=None):
    s = sorted(values)
    return {"bench": bench, "impl": impl, "unit": unit, "median": s[len(s) // 2],
            "min": s[0], "max": s[-1], "reps": len(values), "values": values,
            "truncated": truncated or [False] * len(values), "params": {}}


def runs(rng):
    def noisy(c, n=7, spread=0.05):
        return [c * (1 + rng.uniform(-spread, spread)) for _ in range(n)]

    old = [result("queue.tput.p1c1", "qflow", noisy(10e6)),
           result("queue.tput.p1c1", "mutex_cond", noisy(4e6)),
           result("queue.tput.p1c1", "qflow_int64", noisy(5e6)),
           result("queue.tput.p4c4", "qflow", noisy(6e6)),
           result("queue.tput.p4c4", "mutex_cond", noisy(1.5e6)),
           result("queue.tput.batch32", "qflow", noisy(30e6)),
           result("queue.tput.batch32", "mutex_cond", noisy(35e6)),
           result("queue.alloc", "qflow", [0.0] * 7, unit="allocs/item")]
    new = [result("queue.tput.p1c1", "qflow", noisy(5e6)),  # 2x slower
           result("queue.tput.p1c1", "mutex_cond", noisy(4e6)),
           result("queue.tput.p1c1", "qflow_int64", noisy(2.5e6)),
           result("queue.tput.p4c4", "qflow", noisy(6e6)),
           result("queue.tput.p4c4", "mutex_cond", noisy(1.5e6)),
           result("queue.tput.batch32", "qflow", noisy(30e6), truncated=[True] * 7),
           result("queue.tput.batch32", "mutex_cond", noisy(35e6)),
           result("queue.alloc", "qflow", [0.0] * 7, unit="allocs/item")]
    return old, new


def write(path, results, commit):
    doc = {"machine": {"host": "ci-1", "cpu": "Test CPU", "nproc": 2, "kernel": "Linux 6",
                       "arch": "x86_64", "compiler": "gcc 12", "date": "2026-11-28T00:00:00Z",
                       "qflow_version": "0.1.0", "mode": "quick", "reps": 7},
           "build": {"commit": commit, "buildtype": "release", "optimization": "3",
                     "sanitize": "none", "test_knobs": "none", "skipped_peers": "none"},
           "results": results}
    with open(path, "w") as f:
        json.dump(doc, f)


def png_size_and_pixels(path):
    """(width, height, distinct byte values of the decompressed image data)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0, 0
    w, h = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    return w, h, len(set(zlib.decompress(idat)))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(28)
    old, new = runs(rng)
    op, np_ = os.path.join(OUT, "old.json"), os.path.join(OUT, "new.json")
    write(op, old, "old1234")
    write(np_, new, "new5678")
    rep = os.path.join(OUT, "report")
    shutil.rmtree(rep, ignore_errors=True)
    p = subprocess.run([BENCH, "--from", np_, "--compare", op, "--report", rep,
                        "--min-judged", "0%"], capture_output=True, text=True)
    check("compare exits 1 (one WORSE row) and names the report",
          p.returncode == 1 and "report: " in p.stdout, p.stdout + p.stderr)
    page = os.path.join(rep, "index.html")
    check("the report is one file", os.path.isfile(page) and os.listdir(rep) == ["index.html"])
    if not os.path.isfile(page):
        return 1
    html = open(page).read()
    check("no script", "<script" not in html.lower())
    check("nothing from the network", not re.search(r"(src|href)\s*=|https?:|@import|url\(",
                                                    html))
    sections = re.findall(r'<section class="row" data-verdict="([a-z]+)">', html)
    check("one section per qflow row, each with its verdict",
          sections == ["worse", "same", "notjudged", "same"], str(sections))
    # queue.tput.p1c1 (mutex_cond only: the variant does not vote),
    # p4c4, batch32 and queue.alloc: four pairs, four charts.
    check("one chart per compared pair", html.count("<svg") == 4, str(html.count("<svg")))
    # 7 + 7 dots for each pair, none for batch32's new side (all cut).
    check("one dot per usable repetition", html.count("<circle") == 14 * 3 + 7,
          str(html.count("<circle")))
    check("the variant is not charted as a baseline", "<b>qflow_int64</b>" not in html)
    check("ratios with intervals", len(re.findall(r'class="ratio">[0-9.]+ \[[0-9.]+, [0-9.]+\]',
                                                  html)) == 2)

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: the browser checks: chromium is not installed (apt-get install -y chromium)")
        return 1 if failures else 77
    url = "file://" + os.path.abspath(page)
    shot = os.path.join(OUT, "report.png")
    with tempfile.TemporaryDirectory() as profile:
        common = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                  "--user-data-dir=" + profile, "--no-first-run"]
        if os.path.exists(shot):
            os.remove(shot)
        s = subprocess.run(common + ["--screenshot=" + shot,
                                     f"--window-size={WIDTH},{HEIGHT}", url],
                           capture_output=True, text=True, timeout=180)
        w, h, distinct = png_size_and_pixels(shot) if os.path.exists(shot) else (0, 0, 0)
        check(f"chromium's screenshot: {w}x{h}, {distinct} distinct byte values",
              (w, h) == (WIDTH, HEIGHT) and distinct > 16, s.stdout + s.stderr)
        d = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True,
                           timeout=180)
        dom = d.stdout
    check("chromium built a DOM", d.returncode == 0 and "</html>" in dom, d.stderr)
    for want in ("queue.tput.p1c1", "queue.tput.p4c4", "queue.tput.batch32", "queue.alloc",
                 "WORSE (needs", "NOT JUDGED: 7 repetitions cut by the time budget",
                 "against <b>mutex_cond</b>", "(own figures)", "new / old:", "p(worse):",
                 "1 WORSE", "families WORSE as a whole"):
        check(f"the page shows {want!r}", want in dom)
    check("the browser kept every chart", dom.count("<svg") == 4 and dom.count("<circle") == 49)
    print(f"screenshot: {shot}")
    if failures:
        print(f"{len(failures)} failed: {', '.join(failures)}")
        return 1
    print("the report page is as expected, in the browser too")
    return 0


if __name__ == "__main__":
    sys.exit(main())
