#!/bin/sh
# check-installed.sh SRC_DIR WORK_DIR - qflow as a user gets it.
#
# Configures a release build of SRC_DIR with --prefix=WORK_DIR/prefix (a
# prefix no compiler searches by default), installs it, and then, with
# pkg-config alone (PKG_CONFIG_PATH pointing into the prefix):
#   - builds tests/install/consumer.c against the shared library and runs it;
#   - builds it again fully static (pkg-config --static, cc -static) and
#     runs that (against a second install built with -Dnats=disabled when
#     the NATS bridge is in and the system has no libnats.a);
#   - compiles tests/install/deprecated.c and checks that every replaced
#     call is flagged as deprecated, naming its replacement, and that
#     QF_NO_DEPRECATION_WARNINGS silences them;
#   - checks the installed programs: qflow-bench (running its Go baseline
#     from the installed path, naming it when missing), qflow-serve-sim,
#     qflow-lines;
#   - checks the README against the installed headers
#     (tests/check-readme.py).
# Exit status 0 when all of it holds. Used by .ci/run; takes about a
# minute on 2 cores (the build; two with the second install).
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 SRC_DIR WORK_DIR" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
work=$2
mkdir -p "$work"
work=$(cd "$work" && pwd)
prefix=$work/prefix
here=$src/tests/install
cc=${CC:-cc}

step() { echo "== check-installed: $*"; }
fail() {
    echo "check-installed: FAILED: $*" >&2
    exit 1
}

step "configure, build and install into $prefix"
rm -rf "$work/build" "$prefix" "$work/build-static" "$work/prefix-static"
meson setup "$work/build" "$src" --prefix="$prefix" --buildtype=release -Dtests=false \
    >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; fail "meson setup"; }
ninja -C "$work/build" -j2 >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; fail "build"; }
meson install -C "$work/build" --no-rebuild >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "install"; }

pc=$(find "$prefix" -name qflow.pc | head -1)
[ -n "$pc" ] || fail "no qflow.pc under $prefix"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
[ -f "$prefix/include/qflow/qflow.h" ] || fail "no $prefix/include/qflow/qflow.h"
cflags=$(pkg-config --cflags qflow)
libs=$(pkg-config --libs qflow)
libdir=$(pkg-config --variable=libdir qflow)
echo "   Cflags: $cflags"
echo "   Libs:   $libs"
echo "   Libs --static: $(pkg-config --static --libs qflow)"
case " $cflags " in
*" -I$prefix/include "*) ;;
*) fail "Cflags ($cflags) does not give -I$prefix/include, so <qflow/qflow.h> is not found" ;;
esac

step "shared: cc consumer.c \$(pkg-config --cflags --libs qflow)"
# shellcheck disable=SC2086 # the flags are word lists
$cc -std=c11 -Wall -Wextra -Werror "$here/consumer.c" $cflags $libs -o "$work/consumer-shared"
LD_LIBRARY_PATH=$libdir "$work/consumer-shared"
LD_LIBRARY_PATH=$libdir ldd "$work/consumer-shared" | grep -q "$libdir/libqflow.so" ||
    fail "consumer-shared does not use $libdir/libqflow.so"

# A static link needs a static archive of every library qflow uses. Debian
# ships libnats as a shared library only: with the NATS bridge built in, the
# static program is made against a second install built with -Dnats=disabled
# (what a user who links statically does); any other missing archive fails.
no_archive=""
for l in $(pkg-config --static --libs-only-l qflow); do
    name=${l#-l}
    [ "$name" = qflow ] && continue
    [ "$($cc -print-file-name="lib$name.a")" = "lib$name.a" ] && no_archive="$no_archive $name"
done
static_pc=$PKG_CONFIG_PATH
case "$no_archive" in
"") ;;
" nats" | " nats nats")
    step "static: no libnats.a on this system: a second install with -Dnats=disabled"
    meson setup "$work/build-static" "$src" --prefix="$work/prefix-static" --buildtype=release \
        -Dtests=false -Dnats=disabled >"$work/setup-static.log" 2>&1 ||
        { cat "$work/setup-static.log"; fail "meson setup -Dnats=disabled"; }
    ninja -C "$work/build-static" -j2 >"$work/build-static.log" 2>&1 ||
        { tail -50 "$work/build-static.log"; fail "build -Dnats=disabled"; }
    meson install -C "$work/build-static" --no-rebuild >"$work/install-static.log" 2>&1 ||
        { cat "$work/install-static.log"; fail "install -Dnats=disabled"; }
    static_pc=$(dirname "$(find "$work/prefix-static" -name qflow.pc | head -1)")
    ;;
