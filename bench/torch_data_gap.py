#!/usr/bin/env python3
"""Where a `data` zone lies inside the loop's own `next(it)` (issue 32).

A training loop with a 2-worker DataLoader (a batch of 64 items of 0.2 ms,
a 5-layer 512-wide MLP, Adam) is run by `python -m prof` with PROF_TRACE;
the loop takes perf_counter (CLOCK_MONOTONIC, the trace's clock) around
each `next(it)`. Each `data` slice of the trace is matched with its call:

  before   us from the loop's call to the zone's start: prof's wrapper
           (the epoch-end check, the step boundary) and Python's call;
  after    us from the zone's end to the loop's next perf_counter;
  ratio    the run's data total over the loop's sum (the warm-up call out).

The loop unpacks the batch after its second perf_counter, as
tests/python/test_torch_main.py does: rebinding `x, y` frees the previous
batch (50-70 us with workers), the loop's own time. `--unpack-inside`
times `x, y = next(it)` instead, to see that cost in `after`.

Several `--pkg` directories (each a PYTHONPATH holding a built `prof`, e.g.
an old _torch.py copied beside a build's extension) are run alternated,
run by run, for old-against-new figures in one run. Last line per package:
  prof-bench torch-data: pkg=<dir> before_us=<median> after_us=<median> ratio=<median> ratio_min=<x>

Run: PYTHONPATH=build/python /usr/bin/python3 bench/torch_data_gap.py [--runs N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

LOOP = r'''
import json, sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)
torch.manual_seed(0)


class Items(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(0.0002)
        return torch.randn(64), i % 4


def main():
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it = iter(DataLoader(Items(), batch_size=64, num_workers=2))
    pc = time.perf_counter
    calls = []
    for step in range(int(sys.argv[2]) + 1):
        opt.zero_grad()
        if UNPACK_INSIDE:
            t = pc(); x, y = next(it); t2 = pc()
        else:
            t = pc(); batch = next(it); t2 = pc()
            x, y = batch
        calls.append((t, t2))
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    with open(sys.argv[1], "w") as f:
        json.dump(calls, f)


if __name__ == "__main__":
    main()
'''


def one(pkg, steps, unpack_inside, verbose):
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "loop.py")
        with open(script, "w") as f:
            f.write(LOOP.replace("UNPACK_INSIDE", str(unpack_inside)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROF")}
        env.update(PYTHONPATH=pkg, PYTHONDONTWRITEBYTECODE="1", PROF_SUMMARY="off",
                   PROF_LIVE="0", PROF_TRACE=os.path.join(d, "trace.json"))
        calls_path = os.path.join(d, "calls.json")
        subprocess.run([sys.executable, "-m", "prof", script, calls_path, str(steps)], env=env,
                       cwd=d, check=True, capture_output=True)
        with open(calls_path) as f:
            calls = json.load(f)
        with open(os.path.join(d, "trace.json")) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    origin = next(e["args"]["prof"]["ts_origin_ns"] for e in events
                  if isinstance(e.get("args", {}).get("prof"), dict)
                  and "ts_origin_ns" in e["args"]["prof"])
    data = [e for e in events if e.get("name") == "data" and e.get("ph") == "X"]
    if len(data) != len(calls):
        raise SystemExit(f"{len(data)} data slices for {len(calls)} calls")
    before, after, zone, loop = [], [], 0.0, 0.0
    for (t, t2), e in list(zip(calls, data))[1:]:       # the first: workers starting
        start = origin / 1e9 + e["ts"] / 1e6
        end = start + e["dur"] / 1e6
        before.append((start - t) * 1e6)
        after.append((t2 - end) * 1e6)
        zone += e["dur"] / 1e6
        loop += t2 - t
    if verbose:
        print("  per call, us: before", [round(x) for x in before],
              "after", [round(x) for x in after])
    return statistics.median(before), statistics.median(after), zone / loop, max(before), max(after)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pkg", action="append",
                    help="a PYTHONPATH with prof (repeatable; default: $PYTHONPATH)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--unpack-inside", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="each call's before and after")
    a = ap.parse_args()
    pkgs = a.pkg or [os.environ.get("PYTHONPATH", "")]
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not importable here: nothing to measure")
        return
    res = {p: [] for p in pkgs}
    for r in range(a.runs):
        for p in pkgs:
            b, af, ratio, bmax, amax = one(p, a.steps, a.unpack_inside, a.verbose)
            res[p].append((b, af, ratio))
            print(f"run {r} {p}: before {b:.1f} us (max {bmax:.1f})  after {af:.1f} us "
                  f"(max {amax:.1f})  "
                  f"ratio {ratio:.3f}", flush=True)
    for p, v in res.items():
        print(f"prof-bench torch-data: pkg={p} before_us={statistics.median(x[0] for x in v):.1f} "
              f"after_us={statistics.median(x[1] for x in v):.1f} "
              f"ratio={statistics.median(x[2] for x in v):.3f} ratio_min={min(x[2] for x in v):.3f}")


if __name__ == "__main__":
    main()
