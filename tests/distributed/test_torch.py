"""Cross-rank summaries over torch.distributed (gloo on 127.0.0.1), and the
Python view of the last window. Every multi-process run is a child process
group killed after a bound, so a hang fails the test instead of the suite.

Run by meson (suite distributed) with PYTHONPATH at the in-tree package and
PROF_SOURCE_ROOT at the source tree."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

SRC = os.environ.get("PROF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN_DDP = os.path.join(SRC, "examples", "python", "train_ddp.py")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROF")}
    env.update({"PROF": "1", "PROF_SUMMARY": "stderr"})
    env.update(extra)
    return env


def run(args, env, limit=240):
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable] + args, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail("still running after %d s (a hang):\n%s" % (limit, err))
    assert p.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, out, err)
    return out, err, time.monotonic() - t0


def needs_torch():
    pytest.importorskip("torch")
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed without gloo")


def test_straggler_named_text():
    needs_torch()
    out, err, _ = run([TRAIN_DDP, "--ranks", "4", "--steps", "20", "--every", "10",
                       "--slow-rank", "2", "--slow-stage", "data", "--slow-ms", "15", "--last"],
                      clean_env())
    assert re.findall(r"^prof ranks: step (\d+), last 10 steps, 4 ranks", err, re.M) == \
        ["10", "20"], err
    assert re.findall(r"^straggler: rank (\d+) in (\S+),", err, re.M) == [("2", "data")] * 2, err
    # Rank 0 prints the table; no rank prints a periodic summary of its own.
    assert not re.search(r"^prof summary: .*step \d+: last", err, re.M), err
    assert len(re.findall(r"^prof summary: .*final", err, re.M)) == 4, err
    assert "last: step 20 straggler rank 2 in data" in out, out


def test_straggler_named_json():
    needs_torch()
    _, err, _ = run([TRAIN_DDP, "--ranks", "3", "--steps", "20", "--every", "10",
                     "--slow-rank", "1", "--slow-stage", "optimizer", "--slow-ms", "15",
                     "--json"], clean_env())
    objs = [json.loads(line) for line in err.splitlines() if line.startswith('{"prof":"ranks"')]
    assert [o["step"] for o in objs] == [10, 20], err
    for o in objs:
        assert o["nranks"] == o["ranks_ok"] == 3 and o["ranks"] == [], o
        assert (o["straggler"]["rank"], o["straggler"]["stage"]) == (1, "optimizer"), o
        opt = [s for s in o["stages"] if s["name"] == "optimizer"][0]
        assert opt["slowest_rank"] == 1 and opt["ranks"] == 3
        assert opt["avg_ns"]["max"] > 10e6 > opt["avg_ns"]["median"]
        assert opt["avg_ns"]["max_rank"] == 1 and opt["count"] == 30
    # No per-rank periodic JSON summary either.
    assert '"kind":"periodic"' not in err


def test_rank_exits_early_no_hang():
    needs_torch()
    _, err, took = run([TRAIN_DDP, "--ranks", "3", "--steps", "40", "--every", "10", "--no-ddp",
                        "--exit-rank", "2", "--exit-step", "15", "--timeout", "5"], clean_env())
    assert took < 200
    # Rank 2 leaves (os._exit) at step 15, without waiting for anyone: the
    # reduction of step 10 completes if the others reached step 10 by
    # then, else it fails as the connection closes. Either way no table
    # after that, and both remaining ranks say once that the summaries are
    # per-rank again (naming rank 2 when it never reached the window).
    tables = re.findall(r"^prof ranks: step (\d+)", err, re.M)
    assert tables in ([], ["10"]), err
    failed = re.findall(r"^prof: cross-rank summary failed \((.*)\)", err, re.M)
    assert len(failed) == 2, err
    if tables:
        assert all(f.startswith("rank 2 did not reach the reduction of window 2 (step 20")
                   or "Connection" in f for f in failed), failed
    # Ranks 0 and 1 print their final summaries; rank 2 left with os._exit.
    assert len(re.findall(r"^prof summary: .*final", err, re.M)) == 2, err


SINGLE = textwrap.dedent("""
    import os, sys, time
    import torch.distributed as dist
    import prof, prof.distributed
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % sys.argv[1],
                            rank=0, world_size=1)
    on = prof.distributed.enable(timeout=5)
    print("enabled", on, flush=True)
    for i in range(6):
        with prof.zone("work"):
            time.sleep(0.05)   # the reduction runs beside the steps
        prof.step()
    last = prof.distributed.last()
    print("last", None if last is None else (last["step"], last["nranks"], last["straggler"]))
    dist.destroy_process_group()
