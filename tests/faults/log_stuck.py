#!/usr/bin/env python3
"""prof's messages on a stderr nobody reads (log_stuck.c; issue 36).

    log_stuck.py LOG_STUCK

stderr is a pipe of one page whose read end this script holds open and does
not read until the program has exited (or the hang guard has passed); the
program fills it itself, then makes prof say something (a trace path that
cannot be opened). Before the bound, prof's write(2) of that line blocked
its thread for good, and the program never got to its end. Judged: the
program exits 0 with its "done" and its final summary counting every zone
(on stdout); what prof wrote to stderr is whole lines."""
import fcntl
import os
import re
import subprocess
import sys
import threading

HANG_S = 90.0          # a hang guard, past the program's own alarm
F_SETPIPE_SZ = 1031    # fcntl.F_SETPIPE_SZ, missing before Python 3.10


def main():
    exe = sys.argv[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}
    env.update(PROF='1', PROF_SUMMARY='stdout', PROF_TRACE='/nonexistent-prof-dir/t.json')
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    except OSError:
        pass    # the default 64 KB: the program fills that too
    p = subprocess.Popen([exe], stdout=subprocess.PIPE, stderr=w, env=env)
    os.close(w)
    out = []
    t = threading.Thread(target=lambda: out.append(p.stdout.read()))
    t.start()
    try:
        p.wait(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    t.join()
    err = b''
    os.set_blocking(r, False)
    try:
        while True:
            b = os.read(r, 1 << 16)
            if not b:
                break
            err += b
    except BlockingIOError:
        pass
    os.close(r)
    text = b''.join(out).decode(errors='replace')
    said = re.sub(rb'^x+', b'', err).decode(errors='replace')
    print(f'exit status {p.returncode}; prof on stderr after the fill: {said!r}')
    if p.returncode != 0 or not text.startswith('done\n'):
        print(f'FAIL: the program did not end by itself (status {p.returncode}): a thread '
              f'waited on the full stderr\n{text[-2000:]}')
        return 1
    row = re.search(r'^stuck_zone +(\d+) ', text, re.M)
    if re.search(r'^prof summary: .*final:', text, re.M) is None or row is None \
            or int(row.group(1)) != 1000:
        print(f'FAIL: no final summary counting 1000 zones on stdout:\n{text[-2000:]}')
        return 1
    if said and not all(line.startswith('prof: ') for line in said.splitlines()) \
            or said and not said.endswith('\n'):
        print(f'FAIL: a message on stderr was cut: {said!r}')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
