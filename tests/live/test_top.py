"""prof-top and prof.live on a running test program: --once, --json, the
process list (PROF_LIVE=0 left out, dead processes' files removed), the
reader's seqlock, and the curses table under tmux (appears, refreshes,
sorts, pauses, quits)."""

import json
import re
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest

from conftest import PROF_TOP, prof_top, wait_for

STAGES = {"request", "request/parse", "request/handle", 'request/handle/db "q"\\n', "tick"}


def test_version_and_help(env):
    r = prof_top(env, "--version")
    assert r.returncode == 0 and r.stdout.startswith("prof-top (prof) ")
    r = prof_top(env, "--help")
    assert r.returncode == 0 and "space pauses, q quits" in " ".join(r.stdout.split())
    r = prof_top(env, "1", "--interval", "0")
    assert r.returncode == 2


def test_once_text(env, start):
    p = start()
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("prof-top  pid %d (live_prog)" % p.pid)
    assert "steps" in lines[1] and "dropped 0" in lines[1]
    assert lines[2].split()[:2] == ["STAGE", "COUNT"]
    names = [re.match(r"^( *.+?) +\d+ +[\d.]+ ", line).group(1) for line in lines[3:]]
    # The tree: children indented under their parent, sorted by total.
    assert names.index("request") < names.index("  handle") < names.index('    db "q"\\n')
    assert names.index("request") < names.index("  parse")
    row = next(line for line in lines[3:] if line.startswith("request "))
    count, rate = row.split()[1:3]
    assert int(count) > 0 and float(rate) > 0


