#!/usr/bin/env python3
"""measure_cost.py [RANKS ...] - what one cross-rank window costs over
torch.distributed (gloo on 127.0.0.1): bytes each rank sends and receives
(the three rounds of the reduction), and the milliseconds prof.step()
spends at a window step on rank 0 (flush, reading the window and handing
it to prof's worker thread, which reduces it beside the steps). A barrier
before each window step takes the ranks' arrival skew out. Not a test.

    PYTHONPATH=build/python python3 tests/distributed/measure_cost.py 2 4 8
"""
import os
import socket
import statistics
import sys
import time


def worker(rank, world, port, q):
    os.environ.update(RANK=str(rank), PROF="1", PROF_SUMMARY_EVERY="10steps",
                      PROF_SUMMARY="off")
    import torch
    import torch.distributed as dist
    import prof
    import prof.distributed

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world)
    prof.distributed.enable(timeout=60)
    names = ["stage_%d" % i for i in range(8)]
    step_ms = []
    for step in range(1, 121):
        for n in names:
            with prof.zone(n):
                pass
        if step % 10 == 0:
            dist.barrier()
            t0 = time.perf_counter()
            prof.step()
            step_ms.append((time.perf_counter() - t0) * 1e3)
        else:
            prof.step()
    cost = prof.distributed.last()["cost"]
    if rank == 0:
        q.put((world, cost["bytes_sent"], cost["bytes_received"], step_ms[2:]))
    dist.destroy_process_group()


def main():
    import torch.multiprocessing as mp
    ranks = [int(a) for a in sys.argv[1:]] or [2, 4, 8]
    ctx = mp.get_context("spawn")
    print("ranks  bytes sent/rank  bytes received/rank  ms per window step on rank 0 "
          "(median, max of %s windows)" % "10")
    for world in ranks:
        q = ctx.SimpleQueue()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(worker, args=(world, port, q), nprocs=world, join=True)
        w, sent, received, ms = q.get()
        print("%5d  %15d  %19d  %.2f, %.2f" % (w, sent, received, statistics.median(ms), max(ms)))


if __name__ == "__main__":
    main()
