"""DataLoader workers end with their parent (issue 20).

A worker still running when its parent exits (the iterator still
referenced at module level; persistent_workers left by `break`) is sent
SIGTERM by multiprocessing, and PyTorch's worker handler _exit()s at once:
no Python exit hook runs. prof puts its handler in front of PyTorch's
once the worker has set it: the worker's final summary and the end of its
trace are written, then PyTorch's handler gets the signal. Each case, plain
and gzip traces, fork and forkserver: every worker's file parses strictly
(closing ']', a finished gzip member) and every worker's summary appears;
no worker is said to have ended before finishing.
"""
import json
import os
import re
import sys
import textwrap

import pytest

from conftest import SOURCE_ROOT, run_script

sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests"))
from trace_check import check_trace  # noqa: E402

HEADER = re.compile(r"^prof summary: .*\(pid (\d+)[^)]*\), final:", re.M)

SCRIPT = """
    import json, os, sys
    import torch
    from torch.utils.data import DataLoader, Dataset
    import prof

    class Items(Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            with prof.zone("ds.getitem"):
                return torch.full((8,), float(i))

    if __name__ == "__main__":
        mode, method = sys.argv[1], sys.argv[2]
        if mode == "alive":
            # Referenced until the interpreter exits, as scripts and
            # notebooks do: the workers are still up at exit.
            loader = DataLoader(Items(), batch_size=4, num_workers=2,
                                multiprocessing_context=method)
            it = iter(loader)
            for _ in range(4):
                with prof.zone("main.batch"):
                    next(it)
        else:
            loader = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True,
                                multiprocessing_context=method)
            for i, batch in enumerate(loader):
                with prof.zone("main.batch"):
                    pass
                if i == 3:
                    break
        print(json.dumps({"pid": os.getpid()}))
"""


def _have_torch():
    try:
        import torch  # noqa: F401
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _have_torch(), reason="PyTorch not importable (python3-torch)")
@pytest.mark.parametrize("method", ["fork", "forkserver"])
@pytest.mark.parametrize("ext", [".json", ".json.gz"])
@pytest.mark.parametrize("mode", ["alive", "persistent"])
def test_workers_end_with_their_parent(tmp_path, mode, ext, method):
    script = tmp_path / "loader.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = run_script(str(script), mode, method, timeout=120, cwd=str(tmp_path), PROF="1",
                     PROF_SUMMARY="stderr", PROF_TRACE=str(tmp_path / ("w-%p" + ext)))
    parent = json.loads(out.stdout.strip().splitlines()[-1])["pid"]
    files = {int(f[2:-len(ext)]): tmp_path / f for f in os.listdir(tmp_path)
             if f.startswith("w-")}
    summarized = {int(m.group(1)) for m in HEADER.finditer(out.stderr)}
    workers = [pid for pid in files if pid != parent]
    # Files of processes that recorded (the forkserver itself records
    # nothing): the parent and its two workers.
    assert parent in files and len(workers) == 2, (sorted(files), out.stderr)
    for pid in workers:
        events = check_trace(str(files[pid]))
        assert any(e.get("name") == "ds.getitem" for e in events), pid
        assert pid in summarized, f"no summary from worker {pid}:\n{out.stderr}"
    assert parent in summarized
    assert "killed by signal" not in out.stderr, out.stderr
    # Workers that finished are not named as ended before finishing: a
    # fork worker's parent watches it, a forkserver worker is not its child.
    assert "ended before" not in out.stderr, out.stderr
    assert f"(pid {parent})" in out.stderr


POOL_SCRIPT = """
    import collections, json, os, sys, time
    import multiprocessing as mp
    import prof

    def init():
        with prof.zone("pool.init"):
            pass
        open(f"ready-{os.getpid()}", "w").close()

    def work(i):
        with prof.zone("pool.task"):
            sum(range(2000))
        return os.getpid()

    def hold(i):
        open(f"busy-{os.getpid()}", "w").close()
        time.sleep(120)

    if __name__ == "__main__":
        method, ending = sys.argv[1], sys.argv[2]
        with prof.zone("main.map"):
            p = mp.get_context(method).Pool(2, initializer=init)
            # Both workers up before the tasks: one that is still starting
            # when terminate() comes has recorded nothing to lose.
            deadline = time.monotonic() + 60
            while sum(f.startswith("ready-") for f in os.listdir()) < 2:
                assert time.monotonic() < deadline, "workers did not start"
                time.sleep(0.01)
            done = collections.Counter(p.map(work, range(64), chunksize=1))
        if ending == "close":
            p.close()
        else:
            # Both workers inside a task when terminate() (what `with Pool()
            # as p:` does on leaving) sends SIGTERM: a worker that got its
            # end marker first would end as close() ends it.
            p.map_async(hold, range(2), chunksize=1)
            deadline = time.monotonic() + 60
            while sum(f.startswith("busy-") for f in os.listdir()) < 2:
                assert time.monotonic() < deadline, "workers did not take the tasks"
                time.sleep(0.01)
            p.terminate()
        p.join()
        print(json.dumps({"pid": os.getpid(), "tasks": done}))
"""


@pytest.mark.parametrize("ending", ["close", "terminate"])
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_pool_workers_end(tmp_path, method, ending):
    """A Pool's workers ended by close()+join() (their task loop returns,
    then os._exit() for fork and forkserver workers) or by terminate()
    while inside a task (SIGTERM): each worker writes its summary and a
    trace that parses strictly with every zone it recorded. forkserver
    workers on Python 3.11-3.13 import prof themselves, while being
    prepared (issue 30)."""
    script = tmp_path / "pool.py"
    script.write_text(textwrap.dedent(POOL_SCRIPT))
    out = run_script(str(script), method, ending, timeout=120, cwd=str(tmp_path), PROF="1",
                     PROF_SUMMARY="stderr", PROF_TRACE=str(tmp_path / "w-%p.json"))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    parent, tasks = result["pid"], {int(k): v for k, v in result["tasks"].items()}
    files = {int(f[2:-len(".json")]): tmp_path / f for f in os.listdir(tmp_path)
             if f.startswith("w-")}
    summarized = {int(m.group(1)) for m in HEADER.finditer(out.stderr)}
    workers = sorted(pid for pid in files if pid != parent)
    assert parent in files and len(workers) == 2, (sorted(files), out.stderr)
    for pid in workers:
        events = check_trace(str(files[pid]))
        names = [e.get("name") for e in events if e.get("ph") == "X"]
        assert names.count("pool.init") == 1, (pid, names, out.stderr)
        assert names.count("pool.task") == tasks.get(pid, 0), (pid, tasks, names, out.stderr)
        assert pid in summarized, f"no summary from worker {pid}:\n{out.stderr}"
    assert parent in summarized
