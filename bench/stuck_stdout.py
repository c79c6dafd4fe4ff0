#!/usr/bin/env python3
"""stuck_stdout.py - records dropped when stdout is stuck (issue 28).

    stuck_stdout.py WRITER_STALL SECONDS NAME=LIBDIR [NAME=LIBDIR ...]

Runs `WRITER_STALL summary DIR SECONDS` (tests/faults/writer_stall.c: one
thread paced at 1 M zones/s, the default ring) with PROF_SUMMARY=stdout on
a pipe of one page that nobody reads until the program says it is done,
PROF_SUMMARY_EVERY=20ms, once per library (LD_LIBRARY_PATH=LIBDIR), two
rounds alternated; prints the zones made and what the final summary says
was dropped."""
import fcntl
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

F_SETPIPE_SZ = 1031


def one(exe, seconds, libdir):
    with tempfile.TemporaryDirectory() as d:
        r, w = os.pipe()
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
        env = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}
        env.update(PROF='1', PROF_SUMMARY='stdout', PROF_SUMMARY_EVERY='20ms',
                   LD_LIBRARY_PATH=libdir)
        p = subprocess.Popen([exe, 'summary', d, seconds], env=env, stdout=w,
                             stderr=subprocess.PIPE)
        os.close(w)
        err = []
        t = threading.Thread(target=lambda: err.append(p.stderr.read()))
        t.start()
        while not os.path.exists(os.path.join(d, 'done')) and p.poll() is None:
            time.sleep(0.05)
        out = []
        while True:
            b = os.read(r, 1 << 16)
            if not b:
                break
            out.append(b)
        os.close(r)
        p.wait()
        t.join()
        made = int(open(os.path.join(d, 'made')).read().split()[0])
        m = re.search(rb'final: .*?(\d+) dropped', b''.join(out))
        return made, int(m.group(1)) if m else None


def main():
    exe, seconds = sys.argv[1], sys.argv[2]
    libs = [a.split('=', 1) for a in sys.argv[3:]]
    for _ in range(2):
        for name, libdir in libs:
            made, dropped = one(exe, seconds, libdir)
            share = f'{100.0 * dropped / made:.0f}%' if dropped is not None else '?'
            print(f'{name}: made {made}, the final summary says {dropped} dropped ({share})')


if __name__ == '__main__':
    main()
