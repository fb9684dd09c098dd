#!/usr/bin/env python3
"""check-readme.py README HEADER_DIR EXAMPLE... - the README tells the truth.

1. Every qf_ name the README shows (in code and in `backticks`) exists in
   the public headers of HEADER_DIR, and no function it shows is
   deprecated there (the API tour uses the current spellings). The list of
   deprecated spellings itself sits between <!-- deprecated --> and
   <!-- /deprecated --> and is exempt.
2. The README contains each EXAMPLE (example programs the tests build and
   run) verbatim, as one fenced code block.

Exit status 0 when both hold; 1 with the offending names otherwise.
"""
import pathlib
import re
import sys


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    readme = pathlib.Path(sys.argv[1]).read_text()
    headers = "\n".join(p.read_text() for p in sorted(pathlib.Path(sys.argv[2]).glob("*.h")))
    headers = re.sub(r"/\*.*?\*/", " ", headers, flags=re.S)  # names in comments do not count
    shown_text = re.sub(r"<!-- deprecated -->.*?<!-- /deprecated -->", "", readme, flags=re.S)
    problems = []

    declared = set(re.findall(r"\bqf_[a-z0-9_]+\b", headers))
    deprecated = set(re.findall(r"\b(qf_[a-z0-9_]+)\s*\([^;{]*?\)\s*QF_DEPRECATED\(", headers))
    # Names in code blocks and in backticks; a trailing * is a family
    # ("qf_maybe_*"), a trailing .h or -impl.h a file name.
    shown = set()
    for block in re.findall(r"```[a-z]*\n(.*?)```", shown_text, re.S):
        shown |= set(re.findall(r"\bqf_[a-z0-9_]+\b(?![*.\-])", block))
    for span in re.findall(r"`([^`\n]+)`", shown_text):
        shown |= set(re.findall(r"\bqf_[a-z0-9_]+\b(?![*.\-])", span))
    for name in sorted(shown):
        if name not in declared:
            problems.append(f"{name}: shown in the README, not in the installed headers")
        elif name in deprecated:
            problems.append(f"{name}: shown in the README, but deprecated")

    def norm(text):
        return "\n".join(line.rstrip() for line in text.strip().splitlines())

    blocks = [norm(b) for b in re.findall(r"```c\n(.*?)```", readme, re.S)]
    for path in sys.argv[3:]:
        if norm(pathlib.Path(path).read_text()) not in blocks:
            problems.append(f"{path}: not in the README verbatim (as a ```c block)")

    for p in problems:
        print("check-readme:", p, file=sys.stderr)
    if not problems:
        print(f"check-readme: {len(shown)} qf_ names, all current; "
              f"{len(sys.argv) - 3} example(s) in the README")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
