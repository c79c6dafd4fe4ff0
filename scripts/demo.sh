#!/bin/sh
# Build prof and run the demo training loop with profiling on: it prints a
# summary every 100 steps and at exit, and writes a Chrome trace to
# train.json (open it in https://ui.perfetto.dev).
set -eu
cd "$(dirname "$0")/.."

sh scripts/deps.sh meson ninja-build pkg-config gcc g++ python3

if [ ! -f build/build.ninja ]; then
    meson setup build -Dpython=false >/dev/null
fi
ninja -C build examples/train_loop >/dev/null

PROF=1 PROF_SUMMARY_EVERY=100steps PROF_TRACE=train.json ./build/examples/train_loop "$@"
echo "trace written to $(pwd)/train.json: open it in https://ui.perfetto.dev or chrome://tracing" >&2
