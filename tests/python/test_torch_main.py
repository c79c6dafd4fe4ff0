"""`python -m prof train.py`: a PyTorch loop zoned with no code change
(issue 32, docs/TORCH.md).

Each test writes a small training script (a model of named modules with a
ModuleList of three blocks, a DataLoader with worker processes, SGD) and
runs it by `python -m prof` in a child interpreter, with the final summary
as JSON in a file. The script times the same calls itself with
perf_counter and writes the sums to a file; the summary's totals must
agree with them. The first iteration is a warm-up, left out of the
statistics by PROF_SKIP_STEPS=1 (naming the modules happens there).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import child_env, needs_torch


pytestmark = needs_torch

SCRIPT = r'''
import argparse, json, os, sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--accum", type=int, default=1)
p.add_argument("--self-step", default="none", choices=["none", "after", "before"])
p.add_argument("--raise-at", type=int, default=-1)
p.add_argument("--exit", type=int, default=None)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--ctx", default=None)
p.add_argument("--sums", default=None)
p.add_argument("--idle-ms", type=float, default=0)
args = p.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)


class Items(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(0.0002)
        return torch.randn(64), i % 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(512, 512)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(64, 512)
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head = nn.Linear(512, 4)

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def main():
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(Items(), batch_size=64, num_workers=args.workers,
                        multiprocessing_context=args.ctx)
    if args.self_step != "none":
        import prof
    sums = {"data": 0.0, "model": 0.0, "backward": 0.0, "optimizer": 0.0}
    pc = time.perf_counter
    it = iter(loader)
    for step in range(args.steps + 1):          # step 0: warm-up
        if args.self_step == "before":
            prof.step()
        if step == args.raise_at:
            raise ValueError(f"boom at step {step}")
        if step == args.exit:
            sys.exit(3)
        opt.zero_grad()
        for _ in range(args.accum):
            t = pc(); batch = next(it); t_data = pc() - t
            # Unpacked outside the pair: rebinding x and y frees the
            # previous batch (its shared-memory storage, 50-70 us), the
            # script's own time, not a wait in __next__.
            x, y = batch
            t = pc(); out = model(x); t_fwd = pc() - t
            loss = nn.functional.cross_entropy(out, y) / args.accum
            t = pc(); loss.backward(); t_bwd = pc() - t
            if step:
                sums["data"] += t_data
                sums["model"] += t_fwd
                sums["backward"] += t_bwd
        t = pc(); opt.step(); t_opt = pc() - t
        if step:
            sums["optimizer"] += t_opt
        if args.self_step == "after":
            prof.step()
        t = pc()
        while pc() - t < args.idle_ms / 1e3:    # "logging": in no hook's zone
            pass
    if args.sums:
        with open(args.sums, "w") as f:
            json.dump(sums, f)


if __name__ == "__main__":
    main()
'''


def run_main(tmp_path, *args, env=None, check=True, prefix=("-m", "prof"), opts=(),
             timeout=300):
    script = tmp_path / "train_loop.py"
    script.write_text(SCRIPT)
    summary = tmp_path / "summary.json"
    e = child_env(PROF_SUMMARY=str(summary), PROF_SUMMARY_FORMAT="json", PROF_SKIP_STEPS="1",
                  PROF_LIVE="0")
    e.update(env or {})
    proc = subprocess.run([sys.executable, *prefix, *opts, str(script), *args], env=e,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n"
                             f"--- stderr\n{proc.stderr}")
    final = None
    if summary.exists():
        for line in summary.read_text().splitlines():
            obj = json.loads(line)
            if obj.get("kind") == "final":
                final = obj
    return proc, final


def rows(final):
    return {r["name"]: r for r in final["total"]["stages"]}


def test_tree_counts_and_totals(tmp_path):
    steps = 6
    sums_path = tmp_path / "sums.json"
    for attempt in range(3):
        proc, final = run_main(tmp_path, "--steps", str(steps), "--sums", str(sums_path))
        sums = json.loads(sums_path.read_text())
        r = rows(final)
        # A preemption that lands in the few microseconds a call spends
        # outside its zone (a loaded machine) moves the script's sum only:
        # run again rather than widen the bound.
        if all(r[k]["total_ns"] / 1e9 >= v * 0.95 for k, v in sums.items()):
            break
    assert final is not None, proc.stderr
    assert final["program"] == "train_loop.py"
    r = rows(final)
    for name in ("data", "model", "backward", "optimizer", "optimizer.zero_grad"):
        assert name in r, (name, sorted(r))
        assert r[name]["parent"] is None, (name, r[name]["parent"])
        assert r[name]["count"] == steps, (name, r[name]["count"])
    # The model's direct children by attribute path; the three blocks of the
    # ModuleList are one stage; nothing deeper at the default depth.
    for name, n in (("model.embed", steps), ("model.blocks", 3 * steps), ("model.head", steps)):
        assert name in r, (name, sorted(r))
        assert r[name]["parent"] == "model", (name, r[name]["parent"])
        assert r[name]["count"] == n, (name, r[name]["count"])
    assert not [k for k in r if k.startswith("model.blocks.")], sorted(r)
    # The same calls, timed by the script around them.
    for name, pc_s in sums.items():
        zone_s = r[name]["total_ns"] / 1e9
        # The zone runs inside the script's perf_counter pair: never longer.
        # A few microseconds per call lie outside it (the wrapper's entry,
        # the step boundary: 20-30 us before data's zone opens, of 1.5-4 ms
        # waits here), so the zone is within 5% below.
        assert zone_s <= pc_s * 1.001 + 20e-6, (name, zone_s, pc_s)
        assert zone_s >= pc_s * 0.95, (name, zone_s, pc_s)


def test_script_that_steps_is_not_double_stepped(tmp_path):
    steps = 5
    for where in ("after", "before"):
        proc, final = run_main(tmp_path, "--steps", str(steps), "--self-step", where,
                               "--workers", "0")
        r = rows(final)
        # steps + the warm-up: the script's own prof.step() calls, only.
        assert final["step"] == steps + 1, (where, final["step"])
        assert r["optimizer"]["count"] in (steps, steps + 1), (where, r["optimizer"]["count"])


def test_gradient_accumulation(tmp_path):
    steps = 4
    proc, final = run_main(tmp_path, "--steps", str(steps), "--accum", "2", "--workers", "0")
    r = rows(final)
    assert final["step"] == steps + 1
    assert r["optimizer"]["count"] == steps
    assert r["backward"]["count"] == 2 * steps
    assert r["model"]["count"] == 2 * steps
    assert r["data"]["count"] == 2 * steps


def test_exception_keeps_summary_and_traceback(tmp_path):
    proc, final = run_main(tmp_path, "--steps", "6", "--raise-at", "3", "--workers", "0",
                           check=False, env={"PROF_SUMMARY": "stderr",
                                             "PROF_SUMMARY_FORMAT": "text"})
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert "Traceback (most recent call last)" in err, err
    assert "ValueError: boom at step 3" in err, err
    assert "train_loop.py" in err
    assert "runpy" not in err and "__main__.py" not in err, err   # the program's frames only
    # The final summary follows the traceback, with the steps run.
    assert err.index("ValueError: boom") < err.index("prof summary: train_loop.py"), err
    assert "final: 3 steps" in err, err
    assert "\nmodel " in err and "\nbackward " in err, err


def test_sys_exit_status_kept(tmp_path):
    proc, final = run_main(tmp_path, "--steps", "6", "--exit", "2", "--workers", "0",
                           check=False)
    assert proc.returncode == 3, proc.stderr
    assert final is not None and final["step"] == 2, final
    assert rows(final)["model"]["count"] == 1


def test_env_route_with_import_prof(tmp_path):
    # PROF_TORCH=1 and `import prof` in the program: the same zones,
    # started as `python script.py`.
    proc, final = run_main(tmp_path, "--steps", "3", "--self-step", "after", "--workers", "0",
                           prefix=(), env={"PROF": "1", "PROF_TORCH": "1"})
    r = rows(final)
    assert r["model"]["count"] == 3 and r["model.blocks"]["count"] == 9
    assert r["backward"]["count"] == 3 and r["optimizer"]["count"] == 3


@pytest.mark.parametrize("depth,present,absent", [
    ("1", ["model"], ["model.embed", "model.blocks"]),
    ("3", ["model.blocks", "model.blocks.fc", "model.blocks.act"], []),
])
def test_depth(tmp_path, depth, present, absent):
    proc, final = run_main(tmp_path, "--steps", "2", "--workers", "0", opts=("--depth", depth))
    r = rows(final)
    for name in present:
        assert name in r, (name, sorted(r))
    for name in absent:
        assert name not in r, (name, sorted(r))
    if depth == "3":
        assert r["model.blocks.fc"]["parent"] == "model.blocks"
        assert r["model.blocks.fc"]["count"] == 6


@pytest.mark.parametrize("ctx", ["spawn", "forkserver"])
def test_workers_other_start_methods(tmp_path, ctx):
    # spawn and forkserver workers import the script as __mp_main__: it must
    # be importable as it is under `python -m prof`.
    steps = 3
    proc, final = run_main(tmp_path, "--steps", str(steps), "--ctx", ctx, timeout=600)
    r = rows(final)
    assert r["data"]["count"] == steps and r["model"]["count"] == steps


def test_help_lists_options_and_variables():
    proc = subprocess.run([sys.executable, "-m", "prof", "--help"], env=child_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    for opt, var in (("--depth", "PROF_TORCH_DEPTH"), ("--trace", "PROF_TRACE"),
                     ("--every", "PROF_SUMMARY_EVERY"), ("--metrics", "PROF_METRICS")):
        assert opt in out and var in out, (opt, var, proc.stdout)


def test_torch_not_imported_for_a_script_without_it(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent("""
        import sys
        import prof
        with prof.zone("work"):
            sum(range(1000))
        print("torch" in sys.modules, sys.argv[1:], __name__)
    """))
    proc = subprocess.run([sys.executable, "-m", "prof", "--summary", "stderr", str(script),
                           "a", "--b"],
                          env=child_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False ['a', '--b'] __main__", proc.stdout
    # Named after the script it runs, not "prof".
    assert "prof summary: plain.py (pid" in proc.stderr, proc.stderr
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "runner.py").write_text(script.read_text())
    proc = subprocess.run([sys.executable, "-m", "prof", "-m", "pkg.runner", "x"],
                          env=child_env(PROF_SUMMARY="stderr"), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False ['x'] __main__", proc.stdout
    assert "prof summary: pkg.runner (pid" in proc.stderr, proc.stderr


def test_time_between_hooks_is_no_stage(tmp_path):
    # The loop spins 5 ms after each optimizer step, outside every hook:
    # that time is the stepping thread's "(no stage)", a top-level row of
    # at least the spins' time (a bound that scheduling can only widen).
    steps, idle_ms = 6, 5.0
    proc, final = run_main(tmp_path, "--steps", str(steps), "--idle-ms", str(idle_ms),
                           "--workers", "0")
    r = rows(final)
    assert "(no stage)" in r, (sorted(r), proc.stderr)
    ns = r["(no stage)"]
    assert ns["parent"] is None and ns["depth"] == 0, ns
    assert ns["total_ns"] >= (steps - 1) * idle_ms * 1e6, ns
    assert ns["wall_share"] > 0, ns
