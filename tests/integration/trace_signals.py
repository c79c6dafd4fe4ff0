"""The process dies while tracing.
  SIGKILL: the file holds whole events; it is not terminated, and becomes
           valid JSON (strictly) once ']' is appended.
  SIGTERM, SIGINT (default action): the final summary is printed, the trace
           is complete (closing ']'), and the process still dies of the
           signal."""
import signal
import subprocess
import time
from common import Failure, check, main, load_trace
import common


def start(tmp, tag):
    return common.start_forever(tmp, f'{tag}.json')


def test(tmp):
    for path in common.killed_traces(tmp, '.json', 2000):
        try:
            load_trace(path)
            raise Failure('a killed process wrote the closing "]"?')
        except common.trace_check.TraceError as e:
            check('no closing' in str(e), f'killed trace invalid for another reason: {e}')
        ev = load_trace(path, allow_unterminated=True, min_events=1)
        check(any(e['name'] == 'train_step' for e in ev), 'no train_step event in killed trace')

    for sig in (signal.SIGTERM, signal.SIGINT):
        p, path = start(tmp, sig.name)
        common.wait_size(path, 2000)
        # Both threads' zones are in the file before the signal: a zone
        # still open when the run ends is not an event (slow builds, ASan,
        # may not have ended a load_batch yet at 2000 bytes).
        end = time.monotonic() + 30
        while b'"load_batch"' not in open(path, 'rb').read():
            check(time.monotonic() < end, f'{sig.name}: no load_batch event within 30 s')
            time.sleep(0.01)
        p.send_signal(sig)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            raise Failure(f'{sig.name}: the process did not end within 60 s')
        check(p.returncode == -sig, f'{sig.name}: returncode {p.returncode}, expected {-sig}')
        ev = load_trace(path, expect_stages=['train_step', 'load_batch'])
        text = err.decode('utf-8', 'replace')
        check('prof summary: ' in text and 'final' in text,
              f'{sig.name}: no final summary on stderr:\n{text[-2000:]}')
        check('train_step' in text, f'{sig.name}: the summary lacks the stages')


main(test)
