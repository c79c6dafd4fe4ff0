#!/usr/bin/env python3
"""Signals, pipes and abrupt ends: run tests/faults/signals in each mode and
judge what it leaves (docs/CONFIG.md, "What happens when things go wrong").

    signals_check.py SIGNALS_EXE TRACE_CHECK [--only A,B] [--skip A,B] [--seed S]

  handler          zones in a SIGALRM handler: recorded or counted, exactly
  pipe-*           summary to a pipe whose reader has gone: exit 0, no SIGPIPE
  term, int        SIGTERM / SIGINT while writing: final summary, trace closed,
                   then the signal's own end
  term2, int2      a second signal right after the first: dies at once, the
                   trace still ends with ']'
  kill             SIGKILL at random moments: the trace loads once ']' is added
  exit-parked      exit while threads are parked inside zones: exact counts
  exit-running     exit while threads are recording: no crash, no hang
  exit-thread      exit() from a thread that is not main
  fifo             trace and summary paths that are FIFOs: no reader, a
                   reader, a reader that goes away
  off              prof off: no thread, no file, no output
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT = 60


class Fail(Exception):
    pass


def base_env(**kw):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith('PROF') and not k.startswith('PROF_TEST'):
            del env[k]
    env.update(kw)
    return env


def start(exe, args, env, **kw):
    return subprocess.Popen([exe] + args, env=env, stdin=kw.pop('stdin', subprocess.DEVNULL),
                            stdout=kw.pop('stdout', subprocess.PIPE),
                            stderr=kw.pop('stderr', subprocess.PIPE), **kw)


def wait_ready(p):
    # With PROF_SUMMARY=stdout and a 20 ms period, a loaded machine can
    # print a periodic summary before the program's "ready": its lines are
    # passed over (each is one write(2), so "ready" stays a line of its own).
    line = p.stdout.readline()
    while line and line != b'ready\n':
        line = p.stdout.readline()
    if line != b'ready\n':
        p.kill()
        out, err = p.communicate()
        raise Fail(f'no "ready" from the program (got {line!r}); stderr: {err.decode()[:500]}')


def finish(p, timeout=TIMEOUT):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise Fail(f'no exit within {timeout} s (deadlock?)')
    return p.returncode, out.decode(errors='replace') if out else '', err.decode(errors='replace')


def prof_lines(err):
    return [l for l in err.splitlines() if l.startswith('prof: ')]


def check_trace(tc, path, terminated=True):
    try:
        return tc.check_trace(path, allow_unterminated=not terminated)
    except tc.TraceError as e:
        raise Fail(f'trace {os.path.basename(path)}: {e}')


def t_handler(a, tc, d):
    p = start(a.exe, ['handler'], base_env(PROF='1', PROF_BUFFER='1M', PROF_SUMMARY='off'))
    rc, out, err = finish(p)
    if rc != 0:
        raise Fail(f'exit status {rc}: {err.strip()[-800:]}')
    return out.strip()


def t_pipe(a, tc, d, how):
    env = base_env(PROF='1', PROF_SUMMARY='stdout')
    if how == 'periodic':
        env['PROF_SUMMARY_EVERY'] = '20ms'
    p = start(a.exe, ['pipe', how], env, stdin=subprocess.PIPE)
    wait_ready(p)
    p.stdout.close()                     # the reader goes away
    p.stdin.write(b'go\n')
    p.stdin.close()
    try:
        rc = p.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        raise Fail('no exit (deadlock?)')
    err = p.stderr.read().decode(errors='replace')
    if rc != 0:
        raise Fail(f'exit status {rc}' + (' (killed by SIGPIPE)' if rc == -signal.SIGPIPE else '') +
                   f'; stderr: {err.strip()[:300]}')
    if len(prof_lines(err)) > 1:
        raise Fail('more than one message: ' + ' | '.join(prof_lines(err)))
    return f'exit 0; messages: {prof_lines(err) or "none"}'


def t_pipe_head(a, tc, d):
    """The shell's `program | head -c1`: head exits after one byte."""
    env = base_env(PROF='1', PROF_SUMMARY='stdout', PROF_SUMMARY_EVERY='10ms')
    p1 = subprocess.Popen([a.exe, 'pipe', 'periodic'], env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p2 = subprocess.Popen(['head', '-c1'], stdin=p1.stdout, stdout=subprocess.DEVNULL)
    p1.stdout.close()
    p2.wait(timeout=TIMEOUT)             # head has gone before "go"
    p1.stdin.write(b'go\n')
    p1.stdin.close()
    try:
        rc = p1.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p1.kill()
        raise Fail('no exit (deadlock?)')
    err = p1.stderr.read().decode(errors='replace')
    if rc != 0:
        raise Fail(f'exit status {rc}; stderr: {err.strip()[:300]}')
    return 'exit 0'


def busy(a, d, i, **env):
    trace = f'{d}/busy-{i}.json'
    summary = f'{d}/busy-{i}.txt'
    p = start(a.exe, ['busy'], base_env(PROF='1', PROF_TRACE=trace, PROF_SUMMARY=summary,
                                        PROF_SUMMARY_EVERY='50ms', **env))
    wait_ready(p)
    return p, trace, summary


def t_signal(a, tc, d, sig, second, runs):
    rng = random.Random(a.seed + sig + 100 * second)
    events = 0
    for i in range(runs):
        p, trace, summary = busy(a, d, f'{sig}-{second}-{i}')
        time.sleep(rng.uniform(0.05, 0.4))
        p.send_signal(sig)
        if second:
            time.sleep(rng.uniform(0, 0.005))
            p.send_signal(sig)
        rc, out, err = finish(p)
        if rc != -sig:
            raise Fail(f'run {i}: exit status {rc}, want death by signal {sig}; {err[-300:]}')
        ev = check_trace(tc, trace, terminated=True)
        events += len(ev)
        if not second:
            text = open(summary, errors='replace').read() if os.path.exists(summary) else ''
            if ', final:' not in text:
                raise Fail(f'run {i}: no final summary in {summary}')
        os.unlink(trace)
    return f'{runs} runs: died by signal {sig}, traces valid and closed ({events} events)'


def t_kill(a, tc, d, runs):
    rng = random.Random(a.seed)
    events = 0
    for i in range(runs):
        p, trace, summary = busy(a, d, f'kill-{i}')
        time.sleep(rng.uniform(0, 0.3))
        p.kill()
        finish(p)
        ev = check_trace(tc, trace, terminated=False)
        if not ev or ev[0].get('name') != 'process_name':
            raise Fail(f'run {i}: trace lost its header')
        events += len(ev)
        os.unlink(trace)
    return f'{runs} runs: every trace loads with "]" appended ({events} events)'


def last_summary(path):
    lines = [l for l in open(path, 'rb').read().split(b'\n') if l.strip()]
    if not lines:
        raise Fail(f'{path}: no summary')
    s = json.loads(lines[-1].decode('utf-8'))
    if s.get('kind') != 'final':
        raise Fail(f'{path}: last summary is {s.get("kind")!r}, not final')
    return s


def t_exit(a, tc, d, how, runs):
    for i in range(runs):
        trace, summary = f'{d}/exit-{how}-{i}.json', f'{d}/exit-{how}-{i}.jsonl'
        p = start(a.exe, ['exit-in-zones', how], base_env(
            PROF='1', PROF_TRACE=trace, PROF_SUMMARY=summary, PROF_SUMMARY_FORMAT='json'))
        rc, out, err = finish(p)
        if rc != 0:
            raise Fail(f'run {i}: exit status {rc}; {err[-300:]}')
        s = last_summary(summary)
        stages = {st['name']: st for st in s['total']['stages']}
        inner = stages.get('inner', {}).get('count', 0)
        want = 4 * 1000
        if (how == 'parked' and inner != want) or inner < want:
            raise Fail(f'run {i}: "inner" counted {inner}, want {want}'
                       f'{"" if how == "parked" else " or more"}')
        if stages.get('outer', {}).get('count', 0) != 0:
            raise Fail(f'run {i}: "outer" never ended but counted {stages["outer"]["count"]}')
        check_trace(tc, trace, terminated=True)
    return f'{runs} runs: exit 0, "inner" exact, "outer" not counted, trace closed'


def t_exit_thread(a, tc, d, runs):
    for i in range(runs):
        trace, summary = f'{d}/exit-thread-{i}.json', f'{d}/exit-thread-{i}.jsonl'
        p = start(a.exe, ['exit-thread'], base_env(
            PROF='1', PROF_TRACE=trace, PROF_SUMMARY=summary, PROF_SUMMARY_FORMAT='json'))
        rc, out, err = finish(p)
        if rc != 0:
            raise Fail(f'run {i}: exit status {rc}; {err[-300:]}')
        s = last_summary(summary)
        if not any(st['name'] == 'exiter' for st in s['total']['stages']):
            raise Fail(f'run {i}: the exiting thread\'s zone is missing')
        check_trace(tc, trace, terminated=True)
        os.unlink(trace)
    return f'{runs} runs: exit 0, final summary, trace closed'


def t_term_then_exit(a, tc, d, runs):
    """SIGTERM, then prof_shutdown() and _exit() while the signal's final
    report is still being written (a pool worker's terminate()): the final
    summary reaches its handler whole, whichever ends the process."""
    for i in range(runs):
        p = start(a.exe, ['term-then-exit'], base_env(PROF='1'))
        rc, out, err = finish(p)
        if rc not in (0, -signal.SIGTERM):
            raise Fail(f'run {i}: exit status {rc}; {err[-300:]}')
        if 'final' not in out.split():
            raise Fail(f'run {i}: the final summary was cut off (exit {rc}, '
                       f'stdout {out!r}); stderr: {err[-300:]}')
    return f'{runs} runs: the final summary whole'


def t_fifo(a, tc, d):
    """PROF_TRACE and PROF_SUMMARY name FIFOs nobody reads: one message each,
    no hang (opening a FIFO for writing waits for a reader unless told not
    to); a FIFO with a reader receives a valid trace; a reader that goes
    away mid-run costs one message, not the process (SIGPIPE)."""
    trace, summary = f'{d}/trace.fifo', f'{d}/summary.fifo'
    os.mkfifo(trace)
    os.mkfifo(summary)
    p = start(a.exe, ['exit-in-zones', 'parked'], base_env(PROF='1', PROF_TRACE=trace,
                                                           PROF_SUMMARY=summary))
    rc, out, err = finish(p, timeout=20)
    if rc != 0:
        raise Fail(f'exit status {rc}; {err[-300:]}')
    lines = prof_lines(err)
    if len(lines) != 2 or not all('cannot open' in l for l in lines):
        raise Fail(f'want two "cannot open" messages, got: {lines}')
    if 'prof summary:' not in err:
        raise Fail('the summary did not fall back to stderr')
    # With a reader the trace goes through the FIFO.
    copy = f'{d}/copy.json'
    with open(copy, 'wb') as f:
        reader = subprocess.Popen(['cat', trace], stdout=f)
        time.sleep(0.2)
        p = start(a.exe, ['exit-in-zones', 'parked'], base_env(PROF='1', PROF_TRACE=trace,
                                                               PROF_SUMMARY='off'))
        rc, out, err = finish(p, timeout=20)
        reader.wait(timeout=20)
    if rc != 0 or prof_lines(err):
        raise Fail(f'with a reader: exit status {rc}, messages {prof_lines(err)}')
    ev = check_trace(tc, copy, terminated=True)
    # A reader that goes away after 1000 bytes, while the main thread's
    # prof_flush() writes the trace: EPIPE and one message, not SIGPIPE.
    reader = subprocess.Popen(['head', '-c', '1000', trace], stdout=subprocess.DEVNULL)
    time.sleep(0.2)
    p = start(a.exe, ['handler'], base_env(PROF='1', PROF_TRACE=trace, PROF_SUMMARY='off',
                                           PROF_BUFFER='1M', PROF_TEST_QUICK='1'))
    rc, out, err = finish(p, timeout=60)
    reader.wait(timeout=20)
    if rc != 0:
        raise Fail(f'reader gone: exit status {rc}' +
                   (' (killed by SIGPIPE)' if rc == -signal.SIGPIPE else ''))
    if len(prof_lines(err)) != 1 or 'write failed' not in prof_lines(err)[0]:
        raise Fail(f'reader gone: want one "write failed" message, got {prof_lines(err)}')
    return (f'no reader: 2 messages, exit 0; with a reader: {len(ev)} events, valid; '
            f'reader gone: one message, exit 0')


def t_off(a, tc, d):
    trace = f'{d}/off.json'
    p = start(a.exe, ['off'], base_env(PROF_TRACE=trace))
    rc, out, err = finish(p)
    if rc != 0:
        raise Fail(f'exit status {rc}; {err.strip()[-600:]}')
    if err.strip():
        raise Fail(f'prof is off, yet at exit it printed: {err.strip()[:300]}')
    if os.path.exists(trace):
        raise Fail('prof is off, yet a trace file was created')
    return 'no thread, no file, no output'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('exe')
    ap.add_argument('trace_check')
    ap.add_argument('--only', help='comma-separated names of the tests to run')
    ap.add_argument('--skip', default='', help='comma-separated names of tests to leave out')
    ap.add_argument('--seed', type=int, default=int(os.environ.get('PROF_TEST_SEED', '6')))
    ap.add_argument('--kill-runs', type=int, default=20)
    ap.add_argument('--signal-runs', type=int, default=6)
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.trace_check)))
    import trace_check as tc

    tests = [
        ('handler', lambda d: t_handler(a, tc, d)),
        ('pipe-exit', lambda d: t_pipe(a, tc, d, 'exit')),
        ('pipe-periodic', lambda d: t_pipe(a, tc, d, 'periodic')),
        ('pipe-print', lambda d: t_pipe(a, tc, d, 'print')),
        ('pipe-head', lambda d: t_pipe_head(a, tc, d)),
        ('term', lambda d: t_signal(a, tc, d, signal.SIGTERM, False, a.signal_runs)),
        ('int', lambda d: t_signal(a, tc, d, signal.SIGINT, False, a.signal_runs)),
        ('term2', lambda d: t_signal(a, tc, d, signal.SIGTERM, True, a.signal_runs)),
        ('int2', lambda d: t_signal(a, tc, d, signal.SIGINT, True, a.signal_runs)),
        ('kill', lambda d: t_kill(a, tc, d, a.kill_runs)),
        ('exit-parked', lambda d: t_exit(a, tc, d, 'parked', 5)),
        ('exit-running', lambda d: t_exit(a, tc, d, 'running', 5)),
        ('exit-thread', lambda d: t_exit_thread(a, tc, d, 5)),
        ('term-exit', lambda d: t_term_then_exit(a, tc, d, 3)),
        ('fifo', lambda d: t_fifo(a, tc, d)),
        ('off', lambda d: t_off(a, tc, d)),
    ]
    failed = 0
    print(f'seed {a.seed} (PROF_TEST_SEED)')
    for name, fn in tests:
        if (a.only and name not in a.only.split(',')) or name in a.skip.split(','):
            continue
        with tempfile.TemporaryDirectory(prefix=f'prof-sig-{name}-') as d:
            t0 = time.time()
            try:
                msg = fn(d)
                print(f'ok   {name:14s} {time.time() - t0:5.1f}s  {msg}', flush=True)
            except Fail as e:
                failed += 1
                print(f'FAIL {name:14s} {time.time() - t0:5.1f}s  {e}', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
