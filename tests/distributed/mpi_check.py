#!/usr/bin/env python3
"""mpi_check.py MPI_TRAIN CASE - run examples/mpi_train under mpirun -np 4
(127.0.0.1 only, bounded in time) and check what prof printed.

CASE:
  straggler  rank 2 is slow in data, then (a second run) rank 1 in compute,
             by SLOW_MS per step: large against the noise of the others'
             allreduce (4 ranks on 2 loaded cores wait 70-90 ms per step
             there, and their spread reached 15 ms, the margin this test
             once had: rank 3 was named in allreduce):
             rank 0 prints one cross-rank table per window (text, then JSON)
             naming that rank and stage; no rank prints a periodic summary
             of its own.
  exit       rank 3 leaves at step 15: the others' step-20 gather times out
             (PROF_RANKS_TIMEOUT=3s), each says so once and prints its own
             summaries at steps 30 and 40; the job ends in bounded time.
  time       PROF_SUMMARY_EVERY=1s: refused with one message per rank, no
             cross-rank table, the per-rank summaries stay.
  never      (MPI_TRAIN is tests/distributed/mpi_ranks) rank 3 never steps
             while every rank runs the job's MPI_Allreduce: the others'
             reduction times out once (PROF_RANKS_TIMEOUT=10s), rank 0
             names rank 3 (each stepping rank prints its words), and every
             rank finishes all its iterations.
  never0     (mpi_ranks) the same with rank 0 as the one that never steps:
             rank 1 names it; the job's loop takes at most one
             PROF_RANKS_TIMEOUT (5s) and a little.
  rate       (mpi_ranks) rank 2 steps twice per iteration in a job that
             synchronises every iteration: it waits alone at its early
             window, then tells the others, who do not wait at theirs; the
             loop takes at most one PROF_RANKS_TIMEOUT (5s) and a little
             (not two), and every rank's message names rank 2.
Exit 0 pass, 1 fail, 77 skip (no mpirun)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time


def run(exe, args, env_extra, limit=120):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("SKIP: no mpirun")
        sys.exit(77)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROF")}
    env.update(PROF="1", PROF_SUMMARY="stderr", OMPI_MCA_btl_tcp_if_include="lo",
               OMPI_MCA_oob_tcp_if_include="lo", **env_extra)
    cmd = [mpirun, "-np", "4", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
           exe] + args
    t0 = time.monotonic()
    # Its own session: on a timeout the whole job (mpirun and its ranks)
    # is killed, not only mpirun.
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        fail("mpirun still running after %d s (a hang)\nstderr:\n%s" % (limit, err))
    took = time.monotonic() - t0
    if p.returncode != 0:
        fail("mpirun exited %d\nstdout:\n%s\nstderr:\n%s" % (p.returncode, out, err))
    return out, err, took


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg, out=""):
    if not cond:
        fail(msg + ("\n--- output ---\n" + out if out else ""))


# The straggler's extra time per step (see the docstring).
SLOW_MS = "200"


def main():
    exe, case = sys.argv[1], sys.argv[2]
    if case == "straggler":
        _, err, _ = run(exe, ["--steps", "30", "--slow-rank", "2", "--slow-stage", "data",
                              "--slow-ms", SLOW_MS], {"PROF_SUMMARY_EVERY": "10steps"})
        tables = re.findall(r"^prof ranks: step (\d+), last 10 steps, 4 ranks", err, re.M)
        check(tables == ["10", "20", "30"], "one table per window from rank 0", err)
        stragglers = re.findall(r"^straggler: rank (\d+) in (\S+),", err, re.M)
        check(stragglers == [("2", "data")] * 3, "rank 2 in data named each window", err)
        check(not re.search(r"^prof summary: .*step \d+: last", err, re.M),
              "no per-rank periodic summary", err)
        check(len(re.findall(r"^prof summary: .*final", err, re.M)) == 4,
              "every rank's final summary", err)
        _, err, _ = run(exe, ["--steps", "20", "--slow-rank", "1", "--slow-stage", "compute",
                              "--slow-ms", SLOW_MS],
                        {"PROF_SUMMARY_EVERY": "10steps", "PROF_SUMMARY_FORMAT": "json"})
        objs = [json.loads(line) for line in err.splitlines() if line.startswith('{"prof":"ranks"')]
        check([o["step"] for o in objs] == [10, 20], "one JSON object per window", err)
        for o in objs:
            check(o["nranks"] == 4 and all(r["state"] == "ok" for r in o["ranks"]),
                  "four readable ranks", err)
            check(o["straggler"]["rank"] == 1 and o["straggler"]["stage"] == "compute",
                  "rank 1 in compute named", json.dumps(o))
            compute = [s for s in o["stages"] if s["name"] == "compute"][0]
            check(compute["slowest_rank"] == 1 and compute["spread"] > 10,
                  "compute's slowest rank and spread", json.dumps(compute))
    elif case == "exit":
        _, err, took = run(exe, ["--steps", "40", "--exit-rank", "3", "--exit-step", "15"],
                           {"PROF_SUMMARY_EVERY": "10steps", "PROF_RANKS_TIMEOUT": "3s"})
        check(took < 60, "bounded: took %.1f s" % took, err)
        check(re.findall(r"^prof ranks: step (\d+)", err, re.M) == ["10"],
              "the table before rank 3 left, none after", err)
        failed = re.findall(r"^prof: cross-rank summary failed \((.*)\)", err, re.M)
        check(len(failed) == 3 and all("timed out" in f for f in failed),
              "each remaining rank says so once", err)
        for r in range(3):
            steps = re.findall(r"^prof summary: mpi_train \(pid \d+, rank %d\), step (\d+):" % r,
                               err, re.M)
            check(steps == ["30", "40"], "rank %d prints its own summaries again" % r, err)
    elif case == "time":
        _, err, _ = run(exe, ["--steps", "20", "--slow-rank", "2", "--slow-ms", "60"],
                        {"PROF_SUMMARY_EVERY": "500ms"})
        check("prof ranks:" not in err, "no cross-rank table", err)
        refused = re.findall(r"^prof: cross-rank summaries need step windows.*time-based", err,
                             re.M)
        check(len(refused) == 4, "one refusal per rank", err)
        check(re.search(r"^prof summary: .*rank 1\), step \d+: last", err, re.M),
              "per-rank periodic summaries stay", err)
    elif case == "never":
        out, err, took = run(exe, ["never", "3", "30"], {"PROF_SUMMARY_EVERY": "5steps",
                                               "PROF_RANKS_TIMEOUT": "10s"}, limit=85)
        check(out.count("trained 30 iterations") == 4, "every rank finishes", out + err)
        failed = re.findall(r"^prof: cross-rank summary failed \((.*)\)", err, re.M)
        check(len(failed) == 3 and all("timed out" in f for f in failed),
              "each stepping rank says so once", err)
        check(all(re.search(r"on rank 0 .*: rank 3 did not reach this step", f) for f in failed),
              "rank 0 names rank 3, in every rank's message", err)
        check("prof ranks:" not in err, "no table", err)
    elif case in ("never0", "rate"):
        odd = "0" if case == "never0" else "2"
        out, err, took = run(exe, [case.rstrip("0"), odd, "30"],
                             {"PROF_SUMMARY_EVERY": "5steps", "PROF_RANKS_TIMEOUT": "5s"},
                             limit=60)
        loops = [float(t) for t in re.findall(r"trained 30 iterations in ([\d.]+) s", out)]
        check(len(loops) == 4, "every rank finishes", out + err)
        # One timeout (5 s), the namer's second of listening, and slack for
        # four busy ranks on two shared cores; two timeouts would be 10 s.
        check(max(loops) < 8.0, "one timeout in all: the loop took %.1f s" % max(loops),
              out + err)
        failed = re.findall(r"^prof: cross-rank summary failed \((.*)\)", err, re.M)
        check(len(failed) == (3 if case == "never0" else 4), "each stepping rank says so once",
              err)
        if case == "never0":
            check(all(re.search(r"\brank 0 did not reach", f) for f in failed),
                  "every stepping rank names rank 0", err)
        else:
            check(all(re.search(r"\brank 2\b", f) for f in failed),
                  "every rank names rank 2", err)
        check("prof ranks:" not in err, "no table", err)
        print("loop %.1f s, mpirun %.1f s" % (max(loops), took))
    else:
        fail("unknown case " + case)
    print("ok")


if __name__ == "__main__":
    main()
