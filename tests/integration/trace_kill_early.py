"""A process killed (SIGKILL) at once after its trace file appears leaves a
file the tools read (issue 36): "[" and the metadata are in it from the
moment it exists, never an empty file. Before, the opening was handed to
the output writer thread, which the first zone had just started: a kill
before that thread ran (tens of ms on a loaded machine) left 0 bytes, which
no reader takes (2 of 25 runs at ~25 ms).

Each run starts prog 'forever' with a new trace path, watches for the path
without pausing, and kills the process as soon as it exists. The file must
then read as a trace: tests/trace_check.py (unterminated allowed, as for
any killed process) and the tools' reader (prof_tools.load, what prof-report
and prof-merge use), with the process's metadata in it."""
import os
import signal
import subprocess
import sys
import time

import common
from common import check, main

RUNS = 10 if common.QUICK else 40


def test(tmp):
    tools = os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), '..', 'tools')
    sys.path.insert(0, tools)
    import prof_tools

    sizes = []
    for i in range(RUNS):
        path = os.path.join(tmp, f'early{i}.json')
        p = subprocess.Popen([common.PROG, 'forever'],
                             env=common.clean_env(PROF=1, PROF_TRACE=path),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        end = time.monotonic() + 60
        while not os.path.exists(path):
            if p.poll() is not None or time.monotonic() > end:
                p.kill()
                _, err = p.communicate(timeout=30)
                check(False, f'run {i}: the trace never appeared (exit {p.returncode}): '
                             f'{err[-1500:]!r}')
        p.kill()
        _, err = p.communicate(timeout=30)
        check(p.returncode == -signal.SIGKILL, f'run {i}: returncode {p.returncode}')
        data = open(path, 'rb').read()
        sizes.append(len(data))
        check(len(data) > 0, f'run {i}: killed as its trace appeared, it left an empty file')
        events = common.load_trace(path, allow_unterminated=True)
        check(any(e.get('ph') == 'M' and e.get('name') == 'process_name' for e in events),
              f'run {i}: no process_name metadata in {data[:300]!r}')
        try:
            prof_tools.load(path)
        except prof_tools.InputError as e:
            check(False, f'run {i}: the tools do not read it: {e}')
    print(f'{RUNS} runs killed as the trace appeared: sizes {min(sizes)} to {max(sizes)} bytes')


main(test)
