"""On a real GPU: `python -m prof` says how far a root module stage raised
PyTorch's caching allocator's peak (docs/CUDA.md, "GPU memory"). Ground
truth: a model whose forward holds a 256 MiB temporary on the device once
per call; the counter "gpu mem+ model" says about 256 MiB on the first
step (the weights and input are a few KB: within 8 MiB), and the script's
own max_memory_allocated() is never reset by prof.

    PYTHONPATH=BUILD/python python3 tests/gpu/torch_memory.py
Exits 77 where torch has no CUDA device (scripts/gpu_check.sh runs it)."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap

SCRIPT = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
    def forward(self, x):
        tmp = torch.ones(64 << 20, device="cuda")       # 256 MiB of float32
        return self.fc(x) + tmp[0]

model = Net().cuda()
x = torch.ones(2, 4, device="cuda")
before = torch.cuda.max_memory_allocated()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
torch.cuda.synchronize()
print("peak", torch.cuda.max_memory_allocated(), "before", before)
"""


def main():
    try:
        import torch
    except ImportError:
        print("skip: no torch")
        return 77
    if not torch.cuda.is_available():
        print("skip: torch sees no CUDA device")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "script.py")
        summary = os.path.join(tmp, "summary.json")
        with open(script, "w") as f:
            f.write(textwrap.dedent(SCRIPT))
        env = dict(os.environ, PROF_SUMMARY=summary, PROF_SUMMARY_FORMAT="json",
                   PROF_LIVE="0")
        p = subprocess.run([sys.executable, "-m", "prof", script], env=env, cwd=tmp,
                           capture_output=True, text=True, timeout=300)
        print(p.stdout, p.stderr)
        if p.returncode != 0:
            print("FAIL: the script failed")
            return 1
        with open(summary) as f:
            final = [json.loads(line) for line in f if line.strip()][-1]
    counters = {c["name"]: c for c in final["total"]["counters"]}
    c = counters.get("gpu mem+ model")
    if c is None:
        print("FAIL: no 'gpu mem+ model' counter: %s" % sorted(counters))
        return 1
    mib = c["max"] / (1 << 20)
    if not 256 <= mib <= 264:
        print("FAIL: gpu mem+ model %.1f MiB, 256 MiB held" % mib)
        return 1
    peak = int(p.stdout.split("peak ")[1].split()[0])
    if peak < 256 << 20:
        print("FAIL: the script's own peak %d was reset" % peak)
        return 1
    print("ok: gpu mem+ model %.1f MiB (count %d), the script's peak %d" % (mib, c["count"], peak))
    return 0


if __name__ == "__main__":
    sys.exit(main())
