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
