"""`python -m prof`'s `data` stage over DataLoader epochs (issue 32,
docs/TORCH.md): the count is the batches taken, over several epochs, with
and without workers and with persistent workers (whose iterator is reused,
a new sampler iterator each epoch), and finding the call that ends an epoch
does not call the dataset's `__len__` once per batch (a dataset may count
files there; the loop itself does not call it per batch).
"""
import json
import subprocess
import sys
import textwrap

from conftest import child_env, needs_torch


pytestmark = needs_torch

SCRIPT = """
import json, sys
import torch
from torch.utils.data import DataLoader, Dataset

lens = 0


class Items(Dataset):
    def __len__(self):
        global lens
        lens += 1
        return 10

    def __getitem__(self, i):
        return torch.full((2,), float(i))


def main():
    batches = 0
    for kw in ({"num_workers": 0}, {"num_workers": 2},
               {"num_workers": 2, "persistent_workers": True}):
        loader = DataLoader(Items(), batch_size=4, **kw)     # 3 batches an epoch
        for _ in range(3):
            for x in loader:
                batches += 1
    with open(sys.argv[1], "w") as f:
        json.dump({"batches": batches, "lens": lens}, f)


if __name__ == "__main__":
    main()
"""


def test_data_count_and_len_calls_over_epochs(tmp_path):
    script = tmp_path / "epochs.py"
    script.write_text(textwrap.dedent(SCRIPT))
    summary = tmp_path / "summary.json"
    out = {}
    for how, prefix in (("plain", []), ("prof", ["-m", "prof"])):
        res = tmp_path / f"{how}.json"
        proc = subprocess.run([sys.executable, *prefix, str(script), str(res)],
                              env=child_env(PROF_SUMMARY=str(summary), PROF_SUMMARY_FORMAT="json",
                                            PROF_LIVE="0"),
                              cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        out[how] = json.loads(res.read_text())
    assert out["plain"]["batches"] == out["prof"]["batches"] == 27, out
    final = [json.loads(line) for line in summary.read_text().splitlines()][-1]
    data = {r["name"]: r for r in final["total"]["stages"]}["data"]
    # The 9 calls that end an epoch (StopIteration) are not batches.
    assert data["count"] == 27, data["count"]
    # At most one __len__ a epoch more than the plain loop (9 epochs), not
    # one a batch.
    extra = out["prof"]["lens"] - out["plain"]["lens"]
    assert 0 <= extra <= 9, out
