#!/bin/sh
# Install what building and testing prof needs, from Debian's packages, when
# it is missing. Run as root on a fresh Debian 12 machine; a no-op when
# everything is there.
set -eu

need=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

for p in "$@"; do
    have_pkg "$p" || need="$need $p"
done
[ -z "$need" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "deps: missing packages:$need; run as root or install them" >&2
    exit 1
fi
echo "deps: installing$need" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $need >/dev/null
