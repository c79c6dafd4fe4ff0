"""`python -m prof` on CUDA reads PyTorch's caching allocator at each root
module stage's start and end (docs/TORCH.md, "GPU memory"): how far the
stage raised the allocator's peak (counter "gpu mem+ NAME", bytes, when it
rose), and the allocator's bytes allocated and peak at its end. It never
resets the peak: a script that reads max_memory_allocated() itself sees
its own figure.

No GPU here: torch.cuda is stood in for, in the script, by a fake
allocator (memory_allocated, max_memory_allocated, current_stream,
reset_peak_memory_stats counting its calls), and prof is told CUDA is
initialized as torch.cuda.is_initialized() would say on a GPU.
"""
import json
import subprocess
import sys
import textwrap

from conftest import child_env, needs_torch

pytestmark = needs_torch

MB = 1 << 20

SCRIPT = """
import sys
import torch
from torch import nn
import prof._torch

class Allocator:
    allocated = 0
    peak = 0
    resets = 0
    def alloc(self, n):
        self.allocated += n
        self.peak = max(self.peak, self.allocated)
    def free(self, n):
        self.allocated -= n

A = Allocator()

class Stream:
    cuda_stream = 0    # the default stream

def reset_peak():
    A.resets += 1
    A.peak = A.allocated

torch.cuda.memory_allocated = lambda device=None: A.allocated
torch.cuda.max_memory_allocated = lambda device=None: A.peak
torch.cuda.current_stream = lambda device=None: Stream()
torch.cuda.reset_peak_memory_stats = reset_peak
prof._torch._state["cuda"] = True    # what torch.cuda.is_initialized() says on a GPU

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
    def forward(self, x):
        A.alloc(300 << 20)     # activations: 300 MB, freed at the end
        try:
            return self.fc(x)
        finally:
            A.free(300 << 20)

model = Net()
loss_fn = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
A.alloc(100 << 20)             # the weights, kept
for i in range(4):
    opt.zero_grad()
    loss = loss_fn(model(torch.ones(2, 4)), torch.zeros(2, 1))
    loss.backward()
    opt.step()
print("script peak", torch.cuda.max_memory_allocated(), "resets", A.resets)
"""


def test_stage_raised_gpu_peak_and_script_counters_kept(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    summary = tmp_path / "summary.json"
    e = child_env(PROF_SUMMARY=str(summary), PROF_SUMMARY_FORMAT="json", PROF_LIVE="0")
    proc = subprocess.run([sys.executable, "-m", "prof", str(script)], env=e, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # The script's own figure: the peak prof never reset.
    assert "script peak %d resets 0" % (400 * MB) in proc.stdout, proc.stdout
    final = [json.loads(line) for line in summary.read_text().splitlines()][-1]
    counters = {c["name"]: c for c in final["total"]["counters"]}
    # model raised the peak once, from the 100 MB of weights to 400 MB: 300 MB.
    c = counters.get("gpu mem+ model")
    assert c is not None, sorted(counters)
    assert c["count"] == 1 and c["max"] == 300 * MB, c
    # loss_fn allocates nothing: it never raised the peak.
    assert "gpu mem+ loss_fn" not in counters, sorted(counters)
    assert counters["gpu mem peak"]["max"] == 400 * MB
    assert counters["gpu mem allocated"]["last"] == 100 * MB
