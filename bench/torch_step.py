#!/usr/bin/env python3
"""What `python -m prof` costs a PyTorch training step (issue 32).

Two figures, each against a baseline measured in the same run:

  step   a CPU training step (DataLoader batch, an MLP of WIDTH x WIDTH
         blocks in a ModuleList, cross-entropy, zero_grad, backward, SGD),
         run as `python torch_step.py --child` (plain) and as
         `python -m prof torch_step.py --child` (zoned by prof at the default
         depth: data, forward and its 3 stages, backward, optimizer,
         zero_grad, a prof.step() per step), the two alternated run by run;
         each run reports the median of its step times after a warm-up;
         the ratio is the median of the runs' prof/plain ratios.
  inproc the same step in one process, prof's patches (Module.__call__,
         DataLoader __next__, backward, the optimizer's step and zero_grad)
         swapped in and out every block of 10 steps, ABAB...: the same
         memory layout and CPU for both, paired in time; the ratio is the
         median of the pairs' ratios of block medians (CPU time).
  call   ns per nn.Module call (an nn.Identity, so the call is all there is):
         plain; with prof's patched Module.__call__ for a module prof does
         not time (every module below the depth pays this); for a module
         it times (a zone); for a root, a module the script calls itself
         (the model: the step boundary check, train or eval, a zone); and,
         for comparison, with torch's global
         forward pre- and post-hooks (the other way to see every call),
         each minus the plain call; the minimum of interleaved repeats.

The last line has a fixed form for scripts:
  prof-bench torch: step_plain_ms=<ms> step_prof_ms=<ms> ratio=<x> inproc_ratio=<x> untimed_ns=<ns> zone_ns=<ns> global_hooks_ns=<ns>

Run: PYTHONPATH=build/python python3 bench/torch_step.py [--quick]
     ... bench/torch_step.py --calls [--torch-file OLD/_torch.py]: the
     per-call figures only, with prof._torch loaded from that file (to
     compare two versions of it, alternated, on the same build)
(Debian's /usr/bin/python3 with python3-torch; without torch it says so
and exits 0).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WIDTH = 128
BLOCKS = 4
BATCH = 64


def build():
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(WIDTH, WIDTH)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(64, WIDTH)
            self.blocks = nn.ModuleList([Block() for _ in range(BLOCKS)])
            self.head = nn.Linear(WIDTH, 10)

        def forward(self, x):
            x = self.embed(x)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    data = TensorDataset(torch.randn(64 * BATCH, 64), torch.randint(0, 10, (64 * BATCH,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return loader, model, opt


def batches(loader):
    while True:
        for b in loader:
            yield b


def steps_timed(model, opt, it, n):
    """n steps; per step (wall ms, training-thread CPU ms)."""
    from torch import nn

    out = []
    pc, tt = time.perf_counter, time.thread_time
    t0, c0 = pc(), tt()
    for _ in range(n):
        x, y = next(it)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        t1, c1 = pc(), tt()
        out.append(((t1 - t0) * 1e3, (c1 - c0) * 1e3))
        t0, c0 = t1, c1
    return out


def child(steps, warmup):
    loader, model, opt = build()
    it = batches(loader)
    times = steps_timed(model, opt, it, steps + warmup)[warmup:]
    print(json.dumps({"median_ms": statistics.median(t for t, _ in times),
                      "cpu_ms": statistics.median(c for _, c in times)}))


def inproc(blocks, per_block):
    """One process, prof's patches swapped in and out block by block
    (ABAB...): the same memory layout and CPU for both, paired in time.
    Returns the medians of the per-block median CPU step times."""
    import torch
    import torch.utils.data.dataloader as dl

    import prof
    from prof import _torch

    loader, model, opt = build()
    it = batches(loader)
    Opt = type(opt)
    # torch wrapped SGD.step for its profiler when opt was made; what the
    # script would call without prof:
    spots = [(torch.nn.Module, "__call__"), (dl._BaseDataLoaderIter, "__next__"),
             (torch.autograd, "backward"), (Opt, "step"),
             (torch.optim.Optimizer, "zero_grad")]

    def get(o, a):
        return o.__dict__[a] if isinstance(o, type) else getattr(o, a)

    plain = [get(o, a) for o, a in spots]
    prof.enable(True)
    _torch.install()
    patched = [get(o, a) for o, a in spots]
    assert all(p is not q for p, q in zip(plain, patched)), "prof did not patch"

    def use(fns):
        for (o, a), f in zip(spots, fns):
            setattr(o, a, f)

    steps_timed(model, opt, it, 20)          # warm-up, prof's names given
    use(plain)
    steps_timed(model, opt, it, 10)
    res = {False: [], True: []}
    for b in range(blocks):
        for on in ((False, True) if b % 2 == 0 else (True, False)):
            use(patched if on else plain)
            cpu = [c for _, c in steps_timed(model, opt, it, per_block)]
            res[on].append(statistics.median(cpu))
    use(patched)
    return res


def per_patch(blocks, per_block):
    """inproc's pairing with one of prof's patches swapped at a time, and
    a control that swaps none: us a step each adds (median of the pairs'
    differences of block medians, CPU time). The control says how far
    the pairing itself moves on this machine."""
    import torch
    import torch.utils.data.dataloader as dl

    import prof
    from prof import _torch

    loader, model, opt = build()
    it = batches(loader)
    spots = [(torch.nn.Module, "__call__"), (dl._BaseDataLoaderIter, "__next__"),
             (torch.autograd, "backward"), (type(opt), "step"),
             (torch.optim.Optimizer, "zero_grad")]

    def get(o, a):
        return o.__dict__[a] if isinstance(o, type) else getattr(o, a)

    def use(fns):
        for (o, a), f in zip(spots, fns):
            setattr(o, a, f)

    plain = [get(o, a) for o, a in spots]
    prof.enable(True)
    _torch.install()
    patched = [get(o, a) for o, a in spots]
    steps_timed(model, opt, it, 20)
    cases = [("control", plain)]
    cases += [(a, [patched[i] if i == k else plain[i] for i in range(len(spots))])
              for k, (_, a) in enumerate(spots)]
    cases.append(("all", patched))
    for name, sel in cases:
        res = {False: [], True: []}
        for b in range(blocks):
            for on in ((False, True) if b % 2 == 0 else (True, False)):
                use(sel if on else plain)
                res[on].append(statistics.median(c for _, c in steps_timed(model, opt, it,
                                                                           per_block)))
        use(plain)
        d = statistics.median((q - p) * 1000 for p, q in zip(res[False], res[True]))
        print(f"per patch: {name:10s} {d:+8.1f} us a step (plain "
              f"{statistics.median(res[False]):.3f} ms)", flush=True)
    use(patched)


def run_child(prof_on, steps, warmup):
    env = dict(os.environ)
    env["PROF_SUMMARY"] = "off"
    env["PROF_LIVE"] = "0"
    for k in ("PROF", "PROF_TORCH", "PROF_TRACE", "PROF_TORCH_DEPTH"):
        env.pop(k, None)
    me = os.path.abspath(__file__)
    pre = ["-m", "prof"] if prof_on else []
    out = subprocess.run([sys.executable, *pre, me, "--child", "--steps", str(steps),
                          "--warmup", str(warmup), "--width", str(WIDTH)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def call_costs(n, repeats):
    """ns per module call, each case minus the plain call."""
    import torch
    from torch import nn
    from torch.nn.modules import module as M

    import prof
    from prof import _torch

    torch.set_num_threads(1)
    prof.enable(True)
    _torch._instrument(torch)
    x = torch.zeros(1)
    installed = nn.Module.__call__
    plain_call = getattr(installed, "_prof_orig", installed)
    nn.Module.__call__ = plain_call
    patched = _torch._make_call(plain_call, None)

    timed_mod = nn.Identity()
    untimed_mod = nn.Identity()
    root_mod = nn.Identity()
    nn.Module.__call__ = patched
    root_mod(x)                     # named, as the script's first call does
    nn.Module.__call__ = plain_call
    _torch._remember(timed_mod, prof.zone("bench.timed"))
    _torch._tls.open = 1            # as inside a timed forward: no root naming

    def loop(m):
        t = time.perf_counter()
        for _ in range(n):
            m(x)
        return (time.perf_counter() - t) / n * 1e9

    def case_plain():
        nn.Module.__call__ = plain_call
        return loop(untimed_mod)

    def case_untimed():
        nn.Module.__call__ = patched
        try:
            return loop(untimed_mod)
        finally:
            nn.Module.__call__ = plain_call

    def case_zone():
        nn.Module.__call__ = patched
        try:
            return loop(timed_mod)
        finally:
            nn.Module.__call__ = plain_call

    def case_root():
        nn.Module.__call__ = patched
        _torch._tls.open = 0
        try:
            return loop(root_mod)
        finally:
            _torch._tls.open = 1
            nn.Module.__call__ = plain_call

    def case_hooks():
        h1 = M.register_module_forward_pre_hook(lambda m, i: None)
        h2 = M.register_module_forward_hook(lambda m, i, o: None)
        try:
            return loop(untimed_mod)
        finally:
            h1.remove()
            h2.remove()

    cases = {"plain": case_plain, "untimed": case_untimed, "zone": case_zone,
             "root": case_root, "hooks": case_hooks}
    best = {k: float("inf") for k in cases}
    for _ in range(repeats):
        for k, f in cases.items():
            best[k] = min(best[k], f())
    _torch._tls.open = 0
    nn.Module.__call__ = installed
    base = best["plain"]
    return base, {k: best[k] - base for k in ("untimed", "zone", "root", "hooks")}


def main():
    global WIDTH
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--runs", type=int, default=6, help="plain/prof pairs (alternated)")
    p.add_argument("--quick", action="store_true", help="fewer steps, runs and calls")
    p.add_argument("--calls", action="store_true", help="the per-call figures only")
    p.add_argument("--per-patch", action="store_true",
                   help="one process: what each of prof's patches adds to a step, and a control")
    p.add_argument("--width", type=int, default=WIDTH,
                   help=f"the blocks' width (default {WIDTH}: a 10-15 ms step on the 2-core VM)")
    p.add_argument("--torch-file", help="load prof._torch from this file (with --calls)")
    args = p.parse_args()
    WIDTH = args.width
    # Before prof loads in this process (inproc, call): no table at exit.
    os.environ.setdefault("PROF_SUMMARY", "off")
    os.environ.setdefault("PROF_LIVE", "0")
    if args.child:
        child(args.steps, args.warmup)
        return 0
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"torch_step: PyTorch is not available ({e}); skipping")
        return 0
    if args.torch_file:
        import importlib.util

        import prof  # noqa: F401 - the package the file's relative imports need
        spec = importlib.util.spec_from_file_location("prof._torch", args.torch_file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["prof._torch"] = mod
        spec.loader.exec_module(mod)
        prof._torch = mod
    if args.per_patch:
        per_patch(20, 10)
        return 0
    if args.calls:
        base, costs = call_costs(20000 if args.quick else 100000, 5 if args.quick else 9)
        print(f"prof-bench torch calls: call_ns={base:.0f} untimed_ns={costs['untimed']:.0f} "
              f"zone_ns={costs['zone']:.0f} root_ns={costs['root']:.0f} "
              f"global_hooks_ns={costs['hooks']:.0f}")
        return 0
    if args.quick:
        args.steps, args.runs = 60, 3
    wall = {False: [], True: []}
    cpu = {False: [], True: []}
    ratios, wall_ratios = [], []
    for r in range(args.runs):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {on: None for on in order}
        for on in order:
            got[on] = run_child(on, args.steps, args.warmup)
            wall[on].append(got[on]["median_ms"])
            cpu[on].append(got[on]["cpu_ms"])
        ratios.append(got[True]["cpu_ms"] / got[False]["cpu_ms"])
        wall_ratios.append(got[True]["median_ms"] / got[False]["median_ms"])
        print(f"run {r}: cpu plain {got[False]['cpu_ms']:.3f} ms  prof {got[True]['cpu_ms']:.3f} ms  "
              f"ratio {ratios[-1]:.4f}   (wall {got[False]['median_ms']:.3f} / "
              f"{got[True]['median_ms']:.3f} ms)", flush=True)
    res = inproc(6 if args.quick else 30, 10)
    ratios_in = [q / p for p, q in zip(res[False], res[True])]
    print(f"one process, patches swapped per block of 10 steps ({len(res[False])} pairs): "
          f"cpu plain {statistics.median(res[False]):.3f} ms  prof "
          f"{statistics.median(res[True]):.3f} ms  ratio of medians "
          f"{statistics.median(res[True]) / statistics.median(res[False]):.4f}  "
          f"median of pair ratios {statistics.median(ratios_in):.4f}", flush=True)
    base, costs = call_costs(20000 if args.quick else 100000, 5 if args.quick else 9)
    print(f"module call {base:.0f} ns; added: untimed module {costs['untimed']:.0f} ns, "
          f"timed module (a zone) {costs['zone']:.0f} ns, root module {costs['root']:.0f} ns, "
          f"global pre+post hooks "
          f"{costs['hooks']:.0f} ns")
    print(f"wall-time ratio (median of runs): {statistics.median(wall_ratios):.4f}")
    print(f"prof-bench torch: step_plain_ms={statistics.median(cpu[False]):.3f} "
          f"step_prof_ms={statistics.median(cpu[True]):.3f} ratio={statistics.median(ratios):.4f} "
          f"inproc_ratio={statistics.median(ratios_in):.4f} "
          f"untimed_ns={costs['untimed']:.0f} zone_ns={costs['zone']:.0f} "
          f"global_hooks_ns={costs['hooks']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
