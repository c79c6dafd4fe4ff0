#!/usr/bin/env python3
"""A small PyTorch training loop instrumented with prof.

A synthetic classification task, a two-layer MLP on the CPU, and a real
DataLoader with worker processes (num_workers=2 by default, forked on Linux).
Every stage of a step is a prof zone; the loss is a counter; the summary is
printed every --every steps and at the end; a Chrome trace is written.

    PYTHONPATH=build/python python3 examples/python/train_torch.py --steps 60
    # open prof-train-<pid>.json in https://ui.perfetto.dev

DataLoader workers are forked children: their `dataset.getitem` zones go to
their own trace files (PROF_TRACE's %p is the pid) and never into the
parent's statistics or trace; the parent's summary shows how long the loop
waited for data (`data_wait`). Each worker closes its trace as it exits,
and writes its own final summary ("forked from <pid>") where PROF_SUMMARY
sends it explicitly (stderr, or a path with %p; unset, the parent's table
counts the workers instead), with no worker_init_fn: `import prof` hooks
multiprocessing's exit path in forked workers. Merge the files with
tools/prof-merge.

Without torch the script says so and exits 0.
"""
import argparse
import os
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    p.add_argument("--every", type=int, default=50, help="print the summary every N steps")
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--trace", default="prof-train-%p.json",
                   help="Chrome trace path (PROF_TRACE; %%p = pid); '' for none")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    return p.parse_args()


def main():
    args = parse_args()
    # The runtime reads its environment once, when it starts: set it first.
    os.environ.setdefault("PROF", "1")
    if args.trace:
        os.environ.setdefault("PROF_TRACE", args.trace)

    try:
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, Dataset
    except ImportError as e:
        print(f"train_torch: PyTorch is not available ({e}); skipping "
              "(Debian: apt-get install python3-torch)")
        return 0

    import prof

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)

    class Synthetic(Dataset):
        """Points around 4 centres in 32 dimensions; label = the centre."""

        def __init__(self, n, dim=32, classes=4):
            g = torch.Generator().manual_seed(1)
            self.centres = torch.randn(classes, dim, generator=g) * 3
            self.n, self.dim, self.classes = n, dim, classes

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            # Runs in a worker process: timed there, reported there.
            with prof.zone("dataset.getitem"):
                g = torch.Generator().manual_seed(i)
                y = i % self.classes
                x = self.centres[y] + torch.randn(self.dim, generator=g)
                return x, y

    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = Synthetic(args.steps * args.batch)
    loader = DataLoader(data, batch_size=args.batch, shuffle=True,
                        num_workers=args.workers, drop_last=True)

    prof.thread_name("train")
    batches = iter(loader)
    for step in range(args.steps):
        with prof.zone("train_step"):
            with prof.zone("data_wait"):
                try:
                    x, y = next(batches)
                except StopIteration:
                    prof.mark("epoch")
                    batches = iter(loader)
                    x, y = next(batches)
            with prof.zone("forward"):
                loss = loss_fn(model(x), y)
            with prof.zone("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with prof.zone("optimizer"):
                opt.step()
        prof.counter("loss", loss.item())
        prof.step()
        if args.every and (step + 1) % args.every == 0 and step + 1 < args.steps:
            print(f"--- step {step + 1}")
            print(prof.summary(), end="")

    print(f"--- final (step {args.steps}, loss {loss.item():.4f})")
    print(prof.summary(), end="")
    del batches, loader             # stop the workers before the trace closes
    prof.shutdown()                 # close the trace now (also done at exit)
    if args.trace:
        print(f"trace: {args.trace.replace('%p', str(os.getpid()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
