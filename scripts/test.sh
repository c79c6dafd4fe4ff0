#!/bin/sh
# The whole test suite, as CI runs it, in stages:
#   gcc-build      gcc, -Wall -Wextra -Werror, every target (tests,
#                  examples, benchmarks, the Python extension)
#   clang-build    the same with clang (no Python extension)
#   gcc-suites     every C suite on the gcc build (unit, integration, cuda,
#                  faults, load, fuzz replay, plugin, distributed)
#   fuzz           the libFuzzer targets, bounded in time (clang build)
#   asan-ubsan     the C suites under AddressSanitizer + UBSan
#   tsan           the C suites under ThreadSanitizer
#   python         the pytest suite on the gcc build
#   tools          prof-merge, prof-diff, prof-report
#   consumers      prof brought into other builds (make, CMake, meson
#                  subproject without cmake, pip wheel)
# Every stage runs, whatever an earlier one gave; at the end one table
# says PASS or FAIL and the seconds of each, with a line per failed stage
# saying why (the tests that failed and the first line of each one's
# output that says why, or the build's first error), and the exit status
# is 1 when any failed. A stage's output is in build-test-logs/STAGE.log;
# a failing stage prints its log's last lines. Every step says what it
# does and, while it runs, prints a line at least every 20 s (steps.sh).
#
# What the sanitizer stages run, and why not everything: a sanitizer finds
# a bad access, a leak or a race the first time a path runs, so they run
# every C suite once over each path, with PROF_TEST_QUICK=1 (repetitions
# and iteration counts a tenth, as check.h's test_scale() and the Python
# tests' QUICK say), while gcc-suites runs the same tests at full size.
# Left out there, and run in gcc-suites only:
#   load           its figures are memory and rates, which mean nothing
#                  under a sanitizer's allocator and scheduling; it runs
#                  valgrind itself
#   live           the readers (prof-top, prof.live) are Python and the
#                  terminal and Prometheus around them; the C side that
#                  publishes the live file runs in every sanitized test
#                  that records for a second. Only test_metrics.py runs
#                  there (live-metrics below): the metrics thread, its
#                  HTTP server and the .prom writer run nowhere else.
#   gpu            needs a GPU, and its point is timing a real device
#   python, tools, consumers   not C, or not prof's own build
# The full allocation-failure sweep runs under AddressSanitizer only
# (tests/faults/meson.build), the fuzzers in the fuzz stage.
#
# Installs what it needs from Debian's packages when missing (as root):
# without Open MPI the MPI tests, without node the flame graph's script
# check, without locales the comma-decimal trace test would skip and prove
# nothing. PROF_TEST_QUICK=1 scales the heavier tests down everywhere.
set -u
cd "$(dirname "$0")/.." || exit 1
. scripts/steps.sh

logs=build-test-logs
mkdir -p "$logs"
PROF_DEPS_LOG=$(pwd)/$logs/deps.log
export PROF_DEPS_LOG
# Without its packages nothing below means anything: this one stops here.
sh scripts/deps.sh meson ninja-build pkg-config gcc g++ clang libclang-rt-14-dev \
    python3 python3-dev python3-pytest cython3 python3-numpy python3-mesonpy \
    python3-pip python3-venv python3-torch valgrind cmake patchelf make \
    openmpi-bin libopenmpi-dev nodejs locales prometheus tmux || exit 1

jobs=$(nproc)

build() {   # stage name, build dir, then meson options
    _stage=$1 _dir=$2
    shift 2
    if [ ! -f "$_dir/build.ninja" ]; then
        step_log "$_stage: meson setup $_dir" "$logs/$_stage-setup.log" \
            meson setup "$_dir" "$@" || return 1
    else
        # --reconfigure, not meson configure: it reads meson_options.txt
        # again, so a build directory older than an option takes it.
        step_log "$_stage: meson setup --reconfigure $_dir" "$logs/$_stage-setup.log" \
            meson setup --reconfigure "$_dir" "$@" || return 1
    fi
    step_log "$_stage: ninja -C $_dir" "$logs/$_stage.log" ninja -C "$_dir" -j "$jobs"
}

suite() {   # stage name, then meson test's arguments
    _stage=$1
    shift
    step_tee "$_stage: meson test $*" "$logs/$_stage.log" \
        meson test --print-errorlogs --num-processes "$jobs" "$@"
}

