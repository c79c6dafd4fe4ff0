#!/usr/bin/env python3
"""The calls a program's thread makes that wait for prof's output return
while the output's reader reads nothing (flush_stuck.c; issue 36).

    flush_stuck.py FLUSH_STUCK [MODE...]

For each wait: prof_flush() with PROF_SUMMARY=stdout on a pipe (one page of
room) whose read end this script holds open and does not read; prof_flush()
with PROF_TRACE on a FIFO held open the same way (after a burst larger than
the trace's queue); prof_ranks_emit() (the cross-rank table) on the stuck
stdout. The program makes its calls, checks after each that prof_stats()
counts every zone, and says when it is done; only then does the reader read.
Before the bound, the first call that waited for the stuck reader never
returned: the program's alarm (and this script's HANG_S) end it and the test
fails. What is judged: every call returned, the numbers were complete, one
line said the output was behind, and once the reader reads, what was queued
arrives (the final summary counts every zone; the trace is whole). Call
times are printed as figures, not judged."""
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from pipe_reader import read_all

HANG_S = 90.0          # a hang guard, past the program's own alarm
F_SETPIPE_SZ = 1031    # fcntl.F_SETPIPE_SZ, missing before Python 3.10
CALLS = 40


def run(exe, mode):
    with tempfile.TemporaryDirectory(prefix='prof-flush-stuck-') as d:
        env = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}
        env.update(PROF='1', PROF_SUMMARY_EVERY='1steps', PROF_SUMMARY='stdout')
        r, w = os.pipe()
        tfd = None
        if mode == 'trace':
            fifo = os.path.join(d, 'trace.json')
            os.mkfifo(fifo)
            # Held open and not read: prof opens the FIFO without waiting.
            tfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            fcntl.fcntl(tfd, F_SETPIPE_SZ, 4096)
            env.update(PROF_TRACE=fifo, PROF_BUFFER='2M')
            # stdout is read at once here: only the trace is stuck.
            out, reader = [], None
        else:
            try:
                fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
            except OSError:
                pass    # the default 64 KB: summaries fill it a few calls later
        p = subprocess.Popen([exe, mode, d, str(CALLS)], env=env, stdout=w,
                             stderr=subprocess.PIPE)
        os.close(w)
        out = []
        if mode == 'trace':
            reader = threading.Thread(target=read_all, args=(r, out))
            reader.start()
        err = []
        et = threading.Thread(target=lambda: err.append(p.stderr.read()))
        et.start()
        done = os.path.join(d, 'done')
        end = time.monotonic() + HANG_S
        while not os.path.exists(done) and p.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        finished = os.path.exists(done)
        if not finished:
            p.kill()
        # Now read to the ends: what was queued comes once the reader reads.
        trace = []
        tt = None
        if tfd is not None:
            tt = threading.Thread(target=read_all, args=(tfd, trace))
            tt.start()
        if mode == 'trace':
            reader.join(timeout=HANG_S)
        else:
            read_all(r, out)
        if tt is not None:
            tt.join(timeout=HANG_S)
        try:
            p.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            print(f'FAIL [{mode}]: the program did not exit once its reader read')
            return 1
        et.join()
        stderr = err[0].decode(errors='replace') if err else ''
        if not finished:
            print(f'FAIL [{mode}]: the calls did not all return while the reader read nothing '
                  f'(a call waited for it without a bound); exit {p.returncode}\n'
                  f'{stderr[-1500:]}')
            return 1
        if p.returncode != 0:
            print(f'FAIL [{mode}]: exit status {p.returncode}\n{stderr[-2000:]}')
            return 1
        result = open(os.path.join(d, 'result')).read().strip()
        vals = dict(kv.split('=', 1) for kv in result.split())
        print(f'{mode}: {result}')
        said = stderr.count('the output writer is behind')
        if said != 1:
            print(f'FAIL [{mode}]: {said} lines say the output writer is behind, want 1:\n'
                  f'{stderr[-2000:]}')
            return 1
        text = b''.join(out).decode(errors='replace')
        finals = [m.start() for m in re.finditer(r'^prof summary: .*final:', text, re.M)]
        if len(finals) != 1:
            print(f'FAIL [{mode}]: {len(finals)} final summaries on stdout once it was read, '
                  f'want 1\nstderr: {stderr[-1500:]}\nstdout tail: {text[-1500:]}')
            return 1
        row = re.search(r'^stuck_zone +(\d+) ', text[finals[0]:], re.M)
        if row is None or int(row.group(1)) != int(vals['made']):
            print(f'FAIL [{mode}]: the final summary counts {row.group(1) if row else None} '
                  f'zones, {vals["made"]} were made')
            return 1
        if mode == 'ranks' and 'prof ranks: step' not in text:
            print(f'FAIL [ranks]: no cross-rank table on stdout once it was read:\n'
                  f'{text[:1500]}')
            return 1
        if mode == 'trace':
            # Strict JSON with its end (json.loads; trace_check's per-event
            # checks take ten times as long on 0.7 M events, and
            # writer_stall runs them on such a trace).
            data = b''.join(trace)
            try:
                events = json.loads(data)
            except ValueError as e:
                print(f'FAIL [trace]: the trace the reader got is not JSON: {e}')
                return 1
            zones = sum(1 for e in events if e.get('ph') == 'X' and e.get('name') == 'stuck_zone')
            dropped = sum(e.get('args', {}).get('dropped_events', 0) for e in events
                          if e.get('ph') == 'i' and 'trace events dropped' in e.get('name', ''))
            print(f'trace: {zones} zones, {dropped} events said dropped, {len(data)} bytes')
            if zones > int(vals['made']) or zones + dropped < int(vals['made']):
                print(f'FAIL [trace]: {zones} zones and {dropped} said dropped; '
                      f'{vals["made"]} were made')
                return 1
    return 0


def main():
    exe = sys.argv[1]
    modes = sys.argv[2:] or ['summary', 'trace', 'ranks']

    for mode in modes:
        if run(exe, mode) != 0:
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
