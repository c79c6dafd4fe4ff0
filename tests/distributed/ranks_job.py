"""ranks_job.py - a small DDP (CPU, gloo) job for the cross-rank tests,
run under ``python3 -m torch.distributed.run`` on 127.0.0.1.

    --never R     rank R never calls prof.step() (it trains all the same)
    --double R    rank R calls prof.step() twice per iteration
    --iters N     iterations (default 40)
    --sleep S     seconds of work per iteration (default 0.01)

torch.distributed is imported before prof, so PROF_RANKS=1 hooks
init_process_group; ``--late`` imports prof after it instead (prof then
creates its group at the first step)."""
import argparse
import os
import time

p = argparse.ArgumentParser()
p.add_argument("--never", type=int, default=None)
p.add_argument("--double", type=int, default=None)
p.add_argument("--iters", type=int, default=40)
p.add_argument("--sleep", type=float, default=0.01)
p.add_argument("--late", action="store_true")
args = p.parse_args()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

if not args.late:
    import prof  # noqa: E402
dist.init_process_group("gloo")
if args.late:
    import prof  # noqa: E402,F811
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
t0 = time.monotonic()
for i in range(args.iters):
    with prof.zone("work"):
        time.sleep(args.sleep)
    with prof.zone("backward"):
        loss = model(torch.ones(4, 8)).sum()
        loss.backward()   # DDP's all-reduce: every rank, every iteration
        opt.step()
    if rank != args.never:
        prof.step()
        if rank == args.double:
            prof.step()
print("rank %d trained %d iterations in %.1f s" % (rank, args.iters, time.monotonic() - t0),
      flush=True)
dist.destroy_process_group()
