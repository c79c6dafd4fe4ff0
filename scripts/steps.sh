# steps.sh - sourced by demo.sh, test.sh, deps.sh and .ci/run: run a step
# with its output in a log, show that it is alive, and when it fails say
# so loudly: what failed, its exit status, the log's path and its last
# lines.
#
#   step_log NAME LOG COMMAND...   says NAME, output to LOG, a heartbeat
#   step_tee NAME LOG COMMAND...   output to LOG and to the terminal, a
#                                  heartbeat between its lines
#   step_beat NAME LOG &           the heartbeat alone (step_beat_stop $!)
# Both return the command's exit status (so that `set -e` callers can
# decide), having printed the failure report.
#
# The heartbeat: every STEP_BEAT seconds (default 20) while the step runs,
# one line on stderr with its time so far and the log's last line (ninja's
# "[120/426] Compiling ...", apt's "Unpacking ...", meson test's last
# result), so that no step is silent for more than half a minute.

STEP_TAIL=${STEP_TAIL:-40}
STEP_BEAT=${STEP_BEAT:-20}

step_failed() {   # name, log, status
    {
        printf '\n*** FAILED: %s (exit status %s)\n' "$1" "$3"
        printf '*** log: %s; its last %s lines:\n' "$2" "$STEP_TAIL"
        tail -n "$STEP_TAIL" "$2" | sed 's/^/    /'
        printf '*** end of %s\n\n' "$2"
    } >&2
}

step_beat() {     # name, log; runs until killed (step_beat_stop)
    _beat_t0=$(date +%s)
    # Its sleep goes with it: a sleep left behind would hold a pipe that
    # the caller's output goes to (sh scripts/test.sh | tee) open.
    trap 'kill "$_beat_sleep" 2>/dev/null; exit 0' TERM
    while :; do
        sleep "$STEP_BEAT" &
        _beat_sleep=$!
        wait "$_beat_sleep"
        _beat_last=$(tail -n 1 "$2" 2>/dev/null | tr -d '\r' | tr -c '[:print:]\n' ' ' | cut -c1-110)
        printf '... %s: still running (%d s)%s\n' "$1" $(( $(date +%s) - _beat_t0 )) \
            "${_beat_last:+; last: $_beat_last}" >&2
    done
}

step_beat_stop() {   # the heartbeat's pid
    # "|| :": a heartbeat killed before its trap was set ends with 143,
    # which must not stop a `set -e` caller (deps.sh).
    kill "$1" 2>/dev/null || :
    wait "$1" 2>/dev/null || :
}

step_log() {
    _name=$1 _log=$2
    shift 2
    _rc=0
    printf -- '--- %s (log: %s)\n' "$_name" "$_log" >&2
    : > "$_log"
    step_beat "$_name" "$_log" &
    _beat=$!
    "$@" > "$_log" 2>&1 || _rc=$?
    step_beat_stop "$_beat"
    [ "$_rc" = 0 ] || step_failed "$_name" "$_log" "$_rc"
    return "$_rc"
}

step_tee() {
    _name=$1 _log=$2
    shift 2
    _rc=0
    : > "$_log"
    step_beat "$_name" "$_log" &
    _beat=$!
    # sh has no pipefail: the status travels in a file.
    { _rc=0; "$@" 2>&1 || _rc=$?; echo "$_rc" > "$_log.rc"; } | tee "$_log"
    step_beat_stop "$_beat"
    _rc=$(cat "$_log.rc" 2>/dev/null || echo 1)
    rm -f "$_log.rc"
    [ "$_rc" = 0 ] || step_failed "$_name" "$_log" "$_rc"
    return "$_rc"
}
