#!/bin/sh
# old_new.sh - one C benchmark, built against an older commit's library and
# against this tree's, run alternated (old, new, old, new, ...) so that both
# see the same load, and the median of every figure on its "prof-bench"
# line printed for each side.
#
#     bench/old_new.sh [-r ROUNDS] [-b BENCH] [-n NEW_BUILD] OLD [OLD...] [-- ARGS...]
#
#   OLD        a commit (d03103e); each built once in /tmp/prof-old-<hash>
#              (a detached git worktree, removed with `git worktree remove`);
#              with several, every round runs each of them, then new
#   -b BENCH   bench/BENCH.c (default drain); its source must use only the
#              public API, and is compiled twice, each time with the
#              headers of the library it links (the zone's fast path is
#              inline), from this tree's bench/ (bench.h)
#   -n NEW     this tree's meson build directory (default build); the
#              library there is rebuilt with ninja first
#   -r ROUNDS  pairs of runs (default 5)
#   ARGS       passed to both runs
#
# Environment variables reach both runs alike (PROF_LIVE=0, ...).
set -eu

rounds=5
bench=drain
new_build=build
while getopts r:b:n: opt; do
    case $opt in
    r) rounds=$OPTARG ;;
    b) bench=$OPTARG ;;
    n) new_build=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,21p' "$0"; exit 2; }
olds=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    olds="$olds $(git rev-parse --short "$1")"
    shift
done
[ "${1:-}" = "--" ] && shift

top=$(git rev-parse --show-toplevel)
src=$top/bench/$bench.c
[ -f "$src" ] || { echo "no $src" >&2; exit 2; }
cc=${CC:-cc}
cflags="-O3 -std=gnu11 -D_GNU_SOURCE -pthread"

# The shared library's target (src/libprof.so.<version>) alone.
lib_target() {
    ninja -C "$1" -t targets all | sed -n 's/^\(src\/libprof\.so[.0-9]*\): .*/\1/p' | sort | tail -1
}
out=$(mktemp -d /tmp/prof-old-new-XXXXXX)
trap 'rm -rf "$out"' EXIT
build() {   # side tree lib
    # shellcheck disable=SC2086
    $cc $cflags -I"$2/include" -I"$top/bench" "$src" -o "$out/$1" -L"$3" -Wl,-rpath,"$3" -lprof -lm
}
for old in $olds; do
    otree=/tmp/prof-old-$old
    if [ ! -d "$otree" ]; then
        git -C "$top" worktree add --detach "$otree" "$old" >&2
    fi
    if [ ! -f "$otree/build/build.ninja" ]; then
        meson setup "$otree/build" "$otree" -Dbuildtype=release -Dtests=false -Dbench=false \
            -Dexamples=false -Dpython=false >&2
    fi
    ninja -C "$otree/build" "$(lib_target "$otree/build")" >&2
    build "$old" "$otree" "$otree/build/src"
done
ninja -C "$top/$new_build" "$(lib_target "$top/$new_build")" >&2
build new "$top" "$top/$new_build/src"
sides="$olds new"

echo "$bench: old=$olds (/tmp/prof-old-*), new=$(git -C "$top" rev-parse --short HEAD)$(git -C "$top" diff --quiet HEAD -- src include || echo '+changes') ($new_build), $rounds rounds, alternated" >&2
for i in $(seq "$rounds"); do
    for side in $sides; do
        line=$("$out/$side" "$@" 2>"$out/$side.err.$i" | grep '^prof-bench' | tail -1)
        echo "$side $i: $line" >&2
        echo "$side ${line#*: }" >>"$out/figures"
    done
done

# Median of each key=value per side.
awk -v sides="$sides" '
{
    side = $1
    for (i = 2; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[2] == "") continue
        if (!(kv[1] in seen)) { seen[kv[1]] = 1; keys[++nk] = kv[1] }
        n = ++cnt[side, kv[1]]
        val[side, kv[1], n] = kv[2] + 0
    }
}
function median(side, k,    n, i, j, t, a) {
    n = cnt[side, k]
    for (i = 1; i <= n; i++) a[i] = val[side, k, i]
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
    ns = split(sides, sd, " ")
    printf "%-16s", "median"
    for (j = 1; j <= ns; j++) printf " %12s", sd[j]
    printf "\n"
    for (i = 1; i <= nk; i++) {
        printf "%-16s", keys[i]
        for (j = 1; j <= ns; j++) printf " %12.2f", median(sd[j], keys[i])
        printf "\n"
    }
}' "$out/figures"
