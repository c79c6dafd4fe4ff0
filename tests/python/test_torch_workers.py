"""DataLoader workers that record under a PROF_TRACE without %p (issue 37).

A script as a user writes it: a Dataset whose __getitem__ has a
``prof.zone`` and runs a torchvision-style ``Compose`` of ``nn.Module``
transforms (``for t in self.transforms: x = t(x)``), a DataLoader with two
workers (fork and spawn), a fixed trace path (plain and ``.gz``), run under
``PROF=1`` and under ``python -m prof``. The user gets the parent's trace,
strict JSON with none of the workers' events, and one table: the parent's
(docs/TORCH.md, "DataLoader workers").
"""
import gzip
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import child_env, needs_torch

pytestmark = needs_torch

DATASET = r'''
import torch
from torch import nn

import prof


class Scale(nn.Module):
    def forward(self, x):
        return x * 2


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Items(torch.utils.data.Dataset):
    def __init__(self):
        self.transform = Compose([Scale(), Scale()])

    def __len__(self):
        return 16

    def __getitem__(self, i):
        with prof.zone("getitem"):
            return self.transform(torch.full((4,), float(i)))
'''

SCRIPT = r'''
import os, sys
import torch
from torch import nn
from torch.utils.data import DataLoader

import prof
from items import Items


def main():
    method, epochs = sys.argv[1], int(sys.argv[2])
    print("parent", os.getpid(), flush=True)
    torch.set_num_threads(1)
    loader = DataLoader(Items(), batch_size=4, num_workers=2, multiprocessing_context=method)
    model = nn.Linear(4, 1)
    for _ in range(epochs):
        for x in loader:
            with prof.zone("train"):
                model(x).sum().backward()


if __name__ == "__main__":
    main()
'''

HEADER = re.compile(r"^prof summary: \S+ \(pid (\d+)[^)]*\)", re.M)
ROW_T = re.compile(r"^\s*t\s+\d", re.M)


def _run(tmp_path, method, how, epochs, **env):
    (tmp_path / "items.py").write_text(DATASET)
    (tmp_path / "train.py").write_text(SCRIPT)
    cmd = [sys.executable, "train.py", method, str(epochs)]
    if how == "-m prof":
        cmd[1:1] = ["-m", "prof"]
        env.setdefault("PROF", None)
    else:
        env.setdefault("PROF", "1")
    env.setdefault("PROF_SUMMARY", None)     # unset: the default
    e = child_env(**env)
    e["PYTHONPATH"] = os.pathsep.join([str(tmp_path), e.get("PYTHONPATH", "")])
    p = subprocess.run(cmd, env=e, cwd=str(tmp_path), capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return int(re.search(r"^parent (\d+)$", p.stdout, re.M).group(1)), p


@pytest.mark.parametrize("method,name,how", [
    ("fork", "t.json", "PROF=1"),
    ("fork", "t.json.gz", "-m prof"),
    ("spawn", "t.json.gz", "PROF=1"),
    ("spawn", "t.json", "-m prof"),
])
def test_workers_leave_the_parents_trace_and_table_alone(tmp_path, method, name, how):
    trace = tmp_path / name
    parent, p = _run(tmp_path, method, how, 2 if method == "fork" else 1, PROF_TRACE=str(trace))
    with (gzip.open(trace, "rt") if name.endswith(".gz") else open(trace)) as f:
        events = json.load(f)     # strict JSON, the closing ']' included
    assert {e.get("pid") for e in events} == {parent}, p.stderr
    zones = {e["name"] for e in events if e.get("ph") == "X"}
    assert "train" in zones and "getitem" not in zones, zones
    if how == "-m prof":
        assert "data" in zones, zones
    # No worker made a file of its own beside the parent's.
    assert sorted(os.listdir(tmp_path)) == sorted(["items.py", "train.py", name])
    # One table: the parent's, with no row named after a loop variable.
    assert [int(m.group(1)) for m in HEADER.finditer(p.stderr)] == [parent], p.stderr
    assert not ROW_T.search(p.stderr), p.stderr
    if method == "fork":
        assert re.search(r"^\d+ forked worker processes recorded zones: no summaries of their "
                         r"own .*; no traces \(PROF_TRACE has no %p\)$", p.stderr, re.M), p.stderr


def test_worker_tables_in_their_own_files_name_the_transforms(tmp_path):
    """PROF_SUMMARY with %p: each worker's table in its own file; the
    transforms called in a for loop are rows of their class, not of the
    loop's variable."""
    out = tmp_path / "out"
    out.mkdir()
    parent, p = _run(tmp_path, "fork", "-m prof", 1, PROF_SUMMARY=str(out / "s-%p.txt"))
    files = {int(f[2:-4]): (out / f).read_text() for f in os.listdir(out)}
    assert parent in files and len(files) > 1, (files.keys(), p.stderr)
    for pid, text in files.items():
        assert not ROW_T.search(text), text
        if pid != parent:
            assert f"forked from {parent}" in text and re.search(r"^\s*Scale\s+\d", text, re.M), text
    assert "forked worker processes recorded zones: summaries in PROF_SUMMARY's %p files" \
        in files[parent]
