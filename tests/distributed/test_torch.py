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
        assert o["nranks"] == 3 and [r["state"] for r in o["ranks"]] == ["ok"] * 3
        assert (o["straggler"]["rank"], o["straggler"]["stage"]) == (1, "optimizer"), o
        opt = [s for s in o["stages"] if s["name"] == "optimizer"][0]
        assert opt["slowest_rank"] == 1 and opt["ranks"] == 3
        assert opt["avg_ns"]["max"] > 10e6 > opt["avg_ns"]["median"]
        assert [r["rank"] for r in opt["per_rank"]] == [0, 1, 2]
    # No per-rank periodic JSON summary either.
    assert '"kind":"periodic"' not in err


def test_rank_exits_early_no_hang():
    needs_torch()
    _, err, took = run([TRAIN_DDP, "--ranks", "3", "--steps", "40", "--every", "10", "--no-ddp",
                        "--exit-rank", "2", "--exit-step", "15", "--timeout", "5"], clean_env())
    assert took < 200
    assert re.findall(r"^prof ranks: step (\d+)", err, re.M) == ["10"], err
    failed = re.findall(r"^prof: cross-rank summary failed \(gather at step 20", err, re.M)
    assert len(failed) == 2, err
    for r in (0, 1):
        steps = re.findall(r"^prof summary: \S+ \(pid \d+, rank %d\), step (\d+):" % r, err,
                           re.M)
        assert steps == ["30", "40"], err


SINGLE = textwrap.dedent("""
    import os, sys
    import torch.distributed as dist
    import prof, prof.distributed
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % sys.argv[1],
                            rank=0, world_size=1)
    on = prof.distributed.enable(timeout=5)
    print("enabled", on, flush=True)
    for i in range(6):
        with prof.zone("work"):
            pass
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
            assert st["count"] == r["count"] == 4
            for key in ("total", "self", "min", "max"):
                assert st[key + "_ms"] == r[key + "_ns"] / 1e6
            for key in ("avg", "p50", "p95", "p99"):
                assert st[key + "_ms"] == r[key + "_ns"] / 1e6
            assert st["wall_share"] == r["wall_share"]
            assert st["depth"] == r["depth"]
