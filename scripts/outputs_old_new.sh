#!/bin/sh
# outputs_old_new.sh - the GPU paths' outputs of an older commit's library
# and this tree's, side by side, compared in shape: every number made N
# (a duration's or a size's unit too),
# runs of spaces made one, histograms made H and the trace's lines taken
# as a set (how many of each the run's timing decides). For a refactor of
# the output floor: tests/unit/outputs_golden and outputs_golden_gpu
# compare this tree's outputs with golden files byte for byte; this
# compares an older commit's library with this tree's.
#
#     scripts/outputs_old_new.sh OLD [BUILD]
#
#   OLD    a commit; its library is built once in /tmp/prof-old-<hash> (a
#          detached worktree, as bench/old_new.sh makes it)
#   BUILD  this tree's meson build directory with tests (default build)
#
# The program is tests/live/gpu_prog (CUDA zones around fake kernels, a
# CPU zone between them) on the fake driver, NVML and CUPTI, run 1.5 s
# with each library (same binary, LD_LIBRARY_PATH) in PROF_CUDA=1 and
# PROF_CUDA=kernels, writing the text and JSON summaries, the trace and
# the Prometheus file; PROF_CPU=0, since where a sample lands is the
# run's (outputs_golden covers the on-CPU and peak figures). Exit 1 on
# a difference, with the diff.
set -eu
[ $# -ge 1 ] || { sed -n '2,20p' "$0"; exit 2; }
top=$(git rev-parse --show-toplevel)
old=$(git rev-parse --short "$1")
b=$(cd "${2:-$top/build}" && pwd)
otree=/tmp/prof-old-$old
if [ ! -d "$otree" ]; then
    git -C "$top" worktree add --detach "$otree" "$old" >&2
fi
if [ ! -f "$otree/build/build.ninja" ]; then
    meson setup "$otree/build" "$otree" -Dbuildtype=release -Dtests=false -Dbench=false \
        -Dexamples=false -Dpython=false >&2
fi
ninja -C "$otree/build" >&2
ninja -C "$b" tests/live/gpu_prog tests/cuda/libfakecuda.so tests/cuda/libfakenvml.so \
    tests/cuda/libfakecupti.so >&2
out=$(mktemp -d /tmp/prof-outputs-XXXXXX)
trap 'rm -rf "$out"' EXIT

run() {   # LIBDIR DIR MODE
    mkdir -p "$2"
    for fmt in text json; do
        env -i PATH="$PATH" LD_LIBRARY_PATH="$1" PROF=1 PROF_CUDA="$3" PROF_LIVE=0 PROF_CPU=0 \
            PROF_CUDA_LIB="$b/tests/cuda/libfakecuda.so" \
            PROF_NVML_LIB="$b/tests/cuda/libfakenvml.so" \
            PROF_CUPTI_LIB="$b/tests/cuda/libfakecupti.so" \
            PROF_SUMMARY="$2/summary.$fmt" PROF_SUMMARY_FORMAT="$fmt" \
            PROF_TRACE="$2/trace.$fmt.json" PROF_METRICS="$2/metrics.$fmt.prom" \
            "$b/tests/live/gpu_prog" 1.5 >/dev/null 2>>"$2/stderr"
    done
}
status=0
for mode in 1 kernels; do
    run "$otree/build/src" "$out/old-$mode" "$mode"
    run "$b/src" "$out/new-$mode" "$mode"
    python3 - "$out/old-$mode" "$out/new-$mode" "PROF_CUDA=$mode" <<'EOF' || status=1
import difflib, os, re, sys

def shape(name, text):
    text = re.sub(r'\[\[[-0-9.e+,\[\]]*\]\]', 'H', text)
    text = re.sub(r'-?\d+(\.\d+)?(e[-+]?\d+)?', 'N', text)
    text = re.sub(r'\bN (ns|us|ms|s)\b', 'N t', text)        # 990 us or 1.01 ms: the run's
    text = re.sub(r'\bN (B|KiB|MiB|GiB)\b', 'N b', text)
    text = re.sub(r' +', ' ', text)
    lines = text.splitlines()
    if name.startswith("trace"):
        lines = sorted(set(l.strip(" ,") for l in lines))
    return [l + "\n" for l in lines]

old, new, what = sys.argv[1:4]
bad = 0
for name in sorted(set(os.listdir(old)) | set(os.listdir(new))):
    a = shape(name, open(os.path.join(old, name), errors="replace").read()) \
        if os.path.exists(os.path.join(old, name)) else ["(none)\n"]
    b = shape(name, open(os.path.join(new, name), errors="replace").read()) \
        if os.path.exists(os.path.join(new, name)) else ["(none)\n"]
    if a != b:
        bad += 1
        print("%s %s differs:" % (what, name))
        sys.stdout.writelines(difflib.unified_diff(a, b, "old", "new"))
print("%s: %d outputs, %s" % (what, len(os.listdir(new)),
                              "%d differ" % bad if bad else "the same in shape"))
sys.exit(1 if bad else 0)
EOF
done
exit $status
