#!/bin/sh
# gpu_check.sh - everything that needs a real GPU, in one run: build, the
# tests/gpu suite (events and PROF_CUDA=kernels), the fake-driver cuda
# suite on the same machine, bench/cuda/cuda_zone on the real driver in
# both modes, and, where the Python extension builds (python3 with its
# headers and torch), bench/cuda/torch_gpu_step.py: the issue 31 loop
# plain, with prof (events, kernels) and under torch.profiler, and
# tests/gpu/torch_memory.py (a stage's rise of the allocator's peak).
# Meant for a borrowed GPU machine with little time: one command, logs
# and figures under OUT (default build-gpu/out).
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
step bench_events timeout 120 env PROF=1 PROF_SUMMARY=off build-gpu/bench/cuda/cuda_zone
step bench_kernels timeout 120 env PROF=1 PROF_SUMMARY=off PROF_CUDA=kernels build-gpu/bench/cuda/cuda_zone
# The PyTorch step: its own build of the extension, for the python3 on PATH
# (a venv's); a machine without its headers or torch skips it.
if python3 -c 'import torch' 2>/dev/null; then
    [ -d build-gpu-py ] || step setup_py meson setup build-gpu-py -Dpython=true -Dtests=false \
        -Dbench=false -Dexamples=false -Dbuildtype=release
    step build_py ninja -C build-gpu-py
    step torch_step timeout 300 env PYTHONPATH=build-gpu-py/python \
        python3 bench/cuda/torch_gpu_step.py --rounds 3 --out "$out/torch_step"
    # Per stage, how far it raised the caching allocator's peak (issue 40).
    step torch_memory timeout 300 env PYTHONPATH=build-gpu-py/python \
        python3 tests/gpu/torch_memory.py
else
    echo "--- torch_step skipped (no torch for $(command -v python3))"
fi
cp build-gpu/meson-logs/testlog.txt "$out/testlog.txt" 2>/dev/null || true
echo "=== gpu_check: rc $rc (logs in $out)"
exit "$rc"
