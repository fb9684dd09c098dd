#!/usr/bin/env bash
# Build the libFuzzer targets with clang (ASan + UBSan + coverage) and run
# each for a bounded time from its checked-in seeds (tests/fuzz/corpus/).
#
#   tests/fuzz/run.sh                  every target, QF_FUZZ_SECONDS (20) each
#   QF_FUZZ_SECONDS=600 tests/fuzz/run.sh tfrecord_gzip   one target, longer
#
# New inputs go to build-fuzz/corpus/<target>/ (not checked in); a crash
# leaves build-fuzz/crash-* and fails the run. Prints one line per target
# and "fuzz: N targets clean, M failed"; exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${QF_FUZZ_SECONDS:-20}
all=(text fixed_plain fixed_zlib fixed_gzip tfrecord_plain tfrecord_zlib tfrecord_gzip tfrecord_zstd
     whole_file iterator writer random state queue tensor nats_codec)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

if ! command -v clang >/dev/null; then
    echo "fuzz: clang not found (apt-get install clang libclang-rt-14-dev): skipped"
    exit 0
fi
if [[ ! -f build-fuzz/build.ninja ]]; then
    rm -rf build-fuzz
    CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null || exit 1
fi
# nats_codec exists only when the NATS bridge is built (libnats found).
built=()
known=$(ninja -C build-fuzz -t targets all 2>/dev/null) # once: grep -q on a pipe races pipefail
for t in "${targets[@]}"; do
    if grep -q "^tests/fuzz/fuzz_$t:" <<<"$known"; then
        built+=("$t")
    else
        echo "fuzz $t: not in this build (nats_codec needs the NATS bridge: libnats-dev): skipped"
    fi
done
targets=("${built[@]}")
((${#targets[@]})) || { echo "fuzz: no target to run"; exit 1; }
ninja -C build-fuzz -j2 "${targets[@]/#/tests/fuzz/fuzz_}" >/dev/null || {
    ninja -C build-fuzz -j2 "${targets[@]/#/tests/fuzz/fuzz_}" | tail -30
    exit 1
}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
clean=0
bad=0
for t in "${targets[@]}"; do
    mkdir -p "build-fuzz/corpus/$t"
    log="build-fuzz/fuzz-$t.log"
    if "build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -print_final_stats=1 -artifact_prefix="build-fuzz/$t-" \
        "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
        runs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
        echo "fuzz $t: clean, ${runs:-?} executions in ${secs}s"
        clean=$((clean + 1))
    else
        echo "fuzz $t: FAILED (log $log)"
        grep -aE 'ERROR|check failed|runtime error|SUMMARY' "$log" | head -10
        bad=$((bad + 1))
    fi
done
echo "fuzz: $clean targets clean, $bad failed"
((bad == 0))
