"""Shared helpers for the Python tests.

The runtime reads PROF_* once per process, so tests that depend on the
environment run a child interpreter (run_py); the rest use this process,
with recording switched on by prof.enable() and statistics reset before
each test. Run by `meson test --suite python` with PYTHONPATH pointing at
build/python, or by hand:

    PYTHONPATH=build/python python3 -m pytest tests/python
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
