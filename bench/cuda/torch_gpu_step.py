#!/usr/bin/env python3
"""What prof costs a PyTorch training step on a GPU, against torch.profiler.

The loop of issue 31: 8 x (Linear(512, 512), ReLU), AdamW, a 128-sample
batch already on the device, cross-entropy; each step ends with
torch.cuda.synchronize() so that its time is the GPU's too (2 ms steps
on an H200). Four ways, each a process of its own, alternated round by
round so that a drifting machine hurts them alike:

  plain      the loop alone
  events     python -m prof, PROF_CUDA=1: forward, backward and the
             optimizer are CUDA zones timed with events
  kernels    python -m prof, PROF_CUDA=kernels: the same zones, their GPU
             sides and the kernels each ran from CUPTI
  torchprof  the loop inside torch.profiler.profile(activities=[CPU, CUDA])
             (nothing exported: only the recording's cost)

Each process reports the median of its step times after a warm-up; a
way's ratio is the median over rounds of (its median / plain's median in
the same round).

The last line has a fixed form for scripts:
  prof-bench torch-gpu: device=<name> plain_ms=<ms> events=<x> kernels=<x> torchprof=<x>

Run: PYTHONPATH=build/python python3 bench/cuda/torch_gpu_step.py [--out DIR]
(--device cpu runs the same on the CPU, to try the script without a GPU;
without torch, or without a GPU and no --device cpu, it says so and exits 77.)
With --out, the prof runs write their final JSON summaries there
(events.json, kernels.json): the [gpu] rows and, for kernels, each GPU
stage's busy time and top kernels.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WIDTH = 512
LAYERS = 8
BATCH = 128
WAYS = ("plain", "events", "kernels", "torchprof")


def child(device, steps, warmup, way):
    import torch
    from torch import nn

    torch.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = nn.Sequential(*layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(BATCH, WIDTH, device=device)
    y = torch.randint(0, WIDTH, (BATCH,), device=device)
    loss_fn = nn.CrossEntropyLoss()

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        sync()

    for _ in range(warmup):
        step()
    times = []

    def timed():
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)

    if way == "torchprof":
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU]
        if device == "cuda":
            acts.append(ProfilerActivity.CUDA)
        with profile(activities=acts):
            timed()
    else:
        timed()
    print(json.dumps({"median_ms": statistics.median(times) * 1e3, "steps": len(times)}))


def run_way(way, args, out):
    script = os.path.abspath(__file__)
    cargs = ["--child", way, "--device", args.device, "--steps", str(args.steps),
             "--warmup", str(args.warmup)]
    env = dict(os.environ)
    for k in ("PROF", "PROF_CUDA", "PROF_SUMMARY", "PROF_SUMMARY_FORMAT", "PROF_TRACE"):
        env.pop(k, None)
    if way in ("events", "kernels"):
        cmd = [sys.executable, "-m", "prof", script] + cargs
        env["PROF"] = "1"
        env["PROF_CUDA"] = "1" if way == "events" else "kernels"
        if out:
            env["PROF_SUMMARY"] = os.path.join(out, way + ".json")
            env["PROF_SUMMARY_FORMAT"] = "json"
        else:
            env["PROF_SUMMARY"] = "off"
    else:
        cmd = [sys.executable, script] + cargs
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit("torch_gpu_step: the %s run failed (rc %d)" % (way, p.returncode))
    if p.stderr.strip():
        sys.stderr.write("[%s] %s" % (way, p.stderr))
    return json.loads(p.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", choices=WAYS)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.child:
        child(args.device, args.steps, args.warmup, args.child)
        return 0
    try:
        import torch
    except ImportError:
        print("prof-bench torch-gpu: skipped (no torch for %s)" % sys.executable)
        return 77
    if args.device == "cuda" and not torch.cuda.is_available():
        print("prof-bench torch-gpu: skipped (no GPU; --device cpu tries the script)")
        return 77
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    ratios = {w: [] for w in WAYS[1:]}
    plain = []
    for r in range(args.rounds):
        # Rotate the order too: the first process of a round may find the
        # GPU's clocks lower.
        order = WAYS[r % len(WAYS):] + WAYS[:r % len(WAYS)]
        got = {w: run_way(w, args, args.out) for w in order}
        plain.append(got["plain"])
        for w in WAYS[1:]:
            ratios[w].append(got[w] / got["plain"])
        print("round %d: %s" % (r + 1, ", ".join("%s %.3f ms" % (w, got[w]) for w in WAYS)),
              flush=True)
    med = {w: statistics.median(v) for w, v in ratios.items()}
    print("%s, %d x (Linear(%d), ReLU), AdamW, batch %d: plain step %.3f ms (median of %d rounds)"
          % (name, LAYERS, WIDTH, BATCH, statistics.median(plain), args.rounds))
    for w in WAYS[1:]:
        print("  %-10s %.3fx  (rounds: %s)" % (w, med[w], ", ".join("%.3f" % v for v in ratios[w])))
    print("prof-bench torch-gpu: device=%s plain_ms=%.3f events=%.3f kernels=%.3f torchprof=%.3f"
          % (name.replace(" ", "_"), statistics.median(plain), med["events"], med["kernels"],
             med["torchprof"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