""")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.parametrize("every,ok,message", [
    ("3steps", True, None),
    ("200ms", False, "cross-rank summaries need step windows, and PROF_SUMMARY_EVERY is "
                     "time-based"),
    (None, False, "cross-rank summaries need PROF_SUMMARY_EVERY=Nsteps"),
])
def test_enable_refuses_time_windows(tmp_path, every, ok, message):
    needs_torch()
    script = tmp_path / "single.py"
    script.write_text(SINGLE)
    env = clean_env() if every is None else clean_env(PROF_SUMMARY_EVERY=every)
    out, err, _ = run([str(script), free_port()], env, limit=120)
    assert ("enabled %s" % ok) in out, out + err
    if ok:
        assert re.findall(r"^prof ranks: step (\d+), last 3 steps, 1 ranks", err, re.M) == \
            ["3", "6"], err
        assert "last (6, 1, None)" in out, out
    else:
        assert err.count(message) == 1, err
        assert "prof ranks:" not in err and "last None" in out, out + err


BUSY = textwrap.dedent("""
    import sys, time
    import torch.distributed as dist
    import prof, prof.distributed
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % sys.argv[1],
                            rank=0, world_size=1)
    print("enabled", prof.distributed.enable(timeout=5), flush=True)
    st = prof.distributed._st
    end = time.monotonic() + float(sys.argv[2])
    steps = started = 0
    while time.monotonic() < end:
        # The training thread makes and frees Python objects all the time
        # while prof's worker thread talks to the store, window after window.
        with prof.zone("work"):
            junk = [(bytes(i % 9), {"k": str(i)}) for i in range(300)]
        skipped = st["skipped"]
        prof.step()
        steps += 1
        if st["skipped"] == skipped:
            started = steps      # this step's window went to the worker thread
    last = prof.distributed.last()
    print("steps", steps, "windows", st["windows"], "skipped", st["skipped"],
          "started", started, "last", last["step"])
    dist.destroy_process_group()
""")


def test_store_beside_a_busy_training_thread(tmp_path):
    """prof's worker thread uses the store only through bindings that hold
    the GIL while they make Python objects. It used compare_set, which up to
    torch 2.3 builds its result without the GIL: this program died of
    SIGSEGV within 4 s in 3 runs of 3 (a DDP rank, in 1 run of about 100)."""
    needs_torch()
    script = tmp_path / "busy.py"
    script.write_text(BUSY)
    out, err, _ = run([str(script), free_port(), "4"],
                      clean_env(PROF_SUMMARY_EVERY="1steps", PROF_SUMMARY="off"), limit=120)
    m = re.search(r"^steps (\d+) windows (\d+) skipped (\d+) started (\d+) last (\d+)$",
                  out, re.M)
    assert m, out + err
    steps, windows, skipped, started, last = (int(g) for g in m.groups())
    # Every step closed a window: reduced, or skipped while the previous
    # one was in flight (a loaded machine); last() is the last one reduced.
    # 20 windows at least (a skip costs 0.2 s): the store was busy.
    assert windows + skipped == steps and windows >= 20, out + err
    assert last == started, out + err
    assert "cross-rank summary failed" not in err, err


AUTO = textwrap.dedent("""
    import os, sys
    import torch.multiprocessing as mp

    def worker(rank, port):
        os.environ.update(RANK=str(rank), PROF_RANKS="1", PROF_SUMMARY_EVERY="5steps")
        import time
        import torch.distributed as dist
        import prof   # PROF_RANKS=1: collective at the first step after the group exists
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % port,
                                rank=rank, world_size=2)
        for i in range(10):
            with prof.zone("work"):
                time.sleep(0.004 if rank == 1 else 0.0005)
            prof.step()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(worker, args=(sys.argv[1],), nprocs=2)
