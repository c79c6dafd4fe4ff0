#!/bin/sh
# Install what building and testing prof needs, from Debian's packages, when
# it is missing. Run as root on a fresh Debian 12 machine; a no-op when
# everything is there. apt's output goes to a log, its last line shown
# every 20 s while apt runs; when apt fails, the script says which step
# and shows the log's last lines.
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
log=${PROF_DEPS_LOG:-${TMPDIR:-/tmp}/prof-deps.log}
: > "$log"
. "$(dirname "$0")/steps.sh"
apt() {   # what, then the command; apt's own lines make the heartbeat
    what=$1; shift
    echo "deps: $what ..." >&2
    step_beat "deps: $what" "$log" &
    beat=$!
    rc=0
    "$@" >> "$log" 2>&1 || rc=$?
    step_beat_stop "$beat"
    if [ "$rc" != 0 ]; then
        echo "deps: FAILED: $what ($*)" >&2
        echo "deps: last 40 lines of $log:" >&2
        tail -n 40 "$log" | sed 's/^/    /' >&2
        exit 1
    fi
}
echo "deps: installing$need (log: $log)" >&2
export DEBIAN_FRONTEND=noninteractive
apt "apt-get update" apt-get update -q
# A fresh machine may be running its own apt (unattended upgrades): wait
# for dpkg's lock rather than fail on it.
# shellcheck disable=SC2086
apt "apt-get install" apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=600 $need
