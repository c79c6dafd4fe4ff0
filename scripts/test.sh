#!/bin/sh
# The whole test suite, as CI runs it:
#   1. gcc and clang builds with -Wall -Wextra -Werror (every target,
#      examples and benchmarks included);
#   2. every suite (unit, integration, cuda, faults, load, fuzz replay,
#      python, tools, consumers) on the gcc build, and the libFuzzer targets (20 s
#      each) on the clang build;
#   3. the C suites again under AddressSanitizer + UndefinedBehaviorSanitizer
#      and under ThreadSanitizer (not the load suite: its memory figures mean
#      nothing under a sanitizer's allocator, and it runs valgrind).
# Installs what it needs from Debian's packages when missing (as root):
# without Open MPI the MPI tests, and without node the flame graph's
# script check, would skip and prove nothing.
# PROF_TEST_QUICK=1 scales the heavier tests down.
set -eu
cd "$(dirname "$0")/.."

sh scripts/deps.sh meson ninja-build pkg-config gcc g++ clang libclang-rt-14-dev \
    python3 python3-dev python3-pytest cython3 python3-numpy python3-mesonpy \
    python3-pip python3-venv python3-torch valgrind cmake patchelf make \
    openmpi-bin libopenmpi-dev nodejs

jobs=$(nproc)
step() { printf '\n=== %s\n' "$*" >&2; }

setup() {   # dir, then meson options
    dir=$1; shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >/dev/null
    else
        meson configure "$dir" "$@" >/dev/null
    fi
    # Quiet unless it fails: then the compiler's messages are the log.
    ninja -C "$dir" -j "$jobs" > "$dir/ninja.log" 2>&1 || { cat "$dir/ninja.log" >&2; exit 1; }
}

step "gcc, -Werror, every target"
CC=gcc CXX=g++ setup build-test-gcc -Dwerror=true -Dpython=true
step "clang, -Werror, every target"
CC=clang CXX=clang++ setup build-test-clang -Dwerror=true -Dpython=false

step "all suites (gcc build)"
meson test -C build-test-gcc --print-errorlogs --num-processes "$jobs"

step "libFuzzer targets, bounded time (clang build)"
meson test -C build-test-clang --print-errorlogs --suite fuzz

step "C suites under AddressSanitizer + UndefinedBehaviorSanitizer"
CC=gcc CXX=g++ setup build-test-asan -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized -Dpython=false -Dbench=false
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-test-asan --print-errorlogs --num-processes "$jobs" \
    --no-suite python --no-suite tools --no-suite load

step "C suites under ThreadSanitizer"
CC=clang CXX=clang++ setup build-test-tsan -Db_sanitize=thread -Db_lundef=false \
    -Dbuildtype=debugoptimized -Dpython=false -Dbench=false
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    meson test -C build-test-tsan --print-errorlogs --num-processes "$jobs" \
    --no-suite python --no-suite tools --no-suite load

step "all green"
