"""Helpers for the integration drivers: run tests/integration/prog with a
clean PROF_* environment, split its stderr into prof's own lines and the
summaries, and validate traces with tests/trace_check.py.

A driver is run by meson as  python3 DRIVER.py PROG TRACE_CHECK_PY  and
exits 0 (pass), 1 (fail) or 77 (skip)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PROG = None
trace_check = None
QUICK = bool(os.environ.get('PROF_TEST_QUICK', '') not in ('', '0'))


class Failure(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def setup():
    """Read argv, import trace_check; return a fresh temporary directory."""
    global PROG, trace_check
    if len(sys.argv) < 3:
        sys.exit(f'usage: {sys.argv[0]} PROG TRACE_CHECK_PY')
    PROG = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[2])))
    import trace_check as tc
    trace_check = tc
    return tempfile.mkdtemp(prefix='prof-it-')


def main(fn):
    """Run fn(tmpdir); exit 0/1/77."""
    tmp = setup()
    try:
        fn(tmp)
    except Failure as e:
        print(f'FAIL: {e}', file=sys.stderr)
        sys.exit(1)
    except trace_check.TraceError as e:
        print(f'FAIL: invalid trace: {e}', file=sys.stderr)
        sys.exit(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print('ok')
    sys.exit(0)


def skip(msg):
    print(f'SKIP: {msg}')
    sys.exit(77)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}

    for k in ('RANK', 'LOCAL_RANK', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK'):
        env.pop(k, None)
    env['PROF_TEST_QUICK'] = os.environ.get('PROF_TEST_QUICK', '')
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Result:
    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = args, rc, out, err

    @property
    def values(self):
        """key=value lines of stdout (last one wins)."""
        d = {}
        for line in self.out.decode('utf-8', 'replace').splitlines():
            if '=' in line:
                k, v = line.split('=', 1)
                d[k] = v
        return d

    @property
    def prof_lines(self):
        """prof's own messages on stderr ("prof: ..."), as text."""
        return [l for l in self.err.decode('utf-8', 'replace').splitlines()
                if l.startswith('prof: ')]

    @property
    def summaries(self):
        """Text summaries on stderr: lists of lines, each starting at a header."""
        blocks, cur = [], None
        for l in self.err.decode('utf-8', 'replace').splitlines():
            if l.startswith('prof summary: '):
                cur = [l]
                blocks.append(cur)
            elif cur is not None and not l.startswith('prof: '):
                cur.append(l)
        return blocks

    def describe(self):
        return (f'{" ".join(self.args)}: rc {self.rc}\n--- stdout\n'
                f'{self.out.decode("utf-8", "replace")[-3000:]}\n--- stderr\n'
                f'{self.err.decode("utf-8", "replace")[-3000:]}')


def run(args, env=None, timeout=120, expect_rc=0):
    args = [PROG] + [str(a) for a in args]
    try:
        p = subprocess.run(args, env=env if env is not None else clean_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise Failure(f'{" ".join(args)}: no exit after {timeout} s (hang?)\n'
                      f'--- stderr\n{(e.stderr or b"").decode("utf-8", "replace")[-3000:]}')
    r = Result(args, p.returncode, p.stdout, p.stderr)
    if expect_rc is not None:
        check(r.rc == expect_rc, f'exit status {r.rc}, expected {expect_rc}\n{r.describe()}')
    return r


_sanitizer = None


def start_forever(tmp, name, **env):
    """prog 'forever' with PROF_TRACE=tmp/name, once it says it is ready
    (recording, trace open): (process, path)."""
    path = os.path.join(tmp, name)
    p = subprocess.Popen([PROG, 'forever'], env=clean_env(PROF=1, PROF_TRACE=path, **env),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline()
    if line.strip() != b'ready=1':
        p.kill()
        raise Failure(f'{name}: no ready line, got {line!r}; stderr: {p.stderr.read()[-2000:]!r}')
    return p, path


def wait_size(path, minimum, timeout=20):
    end = time.monotonic() + timeout
    while os.path.getsize(path) < minimum:
        check(time.monotonic() < end, f'{path} stays below {minimum} bytes')
        time.sleep(0.01)


def killed_traces(tmp, suffix, minimum):
    """Start prog 'forever' three times, SIGKILL it once its trace holds
    `minimum` bytes (at once, 50 ms and 200 ms later), and yield each trace
    path."""
    for i, delay in enumerate((0, 0.05, 0.2)):
        p, path = start_forever(tmp, f'kill{i}{suffix}')
        wait_size(path, minimum)
        time.sleep(delay)
        p.kill()
        p.communicate(timeout=30)
        check(p.returncode == -signal.SIGKILL, f'returncode {p.returncode}')
        yield path


def sanitizer():
    """'none', 'address' or 'thread': how prog (and the library) were built."""
    global _sanitizer
    if _sanitizer is None:
        _sanitizer = run(['sanitizer']).values.get('sanitizer', 'none')
    return _sanitizer


def load_trace(path, **kw):
    return trace_check.check_trace(path, **kw)


def json_lines(path):
    """Every line of a JSON-lines summary file, strictly parsed."""
    def no_const(name):
        raise Failure(f'{path}: non-standard JSON constant {name}')
    with open(path, 'rb') as f:
        data = f.read()
    text = data.decode('utf-8')
    check(text.endswith('\n'), f'{path}: does not end with a newline')
    out = []
    for i, line in enumerate(text.split('\n')[:-1]):
        try:
            out.append(json.loads(line, parse_constant=no_const))
        except json.JSONDecodeError as e:
            raise Failure(f'{path}: line {i + 1} is not JSON: {e}: {line[:300]!r}')
    return out


def stage(section, name):
    for s in section['stages']:
        if s['name'] == name:
            return s
    raise Failure(f'no stage {name!r} in {[s["name"] for s in section["stages"]][:30]}')
