"""Fixtures of the live suite: the test program (LIVE_PROG) run with its own
XDG_RUNTIME_DIR (so that other prof processes on the host are not seen),
prof-top (PROF_TOP) and the reader python/prof/live.py loaded by path."""

import importlib.util
import os
import queue
import socket
import subprocess
import sys
import threading
import time

import pytest

LIVE_PROG = os.environ.get("LIVE_PROG")
PROF_TOP = os.environ.get("PROF_TOP")
PY_DIR = os.environ.get("PROF_PYTHON_DIR")
if not PY_DIR:
    PY_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")


def load_live():
    spec = importlib.util.spec_from_file_location("prof_live_under_test",
                                                  os.path.join(PY_DIR, "prof", "live.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prog:
    """A running live_prog; its stdout lines are queued as they come."""

    def __init__(self, env, seconds, prog=None):
        self.proc = subprocess.Popen([prog or LIVE_PROG, str(seconds)], env=env,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        self.lines = queue.Queue()
        self.err = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_line(self, pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                raise AssertionError("live_prog ended early: %s" % "".join(self.err))
            if pred(line):
                return line
        raise AssertionError("no such line from live_prog within %.0f s" % timeout)

    def progress(self, timeout=10):
        """(requests, parse count, flush us) of the next progress line."""
        line = self.wait_line(lambda s: s.startswith("progress "), timeout)
        _, req, count, us = line.split()
        return int(req), int(count), float(us)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def runtime_dir(tmp_path):
    d = tmp_path / "xdg"
    d.mkdir(mode=0o700)
    return str(d)


@pytest.fixture
def env(runtime_dir):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("PROF_") and k not in ("PROF_TEST_BUILD_DIR", "PROF_TEST_SOURCE_DIR"):
            del e[k]
    e.update({"PROF": "1", "PROF_SUMMARY": "off", "XDG_RUNTIME_DIR": runtime_dir})
    return e


@pytest.fixture
def start(env):
    if not LIVE_PROG or not os.path.exists(LIVE_PROG):
        pytest.fail("LIVE_PROG is not set to the built tests/live/live_prog")
    progs = []

    def run(extra=None, seconds=60, ready=True, prog=None):
        e = dict(env)
        e.update(extra or {})
        p = Prog(e, seconds, prog)
        progs.append(p)
        if ready:
            p.wait_line(lambda s: s == "ready", 20)
            if e.get("PROF_LIVE") != "0":
                # Published at the collector's first wake after the start,
                # which may come after the first zones are counted.
                path = os.path.join(e["XDG_RUNTIME_DIR"], "prof", "prof-live-%d" % p.pid)
                wait_for(lambda: os.path.exists(path), 20, "the live file")
        return p

    yield run
    for p in progs:
        p.stop()


@pytest.fixture
def live(env, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    return load_live()


def survives_mutations(live, real, places, seed, bursts=2000, burst_max=3, extra=()):
    """Each byte at `places` of the live file `real` set to a few values,
    then `bursts` mutations of 1..burst_max 8-byte words there (0, 2^62,
    all ones, random, and `extra`): the reader must give a table or a
    LiveError, nothing else (an exception of another type fails the test)."""
    import random
    import struct

    rng = random.Random(seed)
    words = (0, 1 << 62, (1 << 64) - 1) + tuple(extra)
    for i in places:
        for v in (0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)):
            data = bytearray(real)
            data[i] = v
            try:
                live._parse(bytes(data), "mutated")
            except live.LiveError:
                pass
    for _ in range(bursts):
        data = bytearray(real)
        for _ in range(rng.randrange(1, burst_max + 1)):
            at = min(rng.choice(places), len(data) - 8)
            struct.pack_into("=Q", data, at, rng.choice(words + (rng.getrandbits(64),)))
        try:
            live._parse(bytes(data), "mutated")
        except live.LiveError:
            pass


def wait_for(fn, timeout, what):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
        except Exception as e:   # noqa: BLE001 - retried until the deadline
            last = e
            v = None
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("%s: not within %.0f s (last error: %r)" % (what, timeout, last))


def prof_top(env, *args, timeout=30):
    return subprocess.run([sys.executable, PROF_TOP] + list(args), env=env, capture_output=True,
                          text=True, timeout=timeout)
