#!/bin/sh
# drain_instr.sh - instructions per zone of prof_flush()'s drain, under
# callgrind (load cannot move them), at 10, 1k and 100k stages.
#
#     bench/drain_instr.sh LIBDIR INCDIR FN [STAGES...]
#
#   LIBDIR  where libprof.so is (build-h/src, /tmp/prof-old-d03103e/build/src)
#   INCDIR  the headers of that library (its tree's include/)
#   FN      the statistics' function run once per drained zone, to count
#           the zones: sink_zone (main since the sinks), prof_stats_zone
#           (d03103e)
#
# The main thread's prof_flush() instructions (inclusive, counts zeroed
# after the warm-up) over the zones that thread drained: the collector
# thread wakes every 20 ms and drains some of them itself, so dividing by
# the zones recorded would read low, and differently every run.
# Environment: PROF=1 PROF_LIVE=0 PROF_SUMMARY=off.
set -eu
lib=$1 inc=$2 fn=$3
shift 3
[ $# -gt 0 ] || set -- 10 1000 100000
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/prof-drain-instr-XXXXXX)
trap 'rm -rf "$out"' EXIT
${CC:-cc} -O3 -std=gnu11 -D_GNU_SOURCE -pthread -I"$inc" "$top/bench/drain_instr.c" -o "$out/cg" \
    -L"$lib" -Wl,-rpath,"$lib" -lprof -lm
for s in "$@"; do
    r=15
    [ "$s" -ge 100000 ] && r=21
    PROF=1 PROF_LIVE=0 PROF_SUMMARY=off valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$out/cg.$s" "$out/cg" "$s" "$r" >/dev/null 2>"$out/err.$s"
    f=$out/cg.$s-01
    ir=$(callgrind_annotate --inclusive=yes "$f" | awk '/\?\?\?:prof_flush /{gsub(",", "", $1); print $1; exit}')
    # The calls of FN in the main thread: callgrind's "calls=N" lines after cfn=FN.
    n=$(awk -v fn="$fn" '
        /^c?fn=\(/ { id = $1; sub(/^c?fn=/, "", id); if (NF > 1) name[id] = $2;
                     if ($1 ~ /^cfn=/) cur = name[id] }
        /^calls=/ { if (cur == fn) { split($1, a, "="); total += a[2] } }
        END { print total + 0 }' "$f")
    echo "stages=$s instructions=$ir zones=$n of $((r * 16000)) per_zone=$(awk -v a="$ir" -v b="$n" 'BEGIN { printf "%.1f", b ? a / b : 0 }')"
done