*) fail "no static archive of:$no_archive (pkg-config --static --libs qflow)" ;;
esac

step "static: cc -static consumer.c \$(pkg-config --static --cflags --libs qflow)"
# shellcheck disable=SC2086
$cc -std=c11 -Wall -Wextra -Werror -static "$here/consumer.c" \
    $(PKG_CONFIG_PATH=$static_pc pkg-config --static --cflags --libs qflow) \
    -o "$work/consumer-static"
"$work/consumer-static"
if ldd "$work/consumer-static" >/dev/null 2>&1; then
    fail "consumer-static is dynamically linked"
fi

step "deprecated calls warn and name their replacements"
# shellcheck disable=SC2086
# (LC_ALL=C: the compiler quotes names with plain ASCII quotes)
LC_ALL=C $cc -std=c11 -c "$here/deprecated.c" $cflags -o "$work/deprecated.o" \
    2>"$work/deprecated.log" || { cat "$work/deprecated.log"; fail "deprecated.c does not compile"; }
for want in "qf_queue_dequeue_many_ptr' is deprecated: use qf_queue_dequeue_many_ptrs()" \
    "qf_waker_wait' is deprecated: use qf_waker_wait_until()" \
    "qf_runtime_run_once' is deprecated: use qf_runtime_run_once_until()"; do
    LC_ALL=C grep -q "$want" "$work/deprecated.log" ||
        { cat "$work/deprecated.log"; fail "no warning: $want"; }
done
# shellcheck disable=SC2086
$cc -std=c11 -Werror -DQF_NO_DEPRECATION_WARNINGS -c "$here/deprecated.c" $cflags \
    -o "$work/deprecated.o" || fail "QF_NO_DEPRECATION_WARNINGS does not silence them"

step "installed programs: qflow-bench with its Go baseline, qflow-serve-sim, qflow-lines"
for exe in qflow-bench qflow-serve-sim qflow-lines; do
    [ -x "$prefix/bin/$exe" ] || fail "no $prefix/bin/$exe"
done
"$prefix/bin/qflow-bench" --list >/dev/null || fail "the installed qflow-bench --list"
if [ -x "$work/build/perf/qfbench-go" ]; then
    gobin=$(find "$prefix" -name qfbench-go -type f | head -1)
    [ -n "$gobin" ] || fail "qfbench-go (the Go baseline) is not installed"
    # Found by its installed path (relative to qflow-bench), not the build
    # tree's: the build tree's copy is moved away while it runs.
    mv "$work/build/perf/qfbench-go" "$work/build/perf/qfbench-go.away"
    "$prefix/bin/qflow-bench" --quick --filter 'queue.tput.p1c1/(qflow|go_chan)$' --reps 1 \
        --json "$work/bench-go.json" >"$work/bench-go.log" 2>&1
    rc=$?
    grep -q 'go_chan ' "$work/bench-go.log" || rc=1
    # A missing baseline program is named in the output and the results file.
    mv "$gobin" "$gobin.away"
    "$prefix/bin/qflow-bench" --quick --filter 'queue.tput.p1c1/qflow$' --reps 1 \
        --json "$work/bench-nogo.json" >"$work/bench-nogo.log" 2>&1 || rc=1
    mv "$gobin.away" "$gobin"
    mv "$work/build/perf/qfbench-go.away" "$work/build/perf/qfbench-go"
    [ $rc -eq 0 ] || { cat "$work/bench-go.log" "$work/bench-nogo.log"; fail "installed qflow-bench and go_chan"; }
    grep -q "go_chan (its program qfbench-go is missing: not at $gobin" "$work/bench-nogo.log" ||
        { cat "$work/bench-nogo.log"; fail "a missing Go baseline is not named in the output"; }
    grep -q '"skipped_peers": *"[^"]*go_chan (its program qfbench-go is missing' \
        "$work/bench-nogo.json" || fail "a missing Go baseline is not named in the JSON"
fi
"$prefix/bin/qflow-serve-sim" --help >/dev/null 2>&1 || fail "the installed qflow-serve-sim --help"

step "README: every qf_ call it shows is installed and not deprecated"
python3 "$src/tests/check-readme.py" "$src/README.md" "$prefix/include/qflow" \
    "$src/examples/embed_epoll.c"

echo "check-installed: OK"
