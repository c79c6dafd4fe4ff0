"""`python -m prof` with the wrappers a training script puts around its
model and optimizer (issue 32): DistributedDataParallel and DataParallel
(the wrapper's forward is the model's: one stage, `model`, the model's
modules named as without the wrapper), GradScaler.step (the step counted
once, also when the scaler calls the optimizer), CPU autocast, a module
called while torch.compile traces (nothing of prof runs: the compiled call
is one zone), and a root named after the attribute the script holds it in.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import child_env, needs_torch


pytestmark = needs_torch

COMMON = """
import os, sys, tempfile
import torch
from torch import nn
torch.set_num_threads(1)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([nn.Linear(16, 16) for _ in range(2)])
        self.head = nn.Linear(16, 2)
    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)
"""


def run(tmp_path, body, steps_expected=None):
    script = tmp_path / "wrapped.py"
    script.write_text(textwrap.dedent(COMMON) + textwrap.dedent(body))
    summary = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "prof", str(script)],
                          env=child_env(PROF_SUMMARY=str(summary), PROF_SUMMARY_FORMAT="json",
                                        PROF_LIVE="0"),
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    final = [json.loads(line) for line in summary.read_text().splitlines()][-1]
    if steps_expected is not None:
        assert final["step"] == steps_expected, final["step"]
    return {r["name"]: r for r in final["total"]["stages"]}, proc


def check_model_tree(r, n):
    assert r["model"]["count"] == n and r["model"]["parent"] is None, r.get("model")
    assert r["model.embed"]["count"] == n and r["model.embed"]["parent"] == "model"
    assert r["model.blocks"]["count"] == 2 * n and r["model.blocks"]["parent"] == "model"
    assert r["model.head"]["count"] == n
    assert not [k for k in r if k.startswith("model.module")], sorted(r)


def test_ddp_and_dataparallel_wrappers(tmp_path):
    r, _ = run(tmp_path, """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP, DataParallel
        store = tempfile.mktemp()
        dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
        model = DDP(Net())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
        dist.destroy_process_group()
        dp = DataParallel(Net())
        with torch.no_grad():
            dp(torch.randn(4, 8))
    """, steps_expected=3)
    check_model_tree(r, 3)
    # The second model is its own stage, called in evaluation (no_grad).
    assert r["dp (eval)"]["count"] == 1 and r["dp.embed"]["parent"] == "dp (eval)", sorted(r)
    assert "dp" not in r, sorted(r)
    assert r["backward"]["count"] == 3 and r["optimizer"]["count"] == 3


def test_grad_scaler_and_autocast(tmp_path):
    r, _ = run(tmp_path, """
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.cuda.amp.GradScaler(enabled=False)   # CPU: passes through
        for _ in range(4):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(torch.randn(4, 8)).float().sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    """, steps_expected=4)
    check_model_tree(r, 4)
    assert r["optimizer"]["count"] == 4 and r["backward"]["count"] == 4


def test_root_named_from_attribute_and_compile_guard(tmp_path):
    r, _ = run(tmp_path, """
        from prof import _torch

        class Trainer:
            def __init__(self):
                self.net = Net()
                self.loss = nn.MSELoss()
            def run(self):
                out = self.net(torch.randn(4, 8))
                return self.loss(out, torch.zeros(4, 2))

        t = Trainer()
        for _ in range(2):
            t.run()
        # While torch.compile traces, a module call runs none of prof's code.
        call = _torch._make_call(nn.Module.__call__._prof_orig, lambda: True)
        fresh = nn.Linear(2, 2)
        call(fresh, torch.zeros(1, 2))
        assert id(fresh) not in _torch._names
    """)
    assert r["net"]["count"] == 2 and r["net.embed"]["parent"] == "net", sorted(r)
    assert r["loss"]["count"] == 2 and r["loss"]["parent"] is None, sorted(r)


def test_cuda_zones_once_cuda_is_initialized(tmp_path):
    # No GPU here: the fake driver of tests/cuda stands in for libcuda, and
    # torch is made to say that CUDA is initialized (prof never initializes
    # it). Each zone is then also a CUDA zone on the current stream: a
    # [gpu] row under each stage.
    from conftest import BUILD_ROOT

    lib = os.path.join(BUILD_ROOT or "", "tests", "cuda", "libfakecuda.so")
    if not BUILD_ROOT or not os.path.exists(lib):
        pytest.skip("fake CUDA driver not built (run through meson test)")
    script = tmp_path / "gpu.py"
    script.write_text(textwrap.dedent(COMMON) + textwrap.dedent("""
        import ctypes, types
        from prof import _torch
        cu = ctypes.CDLL(os.environ["PROF_CUDA_LIB"])      # the driver prof loads
        ctx = ctypes.c_void_p()
        assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        real_is_initialized = torch.cuda.is_initialized
        _torch._cuda_is_initialized = lambda: True
        torch.cuda.current_stream = lambda: types.SimpleNamespace(cuda_stream=0)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
        assert not real_is_initialized()
    """))
    summary = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "prof", str(script)],
                          env=child_env(PROF_SUMMARY=str(summary), PROF_SUMMARY_FORMAT="json",
                                        PROF_LIVE="0", PROF_CUDA_LIB=lib),
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    final = [json.loads(line) for line in summary.read_text().splitlines()][-1]
    r = {x["name"]: x for x in final["total"]["stages"]}
    for stage in ("model", "model.embed", "model.blocks", "backward", "optimizer",
                  "optimizer.zero_grad"):
        gpu = r.get(stage + " [gpu]")
        assert gpu is not None and gpu["gpu"], (stage, sorted(r))
        assert gpu["count"] == r[stage]["count"], (stage, gpu["count"], r[stage]["count"])
    assert r["model.blocks"]["count"] == 6


def test_last_step_counted_with_summaries_to_logging(tmp_path):
    # The last iteration's step is written at exit before the final
    # summary, also when log_to_logging() moved prof's exit handler to the
    # end of atexit's list (4 steps instead of 5 when ours ran after it).
    script = tmp_path / "logged.py"
    script.write_text(textwrap.dedent(COMMON) + textwrap.dedent("""
        import logging, prof
        logging.basicConfig(level=logging.INFO)
        prof.log_to_logging(True)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
    """))
    proc = subprocess.run([sys.executable, "-m", "prof", str(script)],
                          env=child_env(PROF_SUMMARY=None, PROF_LIVE="0"),
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "INFO:prof:prof summary: logged.py" in proc.stderr, proc.stderr
    assert "final: 5 steps" in proc.stderr, proc.stderr
