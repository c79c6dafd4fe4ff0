#!/usr/bin/env python3
"""A stalled trace disk must not stall the application (writer_stall.c).

    writer_stall.py WRITER_STALL TRACE_CHECK

PROF_TRACE is a FIFO; its reader opens it, then reads nothing for 3 s (the
pipe fills and the trace writer blocks in write(2)), then reads to the end.
Meanwhile the program calls prof_stats() every 50 ms: each call must return
in well under a second (before the writer stage, the collector held the
runtime lock while blocked, and prof_stats() waited for the reader). The
trace the reader got must be valid, closed, and hold every zone."""
import os
import subprocess
import sys
import tempfile
import threading
import time

PAUSE_S = 3.0
LIMIT_MS = 500.0


def main():
    exe, tc_path = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(tc_path)))
    import trace_check as tc

    with tempfile.TemporaryDirectory(prefix='prof-stall-') as d:
        fifo, out = os.path.join(d, 'trace.json'), os.path.join(d, 'got.json')
        os.mkfifo(fifo)
        # Open before the program starts (prof opens the FIFO without
        # waiting and gives up when nobody reads), without blocking.
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        got = []

        def reader():
            time.sleep(PAUSE_S)
            os.set_blocking(fd, True)
            while True:
                b = os.read(fd, 1 << 16)
                if not b:
                    break
                got.append(b)
            os.close(fd)

        th = threading.Thread(target=reader)
        th.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}
        env.update(PROF='1', PROF_TRACE=fifo, PROF_SUMMARY='off')
        try:
            p = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            print('FAIL: no exit within 120 s')
            return 1
        th.join(timeout=60)
        if p.returncode != 0:
            print(f'FAIL: exit status {p.returncode}\n{p.stderr}')
            return 1
        vals = dict(l.split('=', 1) for l in p.stdout.split() if '=' in l)
        slowest = float(vals.get('slowest_stats_ms', 'inf'))
        with open(out, 'wb') as f:
            f.write(b''.join(got))
        try:
            events = tc.check_trace(out)
        except tc.TraceError as e:
            print(f'FAIL: the trace the reader got: {e}')
            return 1
        zones = sum(1 for e in events if e['ph'] == 'X' and e['name'] == 'stall_zone')
        print(f'slowest prof_stats() while the writer was blocked: {slowest:.1f} ms '
              f'(limit {LIMIT_MS:.0f}); trace: {zones} zones, {len(b"".join(got))} bytes')
        if slowest >= LIMIT_MS:
            print('FAIL: prof_stats() waited on the stalled trace writer')
            return 1
        if zones != 20000:
            print(f'FAIL: {zones} stall_zone events in the trace, want 20000')
            return 1
        if p.stderr.strip():
            print(f'FAIL: unexpected messages: {p.stderr.strip()[:500]}')
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
