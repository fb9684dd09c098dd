#!/bin/sh
# check-abi.sh LIB BASELINE HEADERS_DIR - compare libqflow.so's ABI with the
# last release's (BASELINE, an abidw dump: tests/abi/libqflow.abi).
#
# Only types the installed headers (HEADERS_DIR) define are judged: an
# opaque type (qf_queue, qf_serve...) may change freely. Additions (new
# functions in a new version node) are fine and listed; anything
# incompatible fails, naming it: a function or variable removed, a changed
# signature, a symbol that left its version node, and a public type whose
# size or member offsets changed (callers allocate qf_serve_options,
# qf_serve_request and the like themselves, so a type that grows breaks a
# program built against the old header). Regenerate the baseline only when a
# release is cut, with a new soversion when it breaks the old one:
#   abidw --no-corpus-path --headers-dir build/include/qflow \
#         --out-file tests/abi/libqflow.abi build/libqflow.so
set -u
lib=$1
baseline=$2
hdrs=$3
out=/tmp/qf-abidiff.$$
abidiff --headers-dir1 "$hdrs" --headers-dir2 "$hdrs" --no-added-syms --no-unreferenced-symbols \
    "$baseline" "$lib" >"$out" 2>&1
rc=$?
# abidiff's exit status is a bit field: 1 error, 2 usage error, 4 an ABI
# change, 8 an incompatible ABI change. A grown public struct is only "a
# change" to abidiff (bit 4); its size and offset lines decide here.
if [ $((rc & 3)) -ne 0 ] || [ $((rc & 8)) -ne 0 ] ||
    grep -qE 'type size changed from|offset changed from' "$out"; then
    cat "$out"
    rm -f "$out"
    echo "check-abi: FAILED: $lib is not ABI-compatible with $baseline (abidiff exit $rc)"
    exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
    cat "$out"
fi
rm -f "$out"
abidiff --headers-dir1 "$hdrs" --headers-dir2 "$hdrs" "$baseline" "$lib" >/dev/null 2>&1
added=$?
echo "check-abi: $lib is ABI-compatible with $(basename "$baseline")$([ $((added & 4)) -ne 0 ] && echo ' (with additions)')"
exit 0
