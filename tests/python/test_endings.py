"""How a Python run ends: Ctrl-C, DataLoader workers that leave through
os._exit (also when the loop is left early), and what a forked child's
summary says about itself.

Each run is a child interpreter: the runtime reads PROF_* once, and an
ending is a whole process's business. Traces are checked strictly
(tests/trace_check.py): the closing ']' must be there.
"""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import SOURCE_ROOT, child_env, run_py

sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests"))
from trace_check import check_trace  # noqa: E402

HEADER = re.compile(r"^prof summary: .*\(pid (\d+)(?:, rank \d+)?(?:, forked from (\d+))?\)"
                    r", final: (\d+) steps?", re.M)


def summaries(stderr):
    """{pid: {"forked_from": int|None, "steps": int, "rows": {stage: count}}} of
    the final summaries in stderr (each process writes its own at once)."""
    out = {}
    blocks = re.split(r"(?=^prof summary: )", stderr, flags=re.M)
    for b in blocks:
        m = HEADER.match(b)
        if not m:
            continue
        rows = {}
        for line in b.splitlines()[1:]:
            parts = line.split()
            if parts[:2] == ["counter", "count"] or not parts:
                break
            if len(parts) > 2 and parts[1].isdigit():
                rows[parts[0]] = int(parts[1])
        out[int(m.group(1))] = {"forked_from": int(m.group(2)) if m.group(2) else None,
                                "steps": int(m.group(3)), "rows": rows}
    return out


def zone_counts(events):
    counts = {}
    for e in events:
        if e.get("ph") == "X":
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    return counts


# ---------------------------------------------------------------------------
# Ctrl-C: Python finalises, then re-raises SIGINT with the default action, so
# the C runtime's atexit never runs; `import prof` registers Python's own.

CTRL_C = """
    import os, sys, time, prof
    prof.step()
    print("ready", flush=True)
    n = 0
    while True:
        with prof.zone("loop.outer"):
            with prof.zone("loop.inner"):
                time.sleep(0.0005)
        n += 1
        if sys.argv[1] == "raise" and n == 200:
            raise KeyboardInterrupt
"""


@pytest.mark.parametrize("how", ["sigint", "raise"])
def test_ctrl_c_writes_final_summary_and_closes_trace(tmp_path, how):
    trace = tmp_path / "ctrlc.json"
    env = child_env(PROF="1", PROF_SUMMARY="stderr", PROF_TRACE=str(trace))
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CTRL_C), how], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        if how == "sigint":
            time.sleep(0.3)
            p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    # Python's own ending is kept: killed by SIGINT after the traceback.
    assert p.returncode == -signal.SIGINT, err
    assert "KeyboardInterrupt" in err
    s = summaries(err)
    assert list(s) == [p.pid], err
    assert s[p.pid]["steps"] == 1
    rows = s[p.pid]["rows"]
    assert rows["loop.outer"] >= 1 and rows["loop.inner"] in (rows["loop.outer"],
                                                               rows["loop.outer"] + 1)
    events = check_trace(str(trace), expect_stages=("loop.outer", "loop.inner"))
    # Every zone the summary counted is in the trace: nothing was lost at the end.
    assert zone_counts(events)["loop.inner"] == rows["loop.inner"]


# ---------------------------------------------------------------------------
# DataLoader workers: they end through os._exit after multiprocessing's own
# exit hook; prof hooks itself there in every forked worker.

def _have_torch():
    try:
        import torch  # noqa: F401
        return True
    except Exception:
        return False


LOADER = """
    import json, os, sys
    import torch
    from torch.utils.data import DataLoader, Dataset
    import prof

    class Items(Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            with prof.zone("ds.getitem"):
                with prof.zone("ds.make"):
                    return torch.full((8,), float(i))

    if __name__ == "__main__":
        stop = int(sys.argv[1])
        seen = 0
        # The workers fork before this process's first zone.
        for batch in DataLoader(Items(), batch_size=4, num_workers=2):
            with prof.zone("main.batch"):
                seen += batch.shape[0]
            prof.step()
            if stop and seen >= stop:
                break          # the DataLoader shuts its workers down here
        print(json.dumps({"pid": os.getpid(), "seen": seen}))
"""


