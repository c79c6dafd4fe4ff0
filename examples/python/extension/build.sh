#!/bin/sh
# Build fastops and cyops against the prof that `python3 -c 'import prof'`
# finds (installed with pip, or the in-tree build on PYTHONPATH), without
# meson: what a project with its own build does.
#
#   ./build.sh [OUTDIR]        (PYTHON=... and CC=... are honoured)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
py=${PYTHON:-python3}
cc=${CC:-cc}
cython=${CYTHON:-cython3}

inc=$("$py" -c 'import prof; print(prof.get_include())')          # prof.h
pxd=$("$py" -c 'import prof; print(prof.get_pxd_dir())')          # prof/__init__.pxd
link=$("$py" -c 'import prof; print(" ".join(prof.get_link_args()))')
pyinc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
ext=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')

mkdir -p "$out"
# shellcheck disable=SC2086  # $link is a list of arguments
"$cc" -O2 -Wall -shared -fPIC -I"$inc" -I"$pyinc" "$here/fastops.c" \
    -o "$out/fastops$ext" $link
"$cython" -3 -I "$pxd" "$here/cyops.pyx" -o "$out/cyops.c"
# shellcheck disable=SC2086
"$cc" -O2 -shared -fPIC -I"$inc" -I"$pyinc" "$out/cyops.c" \
    -o "$out/cyops$ext" $link
echo "built $out/fastops$ext $out/cyops$ext"
