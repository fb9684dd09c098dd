#!/usr/bin/env python3
"""Every exported function has a bad-input case.

Lists the functions libqflow exports two ways, from the public headers
(every QF_API declaration in a header of the source tree outside tests/
and perf/, so a new folder's headers are found without being listed here)
and from the shared library itself (`nm -D --defined-only`), and the cases
in the bad-input suite
(`CASE(<function>)` in test_bad_input.c). Fails, naming them,
when:
  - an exported function has no case (a new function must come with its
    bad-input case: what NULL and nonsense arguments give);
  - a header declares a QF_API function the library does not export, or
    the library exports a qf_ function no public header declares;
  - a case names a function that no longer exists.

Headers given with --not-built (paths relative to the root: an optional
module this build leaves out, such as runtime/bridge/qf_nats.h without
libnats) are not counted, and neither are the cases of their functions
(compiled out of the suite in such a build).

Usage: bad_input_coverage.py --nm NM --lib libqflow.so --cases FILE.c
                             --root SOURCE_ROOT [--not-built HEADER]...
"""
import argparse
import os
import re
import subprocess
import sys

DECL = re.compile(r"\bQF_API\b[^;{]*?\b(qf_[a-z0-9_]+)\s*\(", re.S)
CASE = re.compile(r"^\s*CASE\(\s*(qf_[a-z0-9_]+)\s*\)", re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def public_headers(root):
    skip = {"tests", "perf", ".git"}
    found = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        top = rel.split(os.sep)[0]
        if top in skip or top.startswith("build") or os.path.exists(os.path.join(d, "meson-private")):
            dirs[:] = []
            continue
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".h") and not f.endswith("-impl.h"):
                path = os.path.join(d, f)
                with open(path, encoding="utf-8", errors="replace") as h:
                    if "QF_API" in h.read():
                        found.append(path)
    return found


def header_functions(paths):
    found = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            body = strip_comments(f.read())
        for m in DECL.finditer(body):
            found.setdefault(m.group(1), path)
    return found


def exported_functions(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "W", "i") and parts[2].startswith("qf_") \
                and not parts[2].startswith("qf__"):
            # nm writes a versioned symbol as name@@NODE (runtime/libqflow.map)
            names.add(parts[2].split("@", 1)[0])
    return names


def case_functions(path):
    with open(path, encoding="utf-8") as f:
        return CASE.findall(f.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nm", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--not-built", action="append", default=[])
    a = ap.parse_args()

    skip = {os.path.normpath(os.path.join(a.root, h)) for h in a.not_built}
    all_headers = public_headers(a.root)
    headers = [h for h in all_headers if os.path.normpath(h) not in skip]
    left_out = set(header_functions([h for h in all_headers if h not in headers]))
    declared = header_functions(headers)
    exported = exported_functions(a.nm, a.lib)
    cases = [c for c in case_functions(a.cases) if c not in left_out]
    covered = set(cases)
    problems = []

    dup = sorted({c for c in cases if cases.count(c) > 1})
    for name in dup:
        problems.append(f"{name}: more than one CASE({name})")
    for name in sorted((exported | set(declared)) - covered):
        where = declared.get(name, "exported by the library")
        problems.append(f"{name} ({where}): no bad-input case; add CASE({name}) "
                        f"to {a.cases}")
    for name in sorted(set(declared) - exported):
        problems.append(f"{name} ({declared[name]}): declared QF_API but not exported")
    for name in sorted(exported - set(declared)):
        problems.append(f"{name}: exported but declared in no public header")
    for name in sorted(covered - exported - set(declared)):
        problems.append(f"{name}: has a bad-input case but no longer exists")

    print(f"{len(exported)} exported functions, {len(declared)} declared in "
          f"{len(headers)} public headers, {len(covered)} with bad-input cases")
    if problems:
        print(f"{len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print("every exported function has a bad-input case")
    return 0


if __name__ == "__main__":
    sys.exit(main())
