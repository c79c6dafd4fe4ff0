# steps.sh - sourced by demo.sh and test.sh: run a step with its output in
# a log, and when it fails say so loudly: what failed, its exit status, the
# log's path and its last lines.
#
#   step_log NAME LOG COMMAND...   quiet; output to LOG
#   step_tee NAME LOG COMMAND...   output to LOG and to the terminal
# Both return the command's exit status (so that `set -e` callers can
# decide), having printed the failure report.

STEP_TAIL=${STEP_TAIL:-40}

step_failed() {   # name, log, status
    {
        printf '\n*** FAILED: %s (exit status %s)\n' "$1" "$3"
        printf '*** log: %s; its last %s lines:\n' "$2" "$STEP_TAIL"
        tail -n "$STEP_TAIL" "$2" | sed 's/^/    /'
        printf '*** end of %s\n\n' "$2"
    } >&2
}

step_log() {
    _name=$1 _log=$2
    shift 2
    _rc=0
    "$@" > "$_log" 2>&1 || _rc=$?
    [ "$_rc" = 0 ] || step_failed "$_name" "$_log" "$_rc"
    return "$_rc"
}

step_tee() {
    _name=$1 _log=$2
    shift 2
    _rc=0
    # sh has no pipefail: the status travels in a file.
    { "$@" 2>&1; echo $? > "$_log.rc"; } | tee "$_log"
    _rc=$(cat "$_log.rc" 2>/dev/null || echo 1)
    rm -f "$_log.rc"
    [ "$_rc" = 0 ] || step_failed "$_name" "$_log" "$_rc"
    return "$_rc"
}