# Each stage runs in a subshell: what it exports stays there. A plain setup
# builds only what an install installs (meson_options.txt): each build
# turns on what it tests.
st_gcc_build() {
    export CC=gcc CXX=g++
    build gcc-build build-test-gcc -Dwerror=true -Dtests=true -Dexamples=true -Dbench=true \
        -Dpython=true -Dnvcc_examples=auto
}
st_clang_build() {
    export CC=clang CXX=clang++
    build clang-build build-test-clang -Dwerror=true -Dtests=true -Dexamples=true -Dbench=true \
        -Dpython=false -Dnvcc_examples=auto
}
st_gcc_suites() {
    suite gcc-suites -C build-test-gcc --no-suite python --no-suite tools --no-suite consumers
}
st_fuzz() {
    suite fuzz -C build-test-clang --suite fuzz
}
# The sanitizer stages' suites (the header says which and why).
sanitized_suites() {   # stage name, build dir
    export PROF_TEST_QUICK=1
    _rc=0
    # First: the table's reason for a failed stage reads the testlog.json
    # of the last run, the bigger one.
    if meson test -C "$2" --list --suite live >/dev/null 2>&1; then
        suite "$1-live-metrics" -C "$2" --suite live --test-args '-k test_metrics' || _rc=1
    fi
    suite "$1" -C "$2" --no-suite python --no-suite tools --no-suite consumers \
        --no-suite load --no-suite live --no-suite gpu || _rc=1
    return $_rc
}
st_asan_ubsan() {
    export CC=gcc CXX=g++
    build asan-ubsan-build build-test-asan -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dtests=true -Dexamples=true \
        -Dpython=false -Dbench=false || return 1
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    sanitized_suites asan-ubsan build-test-asan
}
st_tsan() {
    export CC=clang CXX=clang++
    build tsan-build build-test-tsan -Db_sanitize=thread \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dtests=true -Dexamples=true \
        -Dpython=false -Dbench=false || return 1
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    sanitized_suites tsan build-test-tsan
}
st_python() {
    suite python -C build-test-gcc --suite python
}
st_tools() {
    suite tools -C build-test-gcc --suite tools
}
st_consumers() {
    suite consumers -C build-test-gcc --suite consumers
}

# Why a stage failed, in a line for the table: the tests that failed, from
# the testlog.json that this stage's meson test wrote, or else the first
# error in its logs (a build's "FAILED:"/"error:", apt's, meson's).
stage_dir() {
    case $1 in
        gcc-build|gcc-suites|python|tools|consumers) echo build-test-gcc ;;
        clang-build|fuzz) echo build-test-clang ;;
        asan-ubsan) echo build-test-asan ;;
        tsan) echo build-test-tsan ;;
    esac
}
stage_hint() {   # stage; the marker $logs/.stage-start is older than its files
    _tl=$(stage_dir "$1")/meson-logs/testlog.json
    if [ -f "$_tl" ] && [ -n "$(find "$_tl" -newer "$logs/.stage-start" 2>/dev/null)" ]; then
        _h=$(python3 scripts/failed_tests.py "$_tl")
        [ -n "$_h" ] && { echo "failed: $_h"; return; }
    fi
    _h=$(cat "$logs/$1"*.log 2>/dev/null | grep -m 1 -E 'FAILED|[Ee]rror:|ERROR' | cut -c1-160)
    echo "${_h:-see $logs/$1.log}"
}

table=""
hints=""
failed=0
for stage in gcc-build clang-build gcc-suites fuzz asan-ubsan tsan python tools consumers; do
    printf '\n=== %s (log: %s/%s.log)\n' "$stage" "$logs" "$stage" >&2
    t0=$(date +%s)
    touch "$logs/.stage-start"
    rc=0
    ( "st_$(echo "$stage" | tr - _)" ) || rc=$?
    secs=$(( $(date +%s) - t0 ))
    if [ "$rc" = 0 ]; then
        result=PASS
    else
        result=FAIL
        failed=$((failed + 1))
        hints="$hints$(printf '%-14s %s' "$stage" "$(stage_hint "$stage")")
"
    fi
    printf '=== %s: %s in %d s\n' "$stage" "$result" "$secs" >&2
    table="$table$(printf '%-14s %-5s %6d' "$stage" "$result" "$secs")
"
done

{
    printf '\nstage          result  seconds\n%s' "$table"
    if [ "$failed" = 0 ]; then
        echo "all stages passed"
    else
        printf '\nwhy:\n%s' "$hints"
        echo "$failed stage(s) FAILED: their logs are in $logs/ (rerun one test with"
        echo "meson test -C BUILD_DIR --print-errorlogs NAME)"
    fi
} >&2
[ "$failed" = 0 ]