def test_once_json(env, start):
    p = start()
    r = prof_top(env, str(p.pid), "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["pid"] == p.pid and s["program"] == "live_prog"
    assert s["steps"] > 0 and s["dropped"] == 0 and s["threads"] >= 1
    assert s["interval_s"] > 0    # two publishes: rates of the last interval
    rows = {row["path"]: row for row in s["rows"]}
    assert STAGES <= set(rows)
    for path in STAGES:
        row = rows[path]
        assert row["count"] > 0 and row["rate_per_s"] > 0
        assert 0 < row["p50_ns"] <= row["p95_ns"] <= row["p99_ns"]
        assert row["self_ns"] <= row["total_ns"]
        assert 0 <= row["wall_share"] <= 1.05
    assert rows["request/handle"]["parent"] is not None
    assert s["rows"][rows["request/handle"]["parent"]]["path"] == "request"


def test_snapshot_api(start, live):
    p = start()
    s = live.snapshot(p.pid)
    assert s["pid"] == p.pid and STAGES <= {r["path"] for r in s["rows"]}
    later = wait_for(lambda: (lambda t: t if t["publishes"] > s["publishes"] else None)(
        live.snapshot(p.pid)), 10, "a second publish")
    assert later["rows"][0]["count"] >= s["rows"][0]["count"]
    with pytest.raises(live.LiveError):
        live.snapshot(1)   # init: no prof process


def test_list_and_prof_live_off(env, start, live, runtime_dir):
    on = start()
    off = start({"PROF_LIVE": "0"})
    r = prof_top(env, "--json")
    assert r.returncode == 0, r.stderr
    pids = {x["pid"] for x in json.loads(r.stdout)}
    assert on.pid in pids and off.pid not in pids
    assert not os.path.exists(os.path.join(runtime_dir, "prof", "prof-live-%d" % off.pid))
    text = prof_top(env).stdout
    assert any(line.split()[0] == str(on.pid) for line in text.splitlines()[1:])
    assert not any(line.split()[0] == str(off.pid) for line in text.splitlines()[1:])


def test_file_mode_and_exit(start, runtime_dir):
    p = start(seconds=3)
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert p.proc.wait(timeout=30) == 0
    assert not os.path.exists(path)   # removed at exit


def test_dead_pid_cleaned(env, start, runtime_dir):
    p = start()
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    assert os.path.exists(path)
    p.proc.send_signal(signal.SIGKILL)   # no exit handler runs: the file stays
    p.proc.wait()
    assert os.path.exists(path)
    r = prof_top(env, "--json")
    assert r.returncode == 0, r.stderr
    assert p.pid not in {x["pid"] for x in json.loads(r.stdout)}
    assert not os.path.exists(path)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 1 and "publishes no live stats" in r.stderr


def test_torn_table_is_not_read(start, live, runtime_dir, tmp_path):
    """A file caught mid-write (odd sequence number) is retried, never
    taken for a table."""
    p = start()
    data = bytearray(open(os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid), "rb").read())
    seq = struct.unpack_from("=Q", data, 24)[0]
    struct.pack_into("=Q", data, 24, seq | 1)
    p.proc.send_signal(signal.SIGSTOP)   # its pid stays alive, its file still
    try:
        fake = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
        os.unlink(fake)
        with os.fdopen(os.open(fake, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(data)
        with pytest.raises(live.LiveError, match="kept changing"):
            live.snapshot(p.pid)
    finally:
        p.proc.send_signal(signal.SIGCONT)


# ---- The curses table, driven through tmux. ----

def tmux_or_skip():
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed (scripts/ci installs it): the prof-top screen "
                    "test needs it")
    return tmux


class Pane:
    def __init__(self, tmux, env, cmd):
        self.tmux = tmux
        self.sock = "prof-live-test-%d" % os.getpid()
        self.env = env
        self.run("new-session", "-d", "-s", "top", "-x", "150", "-y", "40", cmd)

    def run(self, *args):
        return subprocess.run([self.tmux, "-L", self.sock, "-f", "/dev/null"] + list(args),
                              env=self.env, capture_output=True, text=True, timeout=20)

    def text(self):
        return self.run("capture-pane", "-p", "-t", "top").stdout

    def keys(self, *k):
        self.run("send-keys", "-t", "top", *k)

    def close(self):
        self.run("kill-server")


def count_of(screen, stage):
    for line in screen.splitlines():
        if line.startswith(stage + " "):
            return int(line.split()[1])
    return None


def order(screen):
    return [line.split()[0] for line in screen.splitlines()
            if line and not line.startswith(" ") and line.split()[0] in ("request", "tick")]


def test_screen(env, start, tmp_path):
    tmux = tmux_or_skip()
    p = start()
    status = tmp_path / "status"
    cmd = "%s %s %d; echo $? > %s; sleep 60" % (sys.executable, PROF_TOP, p.pid, status)
    pane = Pane(tmux, dict(env, TERM="xterm"), cmd)
    try:
        first = wait_for(lambda: count_of(pane.text(), "request"), 20, "the table")
        screen = pane.text()
        assert "prof-top  pid %d (live_prog)" % p.pid in screen
        assert "sort: total" in screen and "q quit" in screen
        assert order(screen) == ["request", "tick"]          # by total: request first
        # It refreshes: the count grows without a key pressed.
        wait_for(lambda: (count_of(pane.text(), "request") or 0) > first, 15, "a refresh")
        pane.keys("c")
        wait_for(lambda: "sort: count" in pane.text(), 10, "sort by count")
        assert order(pane.text()) == ["tick", "request"]     # five ticks a request
        pane.keys("t")
        wait_for(lambda: order(pane.text()) == ["request", "tick"], 10, "sort by total")
        pane.keys("p")
        wait_for(lambda: "sort: p95" in pane.text(), 10, "sort by p95")
        pane.keys("s")
        wait_for(lambda: "sort: self" in pane.text(), 10, "sort by self")
        # Paused: the numbers stay.
        pane.keys("Space")
        wait_for(lambda: "[paused]" in pane.text(), 10, "pause")
        held = count_of(pane.text(), "request")
        time.sleep(2.5)
        assert count_of(pane.text(), "request") == held
        pane.keys("Space")
        wait_for(lambda: (count_of(pane.text(), "request") or 0) > held, 15, "resume")
        pane.keys("q")
        wait_for(lambda: status.exists() and status.read_text().strip() == "0", 10,
                 "prof-top to quit with status 0")
    finally:
        pane.close()