@pytest.mark.skipif(not _have_torch(), reason="PyTorch not importable (python3-torch)")
@pytest.mark.parametrize("stop", [0, 8])
def test_dataloader_workers_write_complete_traces_without_a_hook(tmp_path, stop):
    out = run_py(LOADER, args=(str(stop),), timeout=240, cwd=str(tmp_path), PROF="1",
                 PROF_SUMMARY="stderr", PROF_TRACE=str(tmp_path / "x-%p.json"))
    res = json.loads(out.stdout.strip().splitlines()[-1])
    parent = res["pid"]
    assert res["seen"] == (64 if stop == 0 else stop)
    s = summaries(out.stderr)
    workers = [pid for pid in s if pid != parent]
    assert parent in s and len(workers) == 2, out.stderr
    files = {int(f[2:-5]): tmp_path / f for f in os.listdir(tmp_path) if f.startswith("x-")}
    assert set(files) == {parent, *workers}

    total = 0
    for pid in workers:
        w = s[pid]
        # Its own header: forked from the parent, no steps of its own
        # (the fork happened before the parent's first zone).
        assert w["forked_from"] == parent and w["steps"] == 0, out.stderr
        # Strict JSON with its closing ']', holding every zone its summary counted.
        counts = zone_counts(check_trace(str(files[pid]), expect_stages=("ds.getitem",)))
        assert counts.get("ds.getitem") == w["rows"]["ds.getitem"] > 0
        assert counts.get("ds.make") == w["rows"]["ds.make"] == w["rows"]["ds.getitem"]
        assert "main.batch" not in counts
        total += counts["ds.getitem"]
    if stop == 0:
        assert total == 64
    else:
        # Left early: the workers had fetched at least what was consumed.
        assert stop <= total <= 64
    assert zone_counts(check_trace(str(files[parent])))["main.batch"] == s[parent]["rows"]["main.batch"]


POOL = """
    import multiprocessing as mp, os, prof

    def work(i):
        with prof.zone("pool.work"):
            return os.getpid()

    if __name__ == "__main__":
        with prof.zone("main.before"):
            pass
        pool = mp.get_context("fork").Pool(2)
        pids = set(pool.map(work, range(40), chunksize=1))
        pool.close()
        pool.join()      # workers leave through os._exit after util._exit_function
        print(len(pids), os.getpid())
"""


def test_pool_workers_close_their_traces(tmp_path):
    out = run_py(POOL, cwd=str(tmp_path), PROF="1", PROF_SUMMARY="stderr",
                 PROF_TRACE=str(tmp_path / "p-%p.json"))
    nworkers, parent = map(int, out.stdout.split())
    s = summaries(out.stderr)
    workers = [pid for pid in s if pid != parent]
    assert len(workers) == nworkers
    total = 0
    for pid in workers:
        assert s[pid]["forked_from"] == parent and s[pid]["steps"] == 0
        counts = zone_counts(check_trace(str(tmp_path / f"p-{pid}.json")))
        assert counts["pool.work"] == s[pid]["rows"]["pool.work"]
        total += counts["pool.work"]
    assert total == 40


# ---------------------------------------------------------------------------
# A forked child's header describes the child.

def test_forked_child_header_counts_its_own_steps():
    out = run_py("""
        import os, prof
        for _ in range(5):
            with prof.zone("parent.work"):
                pass
            prof.step()
        pid = os.fork()
        if pid == 0:
            with prof.zone("child.work"):
                pass
            prof.step()
            raise SystemExit(0)     # a normal exit: atexit runs
        os.waitpid(pid, 0)
        print(pid, os.getpid())
    """, PROF="1", PROF_SUMMARY="stderr")
    child, parent = map(int, out.stdout.split())
    s = summaries(out.stderr)
    assert s[parent]["steps"] == 5 and s[parent]["forked_from"] is None
    assert s[child]["forked_from"] == parent
    assert s[child]["steps"] == 1, out.stderr          # its own step, not 5 + 1
    assert s[child]["rows"] == {"child.work": 1}


def test_child_forked_before_first_zone_says_so():
    out = run_py("""
        import os, prof
        pid = os.fork()            # recording is on, but nothing was recorded yet
        if pid == 0:
            with prof.zone("child.work"):
                pass
            raise SystemExit(0)
        os.waitpid(pid, 0)
        with prof.zone("parent.work"):
            pass
        print(pid, os.getpid())
    """, PROF="1", PROF_SUMMARY="stderr")
    child, parent = map(int, out.stdout.split())
    s = summaries(out.stderr)
    assert s[child]["forked_from"] == parent, out.stderr
    assert s[child]["rows"] == {"child.work": 1}
    assert s[parent]["forked_from"] is None and s[parent]["rows"] == {"parent.work": 1}
