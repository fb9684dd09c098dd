#!/bin/sh
# check-abi.sh LIB BASELINE - compare libqflow.so's ABI with the last
# release's (BASELINE, an abidw dump: tests/abi/libqflow.abi).
#
# Additions (new functions in a new version node) are fine and listed;
# anything incompatible (a function or variable removed, a changed
# signature, a changed public type or a symbol that left its version node)
# fails, naming it. Regenerate the baseline only when a release is cut:
#   abidw --no-corpus-path --out-file tests/abi/libqflow.abi build/libqflow.so
set -u
lib=$1
baseline=$2
abidiff --no-added-syms --no-unreferenced-symbols "$baseline" "$lib" >/tmp/qf-abidiff.$$ 2>&1
rc=$?
# abidiff's exit status is a bit field: 1 error, 2 usage error, 4 an ABI
# change, 8 an incompatible ABI change.
if [ $((rc & 3)) -ne 0 ] || [ $((rc & 8)) -ne 0 ]; then
    cat /tmp/qf-abidiff.$$
    rm -f /tmp/qf-abidiff.$$
    echo "check-abi: FAILED: $lib is not ABI-compatible with $baseline (abidiff exit $rc)"
    exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
    cat /tmp/qf-abidiff.$$
fi
rm -f /tmp/qf-abidiff.$$
abidiff "$baseline" "$lib" >/dev/null 2>&1
added=$?
echo "check-abi: $lib is ABI-compatible with $(basename "$baseline")$([ $((added & 4)) -ne 0 ] && echo ' (with additions)')"
exit 0
