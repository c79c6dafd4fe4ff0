"""fork with a DataLoader-style worker pool, the PyTorch example, and the
C / Cython extension examples built the way a user builds them."""
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD_ROOT, SOURCE_ROOT, child_env, run_py, run_script

EXAMPLES = os.path.join(SOURCE_ROOT, "examples", "python")


def load_trace(path):
    """A trace file; one without the closing ']' (a process that ended with
    os._exit, like multiprocessing workers) is completed as FORMATS.md says."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.rstrip().rstrip(",") + "\n]")


POOL_CHILD = """
    import json, multiprocessing as mp, os, sys, time
    import prof

    def load(i):
        # Runs in a forked worker: its own runtime state from the fork on.
        with prof.zone("worker.load"):
            with prof.zone("worker.decode"):
                time.sleep(0.002)
        return os.getpid()

    if __name__ == "__main__":
        with prof.zone("parent.before_fork"):
            pass
        ctx = mp.get_context("fork")
        pids = set()
        with ctx.Pool(2) as pool:
            for epoch in range(3):
                with prof.zone("parent.epoch"):
                    for pid in pool.imap_unordered(load, range(20)):
                        with prof.zone("parent.consume"):
                            pids.add(pid)
                prof.step()
        s = prof.stats()
        print(json.dumps({"stats": s, "workers": sorted(pids), "pid": os.getpid()}))
"""


def test_fork_pool_children_do_not_corrupt_parent(tmp_path):
    trace = tmp_path / "trace-%p.json"
    out = run_py(POOL_CHILD, timeout=120, PROF="1", PROF_TRACE=str(trace))
    res = json.loads(out.stdout.strip().splitlines()[-1])
    s, workers, parent = res["stats"], res["workers"], res["pid"]
    assert len(workers) >= 1 and parent not in workers
    # The parent's table holds its own zones, exactly counted ...
    assert s["parent.before_fork"]["count"] == 1
    assert s["parent.epoch"]["count"] == 3
    assert s["parent.consume"]["count"] == 60
    assert s["parent.consume"]["parent"] == "parent.epoch"
    # ... and nothing recorded in the workers.
    assert not any(name.startswith("worker.") for name in s)

    # The parent's trace is complete and its own; each worker wrote to a file
    # named by its own pid, never into the parent's.
    files = {int(os.path.basename(p)[6:-5]): p for p in glob.glob(str(tmp_path / "trace-*.json"))}
    assert parent in files
    events = load_trace(files[parent])
    with open(files[parent]) as f:
        assert f.read().rstrip().endswith("]")
    names = {e["name"] for e in events if e.get("ph") == "X"}
    assert {"parent.epoch", "parent.consume"} <= names
    assert not any(n.startswith("worker.") for n in names)
    assert all(e["pid"] == parent for e in events if "pid" in e)
    worker_events = 0
    for pid, path in files.items():
        if pid == parent:
            continue
        assert pid in workers
        evs = load_trace(path)
        assert all(e.get("pid") == pid for e in evs if "pid" in e)
        worker_events += sum(1 for e in evs if e.get("name") == "worker.load")
    # Workers end with os._exit: what they streamed before is there.
    assert worker_events <= 60


def test_fork_without_recording_in_child_stays_silent(tmp_path):
    out = run_py("""
        import os, prof
        with prof.zone("p"):
            pass
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        with prof.zone("p"):
            pass
        print(prof.stats("p")["count"])
    """, PROF="1", PROF_SUMMARY="stderr")
    assert out.stdout.strip() == "2"
    assert out.stderr.count("prof summary") == 1      # the parent's final only


def _have_torch():
    try:
        import torch  # noqa: F401
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _have_torch(), reason="PyTorch not installed (python3-torch)")
def test_train_torch_example_with_dataloader_workers(tmp_path):
    proc = run_script(os.path.join(EXAMPLES, "train_torch.py"), "--steps", "30", "--every", "10",
                      "--workers", "2", "--trace", str(tmp_path / "train-%p.json"),
                      cwd=str(tmp_path), timeout=300, PROF=None)
    out = proc.stdout
    for stage in ("train_step", "data_wait", "forward", "backward", "optimizer", "loss"):
        assert stage in out
    assert out.count("prof summary") == 3          # steps 10, 20 and the final table
    trace_line = [ln for ln in out.splitlines() if ln.startswith("trace: ")][-1]
    parent_trace = trace_line.split(": ", 1)[1]
    events = json.load(open(parent_trace))          # complete: closed by shutdown()
    names = {e["name"] for e in events if e.get("ph") == "X"}
    assert {"train_step", "forward", "backward"} <= names
    assert "dataset.getitem" not in names           # worker zones stay in worker files
    worker_files = [p for p in glob.glob(str(tmp_path / "train-*.json")) if p != parent_trace]
    assert worker_files, "the DataLoader workers wrote no trace of their own"
    got = sum(1 for p in worker_files for e in load_trace(p) if e.get("name") == "dataset.getitem")
    assert got > 0


def test_train_torch_example_without_torch_exits_0(tmp_path):
    # A sitecustomize that hides torch.
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['torch'] = None\n")
    proc = run_script(os.path.join(EXAMPLES, "train_torch.py"), "--steps", "2",
                      extra_path=[str(tmp_path)], cwd=str(tmp_path))
    assert "PyTorch is not available" in proc.stdout


# ---------------------------------------------------------------------------
# Extensions: the user path (build.sh: cc + cython3 against get_include()
# and get_link_args()), and the modules meson built in-tree.

def _check_demo_output(out):
    stages = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[1].isdigit():
            indent = len(line) - len(line.lstrip(" "))
            stages[parts[0]] = indent
    for name in ("py.step", "py.dot", "c.dot", "c.dot.kernel", "c.matmul.kernel",
                 "py.primes", "cy.count_primes", "cy.block"):
        assert name in stages, f"{name} missing from\n{out}"
    # Nested across languages: Python > C, Python > Cython.
    assert stages["py.dot"] < stages["c.dot"] < stages["c.dot.kernel"]
    assert stages["py.primes"] < stages["cy.count_primes"] < stages["cy.block"]
    assert "cy.primes_found" in out and "c.matmul.trace" in out


def test_extension_and_cython_built_by_user(tmp_path):
    if shutil.which("cython3") is None and shutil.which("cython") is None:
        pytest.skip("cython3 not installed")
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler")
    env = child_env(PYTHON=sys.executable)
    if shutil.which("cython3") is None:
        env["CYTHON"] = "cython"
    build = subprocess.run(["sh", os.path.join(EXAMPLES, "extension", "build.sh"), str(tmp_path)],
                           env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    proc = run_script(os.path.join(EXAMPLES, "extension", "demo.py"), "3",
                      extra_path=[str(tmp_path)])
    _check_demo_output(proc.stdout)


def test_extension_and_cython_built_by_meson():
    if not BUILD_ROOT:
        pytest.skip("PROF_BUILD_ROOT not set (run through meson test)")
    d = os.path.join(BUILD_ROOT, "examples", "python", "extension")
    if not glob.glob(os.path.join(d, "fastops*.so")) or not glob.glob(os.path.join(d, "cyops*.so")):
        pytest.skip("examples not built (-Dexamples=false, or no cython3)")
    proc = run_script(os.path.join(EXAMPLES, "extension", "demo.py"), "3", extra_path=[d])
    _check_demo_output(proc.stdout)
