#!/usr/bin/env python3
"""A DistributedDataParallel loop with a live cross-rank summary.

Four ranks on this machine (torch.multiprocessing.spawn, gloo on CPU,
MASTER_ADDR=127.0.0.1), a small MLP, and prof zones for each stage. Every
--every steps rank 0 prints one table of every rank's window and names the
straggler; --slow-rank R --slow-stage S makes rank R slower in stage S (a
sleep, like a slow disk or a busy loader), and the table names them:

    PYTHONPATH=build/python python3 examples/python/train_ddp.py \\
        --slow-rank 2 --slow-stage data --slow-ms 20

    prof ranks: step 20, last 10 steps, 4 ranks (window 312.40 ms on rank 0)
    stage  ranks  avg med ...                          slowest  spread
    ...
    straggler: rank 2 in data, +20.10 ms per step (...)

--no-ddp drops the model's gradient all-reduce (each rank trains alone), and
--exit-rank R --exit-step K makes rank R leave at step K (with --stall-s S:
stall S seconds there instead): the others' next gather fails or times out,
prof says so once, and every rank goes back to its own summaries
(docs/DISTRIBUTED.md). Without torch the script says so and exits 0.
"""
import argparse
import os
import socket
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=4, help="processes (default 4)")
    p.add_argument("--steps", type=int, default=40, help="training steps (default 40)")
    p.add_argument("--every", type=int, default=10,
                   help="steps per window: PROF_SUMMARY_EVERY=Nsteps (default 10)")
    p.add_argument("--slow-rank", type=int, default=None, help="this rank is slower ...")
    p.add_argument("--slow-stage", default="data",
                   choices=["data", "forward", "backward", "optimizer"],
                   help="... in this stage (default data)")
    p.add_argument("--slow-ms", type=float, default=20.0, help="... by this much per step")
    p.add_argument("--no-ddp", action="store_true", help="no gradient all-reduce")
    p.add_argument("--exit-rank", type=int, default=None, help="this rank leaves early ...")
    p.add_argument("--exit-step", type=int, default=15, help="... after this step")
    p.add_argument("--stall-s", type=float, default=None,
                   help="instead of leaving, --exit-rank stalls this long (alive, silent)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a gather may wait (PROF_RANKS_TIMEOUT; default 60)")
    p.add_argument("--json", action="store_true", help="PROF_SUMMARY_FORMAT=json")
    p.add_argument("--last", action="store_true",
                   help="rank 0 prints prof.distributed.last()'s straggler at the end")
    return p.parse_args(argv)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, args, port):
    # The runtime reads its environment when it starts: before `import prof`.
    os.environ["RANK"] = str(rank)
    os.environ.setdefault("PROF", "1")
    os.environ["PROF_SUMMARY_EVERY"] = "%dsteps" % args.every
    if args.json:
        os.environ["PROF_SUMMARY_FORMAT"] = "json"
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)

    import torch
    import torch.distributed as dist
    from torch import nn

    import prof
    import prof.distributed

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    prof.distributed.enable(timeout=args.timeout)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    if not args.no_ddp:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(rank)

    def slow(stage):
        if rank == args.slow_rank and stage == args.slow_stage:
            time.sleep(args.slow_ms / 1e3)

    with prof.zone("train"):
        for step in range(1, args.steps + 1):
            with prof.zone("data"):
                x = torch.randn(32, 64, generator=gen)
                y = torch.randint(0, 10, (32,), generator=gen)
                slow("data")
            with prof.zone("forward"):
                loss = loss_fn(model(x), y)
                slow("forward")
            with prof.zone("backward"):
                opt.zero_grad()
                loss.backward()   # DDP's gradient all-reduce happens in here
                slow("backward")
            with prof.zone("optimizer"):
                opt.step()
                slow("optimizer")
            prof.counter("loss", float(loss))
            prof.step()
            if rank == args.exit_rank and step == args.exit_step:
                if args.stall_s is not None:
                    time.sleep(args.stall_s)
                    continue
                # Leaves without a goodbye, as a rank that crashed would.
                sys.stderr.flush()
                os._exit(0)

    if args.last and rank == 0:
        last = prof.distributed.last()
        s = last["straggler"] if last else None
        print("last: step %s straggler %s" % (last and last["step"],
              s and "rank %d in %s" % (s["rank"], s["stage"])), flush=True)
    if args.exit_rank is None:
        dist.destroy_process_group()


def main():
    args = parse_args()
    try:
        import torch.multiprocessing as mp
    except ImportError as e:
        print("train_ddp.py: needs PyTorch (%s); nothing to do" % e)
        return 0
    mp.spawn(worker, args=(args, free_port()), nprocs=args.ranks, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
