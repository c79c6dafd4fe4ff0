#!/bin/sh
# Build prof and run the demo training loop with profiling on: it prints a
# summary every 100 steps and at exit, and writes a Chrome trace to
# train.json (open it in https://ui.perfetto.dev).
#
# Each step says what it does and goes to a log in build/ (deps:
# $TMPDIR/prof-deps.log), with a line every 20 s while it runs (steps.sh);
# a step that fails says which, and shows the log's last lines.
set -eu
cd "$(dirname "$0")/.."
. scripts/steps.sh

sh scripts/deps.sh meson ninja-build pkg-config gcc g++ python3

mkdir -p build
echo "demo: building prof's runtime (libprof) and the demo program examples/train_loop in build/" >&2
# Only what the demo runs: the examples, no tests, no Python extension
# (an existing build/ is reconfigured to build them).
if [ ! -f build/build.ninja ]; then
    step_log "meson setup build" build/demo-setup.log \
        meson setup build -Dexamples=true
else
    step_log "meson configure build" build/demo-setup.log \
        meson configure build -Dexamples=true
fi
step_log "ninja -C build examples/train_loop" build/demo-ninja.log \
    ninja -C build examples/train_loop

echo "demo: running build/examples/train_loop with PROF=1 PROF_SUMMARY_EVERY=100steps PROF_TRACE=train.json" >&2
rc=0
PROF=1 PROF_SUMMARY_EVERY=100steps PROF_TRACE=train.json ./build/examples/train_loop "$@" || rc=$?
if [ "$rc" != 0 ]; then
    echo "demo: FAILED: build/examples/train_loop exited with status $rc" >&2
    exit "$rc"
fi
echo "trace written to $(pwd)/train.json: open it in https://ui.perfetto.dev or chrome://tracing" >&2
