"""prof.flush() and prof.window_step() return while the reader of the
summaries reads nothing (issue 36): PROF_SUMMARY=stdout on a pipe whose read
end this test holds open and does not read (a `| less` left paused). Before,
the first call that found a summary queued behind the stuck pipe waited
for it without a time limit; the loop never finished and the watchdog below
failed the test. The numbers are complete after every call, one line says
the output is behind, and once the pipe is read everything queued arrives
(the final summary counts every zone). Call times are not judged."""
import fcntl
import os
import re
import subprocess
import sys
import textwrap
import threading
import time

from conftest import child_env

WATCHDOG_S = 90
F_SETPIPE_SZ = 1031

CHILD = """
import os, sys
import prof
done = sys.argv[1]
made = 0
for i in range(40):
    for _ in range(50):
        with prof.zone("stuck_py"):
            pass
    made += 50
    prof.step()
    assert prof.flush() is True
    prof.window_step()
    assert prof.stats()["stuck_py"]["count"] == made, prof.stats()["stuck_py"]
open(done, "w").write(str(made))
"""


def test_flush_returns_while_stdout_is_not_read(tmp_path):
    done = tmp_path / "done"
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    except OSError:
        pass
    env = child_env(PROF="1", PROF_SUMMARY="stdout", PROF_SUMMARY_EVERY="1steps")
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD), str(done)], env=env,
                         stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    err = []
    t = threading.Thread(target=lambda: err.append(p.stderr.read()))
    t.start()
    end = time.monotonic() + WATCHDOG_S
    while not done.exists() and p.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    finished = done.exists()
    if not finished:
        p.kill()
    out = []
    while True:            # now the reader reads: what was queued comes
        b = os.read(r, 1 << 16)
        if not b:
            break
        out.append(b)
    os.close(r)
    p.wait(timeout=WATCHDOG_S)
    t.join()
    stderr = err[0].decode(errors="replace") if err else ""
    assert finished, (f"prof.flush()/prof.window_step() did not return within {WATCHDOG_S} s "
                      f"while stdout was not read (exit {p.returncode}):\n{stderr[-1500:]}")
    assert p.returncode == 0, stderr[-2000:]
    assert stderr.count("the output writer is behind") == 1, stderr[-2000:]
    made = int(done.read_text())
    text = b"".join(out).decode(errors="replace")
    finals = list(re.finditer(r"^prof summary: .*final:", text, re.M))
    assert len(finals) == 1, text[-1500:]
    row = re.search(r"^stuck_py +(\d+) ", text[finals[0].start():], re.M)
    assert row is not None and int(row.group(1)) == made, text[finals[0].start():][:1500]
