#!/usr/bin/env python3
"""A stalled trace disk must not stall the application (writer_stall.c).

    writer_stall.py WRITER_STALL TRACE_CHECK

PROF_TRACE is a FIFO whose reader opens it and reads nothing until the
program says it is done: first the reader waits for the pipe to fill (the
trace writer is then blocked in write(2)) and tells the program (DIR/full);
the program calls prof_stats() while the writer stays blocked and says so
(DIR/stats-done); then the reader reads to the end. Before the writer stage,
the collector held the runtime lock while blocked, so prof_stats() never
returned and the program never said it was done: the reader gives up after
HANG_S and the test fails. No wall time is judged: the causal order is.
The trace the reader got must be valid, closed, and hold every zone."""
import fcntl
import os
import select
import subprocess
import sys
import tempfile
import termios
import threading
import time

HANG_S = 60.0          # a hang guard, not a figure: the calls take ms
F_GETPIPE_SZ = 1032    # fcntl.F_GETPIPE_SZ, missing before Python 3.10


def pipe_bytes(fd):
    """Bytes waiting in the pipe (FIONREAD)."""
    import array
    buf = array.array('i', [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


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
        verdict = {}

        def wait_for(path, what):
            end = time.monotonic() + HANG_S
            while not os.path.exists(path):
                if time.monotonic() > end:
                    verdict['fail'] = what
                    return False
                time.sleep(0.01)
            return True

        def reader():
            # Full: what is left is less than one page (a write(2) of the
            # writer's then blocks).
            size = fcntl.fcntl(fd, F_GETPIPE_SZ)
            end = time.monotonic() + HANG_S
            while pipe_bytes(fd) < size - 4096:
                if time.monotonic() > end:
                    verdict['fail'] = f'the pipe never filled ({pipe_bytes(fd)} of {size} bytes)'
                    break
                time.sleep(0.01)
            # (Told also when it never filled, so that the program ends.)
            open(os.path.join(d, 'full'), 'w').close()
            if 'fail' not in verdict:
                wait_for(os.path.join(d, 'stats-done'),
                         f'prof_stats() did not return within {HANG_S:.0f} s while the '
                         f'trace writer was blocked: it waited on the stalled writer')
            os.set_blocking(fd, True)
            while True:
                select.select([fd], [], [])
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
            p = subprocess.run([exe, d], env=env, capture_output=True, text=True,
                               timeout=2 * HANG_S + 60)
        except subprocess.TimeoutExpired:
            print(f'FAIL: no exit within {2 * HANG_S + 60:.0f} s')
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
        print(f'slowest prof_stats() while the writer was blocked: {slowest:.1f} ms (a figure); '
              f'trace: {zones} zones, {len(b"".join(got))} bytes')
        if 'fail' in verdict:
            print('FAIL: ' + verdict['fail'])
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
