"""Shared helpers for the Python tests.

The runtime reads PROF_* once per process, so tests that depend on the
environment run a child interpreter (run_py); the rest use this process,
with recording switched on by prof.enable() and statistics reset before
each test. Run by `meson test --suite python` with PYTHONPATH pointing at
build/python, or by hand:

    PYTHONPATH=$PWD/build/python /usr/bin/python3 -m pytest tests/python

(the interpreter the extension was built for, with python3-pytest; the
`python3` first on PATH may be another one without pytest).
"""
import os
import subprocess
import sys
import textwrap

# Before the runtime starts in this process: no summary at exit, rings large
# enough that no test drops records.
os.environ["PROF_SUMMARY"] = "off"
os.environ.setdefault("PROF_BUFFER", "256k")
for _var in ("PROF", "PROF_TRACE", "PROF_SUMMARY_EVERY", "PROF_SUMMARY_FORMAT",
             "PROF_TRACE_STEPS"):
    os.environ.pop(_var, None)

import pytest  # noqa: E402

import prof  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("PROF_SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
BUILD_ROOT = os.environ.get("PROF_BUILD_ROOT")


@pytest.fixture(autouse=True)
def fresh_stats():
    """Recording on and an empty table for every in-process test."""
    prof.enable(True)
    prof.flush()
    prof.reset()
    yield
    prof.enable(True)


def _have_torch():
    # Looked up, not imported: the other tests' process stays without
    # torch's threads and start-up time.
    import importlib.util
    return importlib.util.find_spec("torch") is not None


# The torch tests' mark: skipped, saying why, where torch is not importable.
needs_torch = pytest.mark.skipif(not _have_torch(),
                                 reason="PyTorch not importable (Debian: python3-torch)")


def child_env(**overrides):
    env = dict(os.environ)
    for k in [k for k in env if k.startswith("PROF")]:
        if k not in ("PROF_SOURCE_ROOT", "PROF_BUILD_ROOT"):
            del env[k]
    env["PROF_SUMMARY"] = "off"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run_py(code, timeout=120, check=True, cwd=None, args=(), **env):
    """Run code in a fresh interpreter; returns the CompletedProcess."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=child_env(**env), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"child exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc


def run_script(path, *args, timeout=300, check=True, cwd=None, extra_path=(), **env):
    e = child_env(**env)
    if extra_path:
        e["PYTHONPATH"] = os.pathsep.join([*extra_path, e.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, path, *args], env=e, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{path} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc


def busy(seconds):
    """Spin (holding the GIL) for at least `seconds` of wall time."""
    import time
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run_threads(target, args_list, timeout=120):
    """Run target(*args) on a new thread per entry of args_list and return
    their results in order. An exception raised on any thread (a failed
    assert included) is re-raised here, in the test's thread: an exception
    left on a worker thread only prints a warning and the test would pass."""
    import threading

    results = [None] * len(args_list)
    errors = [None] * len(args_list)

    def run(i, args):
        try:
            results[i] = target(*args)
        except BaseException as e:          # noqa: B902 - re-raised below
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i, tuple(a))) for i, a in enumerate(args_list)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        if t.is_alive():
            raise AssertionError(f"thread {t.name} still running after {timeout} s")
    for e in errors:
        if e is not None:
            raise e
    return results
