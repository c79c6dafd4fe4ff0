#!/usr/bin/env python3
"""A stalled trace disk must not stall the application (writer_stall.c),
and a stuck stdout or trace reader must cost summaries and trace events,
never records (issue 28).

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
import re
import select
import subprocess
import sys
import tempfile
import termios
import threading
import time

from pipe_reader import read_all

HANG_S = 60.0          # a hang guard, not a figure: the calls take ms
F_SETPIPE_SZ = 1031    # fcntl.F_SETPIPE_SZ, missing before Python 3.10
F_GETPIPE_SZ = 1032    # fcntl.F_GETPIPE_SZ, missing before Python 3.10
STALL_S = 10.0         # the stuck-reader run (a third under PROF_TEST_QUICK)


def pipe_bytes(fd):
    """Bytes waiting in the pipe (FIONREAD)."""
    import array
    buf = array.array('i', [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


def run_until_merged(exe, d, args, env, w, seconds):
    """Start `writer_stall summary D ARGS` with stdout on w (closed here),
    which runs `seconds`, then until D/stop: this makes D/stop once the
    program says periodic summaries are merged (the summary queue is full:
    later on a loaded machine, where the collector makes them late), and
    returns once the program made D/done (or the hang guard passed: D/stop
    is made then, and the caller's checks fail). Returns the process, the
    list its stderr lines go to, and the thread that reads them."""
    stop, done = os.path.join(d, 'stop'), os.path.join(d, 'done')
    merged_said = b'periodic summaries are merged'
    p = subprocess.Popen([exe, 'summary', d] + args, env=env, stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    err = []

    def read_err():
        for line in p.stderr:
            err.append(line)
            if merged_said in line and not os.path.exists(stop):
                open(stop, 'w').close()
    et = threading.Thread(target=read_err)
    et.start()
    end = time.monotonic() + seconds + HANG_S
    while not os.path.exists(done) and p.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    if not os.path.exists(stop):
        open(stop, 'w').close()     # the hang guard: never said (a FAIL below)
        while not os.path.exists(done) and p.poll() is None and \
                time.monotonic() < end + HANG_S:
            time.sleep(0.05)
    return p, err, et


def stuck_readers(exe, tc, with_trace):
    """PROF_SUMMARY=stdout on a pipe (one page of room) that nobody reads
    for the whole run (with_trace: and PROF_TRACE on a FIFO nobody reads
    either), at about 1 M zones a second with a summary every 20 ms. The
    rings hold a second of zones (PROF_BUFFER=1M), so that a collector
    only slowed by a loaded machine loses nothing, while one blocked for
    the whole run loses most. Before the writer
    thread, the collector blocked in write(2) on stdout and stopped
    draining: most records were dropped (the final summary said so, and
    its count fell short). Now the final summary must count every zone
    made and say 0 dropped; the periodic summaries merged meanwhile are
    said on stderr; the trace is whole, says how many of its events it dropped,
    and holds the rest."""
    quick = os.environ.get('PROF_TEST_QUICK', '') not in ('', '0')
    seconds = STALL_S / 3 if quick else STALL_S
    with tempfile.TemporaryDirectory(prefix='prof-stuck-') as d:
        fifo = os.path.join(d, 'trace.json')
        os.mkfifo(fifo)
        tfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        r, w = os.pipe()
        try:
            fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
        except OSError:
            pass    # the default 64 KB: summaries fill it a little later
        env = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}
        env.update(PROF='1', PROF_SUMMARY='stdout', PROF_SUMMARY_EVERY='20ms', PROF_BUFFER='1M')
        if with_trace:
            env['PROF_TRACE'] = fifo
        # The program runs `seconds`, then until DIR/stop: with stdout
        # alone, until it said that periodic summaries are merged (the
        # queue of 256 is full: 5 s of 20 ms summaries on a quiet machine,
        # longer on a loaded one, where the collector makes them late).
        if with_trace:
            open(os.path.join(d, 'stop'), 'w').close()
        p, err, et = run_until_merged(exe, d, [str(seconds)], env, w, seconds)
        out, trace = [], []
        # Now read both to their ends (the final summary and the trace's
        # end come once the writer can write).
        tt = threading.Thread(target=read_all, args=(tfd, trace))
        tt.start()
        read_all(r, out)
        tt.join(timeout=HANG_S)
        try:
            p.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            print('FAIL: the program did not exit')
            return 1
        et.join()
        stderr = b''.join(err).decode(errors='replace')
        text = b''.join(out).decode(errors='replace')
        if p.returncode != 0 or not os.path.exists(os.path.join(d, 'done')):
            print(f'FAIL: exit status {p.returncode}\n{stderr[-2000:]}')
            return 1
        made = int(open(os.path.join(d, 'made')).read().split()[0])
        finals = [m.start() for m in re.finditer(r'^prof summary: .*final:', text, re.M)]
        periodic = len(re.findall(r'^prof summary: .*, step [0-9]+: ', text, re.M))
        made_s = float(open(os.path.join(d, 'made')).read().split()[1])
        print(f'{"stdout and trace" if with_trace else "stdout"} not read: '
              f'{made} zones made in {made_s:.1f} s; stdout: {len(text)} bytes, '
              f'{periodic} periodic summaries, {len(finals)} final')
        if len(finals) != 1:
            print(f'FAIL: {len(finals)} final summaries on stdout, want 1\n'
                  f'stderr: {stderr[-2000:]}\nstdout tail: {text[-1500:]}')
            return 1
        final = text[finals[0]:]
        head = final.splitlines()[0]
        m = re.search(r'(\d+) dropped', head)
        row = re.search(r'^stall_zone +(\d+) ', final, re.M)
        print(f'final: {head}')
        print(f'       {row.group(0) if row else "(no stall_zone row)"}')
        if m is None or int(m.group(1)) != 0:
            print(f'FAIL: the final summary does not say 0 dropped: {head}\n{stderr[-2000:]}')
            return 1
        if row is None or int(row.group(1)) != made:
            print(f'FAIL: the final summary counts {row.group(1) if row else None} zones, '
                  f'{made} were made')
            return 1
        # With a trace, the collector formats every zone as an event too:
        # under a sanitizer its drains are slow enough that fewer periodic
        # summaries than the queue holds may be made; the stdout-only run
        # always makes enough.
        if not with_trace and 'periodic summaries are merged' not in stderr:
            print(f'FAIL: no line saying periodic summaries were merged:\n{stderr[-2000:]}')
            return 1
        if 'writer is stuck' in stderr:
            print(f'FAIL: the writer was said stuck though its readers read at the end:\n'
                  f'{stderr[-2000:]}')
            return 1
        if not with_trace:
            return 0
        tpath = os.path.join(d, 'got.json')
        with open(tpath, 'wb') as f:
            f.write(b''.join(trace))
        try:
            events = tc.check_trace(tpath)
        except tc.TraceError as e:
            print(f'FAIL: the trace the reader got: {e}')
            return 1
        zones = sum(1 for e in events if e['ph'] == 'X' and e['name'] == 'stall_zone')
        said = sum(e.get('args', {}).get('dropped_events', 0) for e in events
                   if e['ph'] == 'i' and e['name'].startswith('prof: ') and
                   'trace events dropped' in e['name'])
        print(f'trace: {zones} zones, {said} events said dropped, {sum(map(len, trace))} bytes')
        if zones > made or zones + said < made:
            print(f'FAIL: the trace holds {zones} zones and says {said} events dropped; '
                  f'{made} zones were made')
            return 1
    return 0


def merged_time_windows(exe):
    """Time-based summaries in JSON (PROF_SUMMARY_EVERY=2ms) on a stdout
    that nobody reads for 2 s, then is read while the program goes on for
    0.5 s (issue 36): while the queue is full the windows really merge, and
    the summary made once it has room must say how many periods its window
    holds (merged_windows); before, it said 1 for every time-based summary. Exact, whatever the timing: each period
    whose summary was not made is counted once at exit ("behind N times")
    and once in the next periodic summary's merged_windows (the periods
    after the last periodic summary are in no window: the final summary
    covers the run), so the periodic summaries' merged_windows add up to
    their count plus at most N, and to more than their count when N > 0."""
    import json
    with tempfile.TemporaryDirectory(prefix='prof-merged-') as d:
        r, w = os.pipe()
        try:
            fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
        except OSError:
            pass
        env = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}
        env.update(PROF='1', PROF_SUMMARY='stdout', PROF_SUMMARY_EVERY='2ms',
                   PROF_SUMMARY_FORMAT='json', PROF_BUFFER='1M')
        p, err, et = run_until_merged(exe, d, ['2', '0.5'], env, w, 2)
        out = []
        read_all(r, out)
        try:
            p.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            print('FAIL: the program did not exit')
            return 1
        et.join()
        stderr = b''.join(err).decode(errors='replace')
        if p.returncode != 0:
            print(f'FAIL: exit status {p.returncode}\n{stderr[-2000:]}')
            return 1
        periodic = []
        for line in b''.join(out).decode(errors='replace').splitlines():
            if line.startswith('{'):
                o = json.loads(line)
                if o.get('kind') == 'periodic':
                    periodic.append(o)
        m = re.search(r'writer was behind \(PROF_SUMMARY\'s reader\) (\d+) times', stderr)
        behind = int(m.group(1)) if m else 0
        merged = [o['merged_windows'] for o in periodic]
        widest = max(merged, default=0)
        print(f'time windows, stdout not read for 2 s: {len(periodic)} periodic summaries, '
              f'{behind} not made (said at exit), merged_windows add up to {sum(merged)}, '
              f'the widest holds {widest}')
        if behind == 0:
            print(f'FAIL: the queue never filled (no "behind N times" line):\n{stderr[-2000:]}')
            return 1
        if not len(periodic) < sum(merged) <= len(periodic) + behind:
            print(f'FAIL: merged_windows add up to {sum(merged)} over {len(periodic)} periodic '
                  f'summaries, with {behind} not made: the merge is not said')
            return 1
    return 0


def main():
    exe, tc_path = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(tc_path)))
    import trace_check as tc

    if merged_time_windows(exe) != 0:
        return 1
    for with_trace in (False, True):
        if stuck_readers(exe, tc, with_trace) != 0:
            return 1

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
