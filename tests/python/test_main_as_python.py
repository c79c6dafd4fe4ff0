"""`python -m prof script.py` runs the script as `python script.py` would.

Each test runs one small script twice, side by side: by the interpreter
alone and by `python -m prof`, and compares what the script and its user
see: sys.argv, __file__, __spec__, sys.path[0], __main__ during and after
the main code, warnings, tracebacks and the exit status of every ending.
prof's summary is off (conftest's child_env), so the two runs' stdout and
stderr must be equal byte for byte.
"""
import os
import signal
import subprocess
import sys

import pytest

from conftest import child_env


def both(argv, cwd, timeout=60, **env):
    """(plain, under prof): CompletedProcess of `python argv...` and of
    `python -m prof argv...`."""
    out = []
    for pre in ([], ["-m", "prof"]):
        out.append(subprocess.run([sys.executable, *pre, *argv], cwd=str(cwd),
                                  env=child_env(**env), capture_output=True, text=True,
                                  timeout=timeout))
    return out


def same(plain, under):
    assert (under.returncode, under.stdout, under.stderr) == \
        (plain.returncode, plain.stdout, plain.stderr), \
        (f"python: exit {plain.returncode}\n{plain.stdout}\n{plain.stderr}\n"
         f"python -m prof: exit {under.returncode}\n{under.stdout}\n{under.stderr}")


PROBE = r'''
import os, sys, warnings
print("argv", sys.argv)
print("file", __file__)
print("spec", getattr(__spec__, "name", __spec__))
print("path0", sys.path[0])
print("main is this module", sys.modules["__main__"].__dict__ is globals())
print("globals", sorted(k for k in globals() if k.startswith("__")))
print("loader", type(__loader__).__name__, getattr(__loader__, "name", None),
      getattr(__loader__, "path", None))
print("cached", globals().get("__cached__", "-"), "package", repr(__package__), __doc__)
print("builtins", type(__builtins__).__name__)
warnings.warn("at this line")
warnings.warn("from above the script", stacklevel=2)
warnings.warn("deprecated here", DeprecationWarning)
'''


def test_script_sees_what_it_sees_under_python(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "probe.py").write_text(PROBE)
    # A relative path, with a link in it: __file__ is the path joined to
    # the working directory, sys.path[0] the script's real directory.
    os.symlink("sub", str(tmp_path / "link"))
    for path in ("sub/probe.py", "./link/../sub/probe.py", str(tmp_path / "link" / "probe.py")):
        plain, under = both([path, "a", "--b"], tmp_path)
        assert plain.returncode == 0, plain.stderr
        assert "file " + os.path.join(str(tmp_path), path) in plain.stdout or \
            os.path.isabs(path)
        same(plain, under)


def test_module_and_directory_as_python_runs_them(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "probe.py").write_text(PROBE)
    plain, under = both(["-m", "pkg.probe", "x"], tmp_path)
    assert plain.returncode == 0 and "spec pkg.probe" in plain.stdout, plain.stderr
    same(plain, under)
    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text(PROBE)
    same(*both(["app", "y"], tmp_path))
    # Not runnable: the interpreter's own messages and status.
    same(*both(["pkg"], tmp_path))
    same(*both(["-m", "no_such_module"], tmp_path))


def test_missing_script_is_reported_as_python_does(tmp_path):
    plain, under = both(["missing.py", "x"], tmp_path)
    assert plain.returncode == 2 and "can't open file" in plain.stderr, plain.stderr
    same(plain, under)
    (tmp_path / "bad.py").write_text("x = 1\ndef f(:\n    pass\n")
    plain, under = both(["bad.py"], tmp_path)
    assert plain.returncode == 1 and "SyntaxError" in plain.stderr, plain.stderr
    same(plain, under)


ENDINGS = r'''
import sys

def inner(how):
    if how == "exit3":
        sys.exit(3)
    if how == "exit-message":
        sys.exit("stopped: no data")
    if how == "raise":
        raise ValueError("boom")
    if how == "chained":
        try:
            {}["key"]
        except KeyError as e:
            raise RuntimeError("wrapped") from e
    if how == "keyboard-interrupt":
        raise KeyboardInterrupt

def main():
    print("main", sys.argv[1])
    inner(sys.argv[1])

main()
print("returned")
'''


@pytest.mark.parametrize("how", ["return", "exit3", "exit-message", "raise", "chained",
                                 "keyboard-interrupt"])
def test_every_ending_as_python(tmp_path, how):
    (tmp_path / "endings.py").write_text(ENDINGS)
    plain, under = both(["endings.py", how], tmp_path)
    expected = {"return": 0, "exit3": 3, "exit-message": 1, "raise": 1, "chained": 1,
                "keyboard-interrupt": -signal.SIGINT}[how]
    assert plain.returncode == expected, plain.stderr
    same(plain, under)


SIGNALLED = r'''
import sys, threading, time

def tell_when_asleep():
    # The signal must find the main thread in sleep(), in both runs: the
    # traceback marks the expression it interrupted.
    main = threading.main_thread().ident
    while sys._current_frames()[main].f_lineno != 13:
        time.sleep(0.005)
    print("ready", flush=True)

threading.Thread(target=tell_when_asleep, daemon=True).start()
time.sleep(60)
'''


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_it_as_python(tmp_path, sig):
    (tmp_path / "wait.py").write_text(SIGNALLED)
    results = []
    for pre in ([], ["-m", "prof"]):
        p = subprocess.Popen([sys.executable, *pre, "wait.py"], cwd=str(tmp_path),
                             env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            assert p.stdout.readline() == "ready\n"
            p.send_signal(sig)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert results[0].returncode == -sig, results[0].stderr
    same(*results)


POOL_AFTER_MAIN = r'''
import multiprocessing, sys, threading, time

def square(x):
    return x * x

def after_main():
    # Until the main code has returned (the interpreter then waits for
    # this thread): __main__ is looked up after that.
    while threading.main_thread().is_alive():
        time.sleep(0.01)
    print("__main__ is the script:", sys.modules["__main__"].__dict__.get("square") is square,
          flush=True)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(square, range(5)), flush=True)

threading.Thread(target=after_main).start()
print("main returns", flush=True)
'''


def test_thread_with_a_pool_after_main_returns(tmp_path):
    (tmp_path / "pool.py").write_text(POOL_AFTER_MAIN)
    plain, under = both(["pool.py"], tmp_path)
    assert plain.returncode == 0 and "[0, 1, 4, 9, 16]" in plain.stdout, plain.stderr
    same(plain, under)