""")


def test_prof_ranks_env_switch(tmp_path):
    needs_torch()
    script = tmp_path / "auto.py"
    script.write_text(AUTO)
    _, err, _ = run([str(script), free_port()], clean_env(), limit=180)
    assert re.findall(r"^prof ranks: step (\d+), last 5 steps, 2 ranks", err, re.M) == \
        ["5", "10"], err
    assert re.findall(r"^straggler: rank (\d+) in (\S+),", err, re.M) == [("1", "work")] * 2
    assert not re.search(r"^prof summary: .*step \d+: last", err, re.M), err


WINDOW = textwrap.dedent("""
    import json, sys, time
    import prof
    out = []
    for step in range(1, 13):
        with prof.zone("outer"):
            with prof.zone("inner"):
                time.sleep(0.0002 * (step % 4 + 1))
        prof.step()
        if step % 4 == 0:
            prof.flush()
            out.append({"step": prof.window_step(), "stats": prof.window_stats()})
    print(json.dumps(out))
""")


def test_window_stats_equal_periodic_summary(tmp_path):
    """prof.window_stats() holds the numbers the periodic summary printed."""
    script = tmp_path / "window.py"
    script.write_text(WINDOW)
    summaries = tmp_path / "summaries.jsonl"
    env = clean_env(PROF_SUMMARY=str(summaries), PROF_SUMMARY_EVERY="4steps",
                    PROF_SUMMARY_FORMAT="json")
    out, _, _ = run([str(script)], env, limit=60)
    got = json.loads(out)
    periodic = [json.loads(line) for line in summaries.read_text().splitlines()
                if '"kind":"periodic"' in line]
    assert [g["step"] for g in got] == [4, 8, 12] == [p["step"] for p in periodic]
    for g, p in zip(got, periodic):
        rows = p["window"]["stages"]
        assert list(g["stats"]) == [r["name"] for r in rows]
        for r in rows:
            st = g["stats"][r["name"]]
            assert st["count"] == r["count"]
            # Every stage ran once a step; "(no stage)" (the time between
            # them) counts its spans, the short ones summed per pass.
            assert r["count"] == 4 or r["name"] == "(no stage)"
            for key in ("total", "self", "min", "max"):
                assert st[key + "_ms"] == r[key + "_ns"] / 1e6
            for key in ("avg", "p50", "p95", "p99"):
                assert st[key + "_ms"] == r[key + "_ns"] / 1e6
            assert st["wall_share"] == r["wall_share"]
            assert st["depth"] == r["depth"]


RANKS_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ranks_job.py")


def torchrun(args, env, nproc=4, limit=85):
    """nproc ranks of ranks_job.py launched the way torch.distributed.run
    launches them (env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT), on
    127.0.0.1: Debian's torch 1.13 launcher itself fails under Python 3.11
    (torch.distributed.elastic's Std.from_str). Every rank is killed, and
    the test fails as a hang, after limit seconds. Returns (stdout, stderr,
    seconds) of all ranks together."""
    port = free_port()
    procs = []
    t0 = time.monotonic()
    for r in range(nproc):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc),
                 LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, RANKS_JOB] + args, env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    outs, errs, hung = [], [], False
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(1, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            hung = True
            for q in procs:
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            o, e = p.communicate()
        outs.append(o)
        errs.append(e)
    out, err = "".join(outs), "".join(errs)
    if hung:
        pytest.fail("still running after %d s (a hang):\n%s" % (limit, err))
    for p in procs:
        assert p.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, out,
                                                                         err)
    return out, err, time.monotonic() - t0


@pytest.mark.parametrize("late", [False, True])
def test_rank_never_steps_ddp(late):
    """A rank that never calls prof.step() under DDP: the job ends (one
    PROF_RANKS_TIMEOUT at most: the reduction never blocks a step, and the
    group is agreed in bounded time), and every other rank names it."""
    needs_torch()
    env = clean_env(PROF_RANKS="1", PROF_RANKS_TIMEOUT="10s", PROF_SUMMARY_EVERY="5steps",
                    OMP_NUM_THREADS="1")
    out, err, took = torchrun(["--never", "3", "--iters", "30"] + (["--late"] if late else []),
                              env)
    assert out.count("trained 30 iterations") == 4, out + err
    named = re.findall(r"^prof: cross-rank summary failed \((.*)\)", err, re.M)
    assert len(named) == 3, err
    assert all(re.search(r"\brank 3 did not (reach|arrive)", w) for w in named), named


def test_rank_steps_twice_named():
    """A rank that calls prof.step() twice per iteration: its windows end
    at other steps than rank 0's, and the note under the table names it."""
    needs_torch()
    env = clean_env(PROF_RANKS="1", PROF_RANKS_TIMEOUT="20s", PROF_SUMMARY_EVERY="5steps",
                    PROF_SUMMARY_FORMAT="json", OMP_NUM_THREADS="1")
    out, err, _ = torchrun(["--double", "1", "--iters", "40"], env, nproc=2)
    objs = [json.loads(line) for line in err.splitlines() if line.startswith('{"prof":"ranks"')]
    assert objs, err
    noted = [o for o in objs if o["ranks_other_steps"] > 0]
    assert noted, err
    for o in noted:
        assert [r["rank"] for r in o["ranks"] if r["state"] == "other_steps"] == [1], o
        assert any(s["ranks_other_steps"] > 0 for s in o["stages"]), o


# An unmodified DDP script: no prof in it.
DDP_UNMODIFIED = textwrap.dedent("""
    import torch
    import torch.distributed as dist
    from torch import nn

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(10):
        opt.zero_grad()
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
    dist.destroy_process_group()
""")


@pytest.mark.parametrize("nranks", [2, 3])
def test_torchrun_python_m_prof_cross_rank_table(tmp_path, nranks):
    """PROF_RANKS=1 under torchrun with python -m prof and no code change:
    the optimizer's steps are prof's steps, so rank 0 prints the cross-rank
    table at each window, the last one included (before the script's
    destroy_process_group). torch 1.13's torchrun needs --redirects and
    --tee on Python 3.11 (docs/TORCH.md)."""
    needs_torch()
    script = tmp_path / "ddp.py"
    script.write_text(DDP_UNMODIFIED)
    _, err, _ = run(["-m", "torch.distributed.run", "--nproc_per_node", str(nranks),
                     "--master_addr", "127.0.0.1", "--master_port", free_port(),
                     "--redirects", "2", "--tee", "2", "-m", "prof", str(script)],
                    clean_env(PROF_RANKS="1", PROF_SUMMARY_EVERY="5steps",
                              OMP_NUM_THREADS="1"), limit=240)
    assert re.findall(r"^\[default0\]:prof ranks: step (\d+), last 5 steps, (\d+) ranks",
                      err, re.M) == [("5", str(nranks)), ("10", str(nranks))], err
    assert len(re.findall(r"^\[default0\]:straggler: rank \d+ (in |outside stages)", err,
                          re.M)) == 2, err
    assert "cross-rank summary failed" not in err, err
    assert len(re.findall(r"^\[default\d\]:prof summary: .*final: 10 steps", err, re.M)) == \
        nranks, err
