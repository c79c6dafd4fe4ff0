#!/bin/sh
# gpu_check.sh - everything that needs a real GPU, in one run: build, the
# tests/gpu suite (events and PROF_CUDA=kernels), the fake-driver cuda
# suite on the same machine, and bench/cuda/cuda_zone on the real driver in
# both modes. Meant for a borrowed GPU machine with little time: one
# command, logs and figures under OUT (default build-gpu/out).
#
#     sh scripts/gpu_check.sh [OUT]
#
# Needs meson, ninja and a C compiler; nvcc is used when found. Exits 0 when
# every step passed or skipped (77: no GPU or driver, as on a machine
# without one, where it was tried).
set -u
cd "$(dirname "$0")/.." || exit 1
out=${1:-${OUT:-build-gpu/out}}
mkdir -p "$out"
export PATH="$PATH:/usr/local/cuda/bin"
rc=0

step() {
    name=$1
    shift
    echo "=== $name: $*"
    start=$(date +%s)
    "$@" > "$out/$name.log" 2>&1
    r=$?
    if [ "$r" = 77 ]; then
        echo "--- $name skipped (no GPU or driver here)"
    elif [ "$r" != 0 ]; then
        echo "*** $name failed (rc $r)"
        rc=1
    fi
    echo "=== $name: $(($(date +%s) - start)) s; last lines:"
    tail -n 15 "$out/$name.log"
}

nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
[ -d build-gpu ] || step setup meson setup build-gpu -Dtests=true -Dbench=true -Dexamples=true \
    -Dpython=false -Dbuildtype=release
step build ninja -C build-gpu
step gpu meson test -C build-gpu --suite gpu --print-errorlogs
step cuda meson test -C build-gpu --suite cuda --print-errorlogs
# The zone's cost on the real driver: events, then kernels (CUPTI found
# where the toolkit puts it, or PROF_CUPTI_LIB).
step bench_events timeout 240 env PROF=1 PROF_SUMMARY=off build-gpu/bench/cuda/cuda_zone
step bench_kernels timeout 240 env PROF=1 PROF_SUMMARY=off PROF_CUDA=kernels build-gpu/bench/cuda/cuda_zone
cp build-gpu/meson-logs/testlog.txt "$out/testlog.txt" 2>/dev/null || true
echo "=== gpu_check: rc $rc (logs in $out)"
exit "$rc"
