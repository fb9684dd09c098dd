#!/usr/bin/env python3
"""check-spec-citations.py --root SOURCE_ROOT - every `spec N` names an item.

Code, tests and the README cite the TensorFlow behaviours qflow reproduces as
`spec N`, numbered as in docs/semantics.md. This check reads every citation
under coord/, queues/, runtime/, tests/, perf/, include/, examples/ and in
README.md, and fails, naming file:line, when a cited number has no entry in
docs/semantics.md or its entry is empty.

Citation forms understood (case does not matter; "specs" too):
    spec 55        spec 55-57       spec 12, 18      spec 149 + 161
    spec 11 and 83 (spec 12)        spec items 63-83 spec 92 (43-48)
    Spec items: 152-153
    semantics.md items 5-62         spec 174 (item 131)
    Test(batch, spec_164_...)       Test(reader_runs, spec_190_195_...)
A list may continue on the next line ("(spec 157, 161," then "162)"), and
"spec" may end a line with its number on the next. Anything after a colon
or a word is not part of the citation ("spec 62: 10 threads" cites 62).
The entries of docs/semantics.md are its lines "N. text" (a Markdown
ordered list); an entry runs to the next entry or heading.

Exit status 0 when all hold; 1 with the offending citations otherwise.
--expect-bad N turns it into a test of the check itself: given a --doc
whose item N is empty or missing (tests/data/spec-citations/), it
succeeds only when it finds problems and every one is about item N.
"""
import argparse
import pathlib
import re
import sys

SCANNED = ["coord", "queues", "runtime", "tests", "perf", "include", "examples", "README.md"]
SUFFIXES = {".c", ".h", ".py", ".md", ".build", ".sh", ".txt", ".pml", ""}

RANGE = r"\d+(?:\s*[-\u2013]\s*\d+)?"
LIST = RANGE + r"(?:(?:\s*,\s*|\s*\+\s*|\s+and\s+)" + RANGE + r")*"
CITE = re.compile(
    r"(?:\bspecs?(?:\s+items?:?)?|\bsemantics\.md\s+items?)\s+(" + LIST + r")"
    r"(?:\s*\((?:items?\s+)?(" + LIST + r")\))?",
    re.I,
)
SEP = re.compile(r"\s*,\s*|\s*\+\s*|\s+and\s+")
DASH = re.compile(r"\s*[-\u2013]\s*")
# A test's name: spec_<n>[_<n>...]_what_it_checks (each number an item).
TEST_NAME = re.compile(r"\bspec((?:_\d+)+)(?![0-9])", re.I)
LEADER = re.compile(r"^\s*(?:/\*+|\*+(?!/)|//+|#+)?\s*")
ENTRY = re.compile(r"^(\d+)\.\s?(.*)$")


def numbers(listing):
    """The item numbers of one citation list ("12, 17-18" -> 12, 17, 18)."""
    out = []
    for part in SEP.split(listing.strip()):
        ends = [int(x) for x in DASH.split(part)]
        if len(ends) == 2 and ends[0] <= ends[1]:
            out.extend(range(ends[0], ends[1] + 1))
        elif len(ends) == 2:
            out.append(-1)  # a range backwards is a typo, not a citation
        else:
            out.append(ends[0])
    return out


def entries(doc):
    """Item number -> the text of its entry in the semantics document."""
    found, dup = {}, []
    current = None
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = ENTRY.match(line)
        if m:
            current = int(m.group(1))
            if current in found:
                dup.append(current)
            found[current] = [m.group(2)]
        elif line.startswith("#") or line.startswith("---"):
            current = None
        elif current is not None:
            found[current].append(line)
    return {n: " ".join(t).strip() for n, t in found.items()}, dup


def files(root):
    me = pathlib.Path(__file__).name  # its examples above are not citations
    for name in SCANNED:
        p = root / name
        if p.is_file():
            yield p
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(root).parts
                if (f.suffix in SUFFIXES and "data" not in rel
                        and rel != ("tests", me) and f.is_file()):
                    yield f


HIT = re.compile(r"spec|semantics\.md", re.I)


def citations(path):
    """(line number, [item numbers]) for each citation that starts on a line.

    Only the lines holding "spec" or "semantics.md" are looked at: the
    files are searched whole, and a hit's line found from its offset."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return
    lineno, counted_to, done_line = 1, 0, 0
    for hit in HIT.finditer(text):
        lineno += text.count("\n", counted_to, hit.start())
        counted_to = hit.start()
        if lineno == done_line:
            continue
        done_line = lineno
        begin = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.start())
        end = len(text) if end < 0 else end
        line = text[begin:end]
        after = text.find("\n", end + 1)
        nxt = LEADER.sub("", text[end + 1:len(text) if after < 0 else after])
        for m in CITE.finditer(line + " " + nxt):
            if m.start() >= len(line):
                break  # the next line's own citations are counted there
            cited = numbers(m.group(1))
            if m.group(2):
                cited += numbers(m.group(2))
            yield lineno, cited
        for m in TEST_NAME.finditer(line):
            yield lineno, [int(x) for x in m.group(1).strip("_").split("_")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="the source tree")
    ap.add_argument("--doc", help="default: ROOT/docs/semantics.md")
    ap.add_argument("--expect-bad", type=int, metavar="N",
                    help="self-test: succeed only if the problems found are all about item N")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    doc = pathlib.Path(args.doc) if args.doc else root / "docs" / "semantics.md"
    have, dup = entries(doc)
    problems = [f"{doc}: item {n} has two entries" for n in dup]
    count, items, scanned = 0, set(), 0
    for path in files(root):
        scanned += 1
        for line, cited in citations(path):
            rel = path.relative_to(root)
            for n in cited:
                count += 1
                items.add(n)
                if n < 0:
                    problems.append(f"{rel}:{line}: a range that runs backwards")
                elif n not in have:
                    problems.append(f"{rel}:{line}: spec {n} is not in {doc.name}")
                elif not have[n]:
                    problems.append(f"{rel}:{line}: spec {n} has an empty entry in {doc.name}")
    if args.expect_bad is not None:
        mine = [p for p in problems if f" {args.expect_bad} " in p]
        ok = problems and len(mine) == len(problems)
        print(f"check-spec-citations: {len(problems)} problems, {len(mine)} about item "
              f"{args.expect_bad}: {'as expected' if ok else 'NOT as expected'}")
        return 0 if ok else 1
    for p in problems:
        print("check-spec-citations:", p, file=sys.stderr)
    if not problems:
        print(f"check-spec-citations: {count} citations of {len(items)} items in {scanned} "
              f"files, all in {doc.name} ({len(have)} entries)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
