"""The process dies while tracing.
  SIGKILL: the file holds whole events; it is not terminated, and becomes
           valid JSON (strictly) once ']' is appended.
  SIGTERM, SIGINT (default action): the final summary is printed, the trace
           is complete (closing ']'), and the process still dies of the
           signal."""
import os
import signal
import subprocess
import time
from common import Failure, check, main, clean_env, load_trace
import common


def start(tmp, tag):
    path = os.path.join(tmp, f'{tag}.json')
    p = subprocess.Popen([common.PROG, 'forever'], env=clean_env(PROF=1, PROF_TRACE=path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline()
    if line.strip() != b'ready=1':
        p.kill()
        raise Failure(f'{tag}: no ready line, got {line!r}; stderr: {p.stderr.read()[-2000:]!r}')
    return p, path


def wait_size(path, minimum, timeout=10):
    end = time.monotonic() + timeout
    while os.path.getsize(path) < minimum:
        check(time.monotonic() < end, f'{path} stays below {minimum} bytes')
        time.sleep(0.01)


def test(tmp):
    for i, delay in enumerate((0, 0.05, 0.2)):
        p, path = start(tmp, f'kill{i}')
        wait_size(path, 2000)
        time.sleep(delay)
        p.kill()
        p.communicate(timeout=30)
        check(p.returncode == -signal.SIGKILL, f'returncode {p.returncode}')
        try:
            load_trace(path)
            raise Failure('a killed process wrote the closing "]"?')
        except common.trace_check.TraceError as e:
            check('no closing' in str(e), f'killed trace invalid for another reason: {e}')
        ev = load_trace(path, allow_unterminated=True, min_events=1)
        check(any(e['name'] == 'train_step' for e in ev), 'no train_step event in killed trace')

    for sig in (signal.SIGTERM, signal.SIGINT):
        p, path = start(tmp, sig.name)
        wait_size(path, 2000)
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
