"""Processes a PROF=1 program starts by exec (multiprocessing's spawn, a
subprocess) under a PROF_TRACE without %p (issue 37, docs/TRACE.md
"Workers"): none writes into the parent's file; spawned workers of the
parent's rank print no table of their own, spawned ranks (another rank)
and a subprocess do.
"""
import json
import re
import textwrap

from conftest import run_script

SCRIPT = """
    import multiprocessing as mp, os, subprocess, sys
    import prof

    def work(rank):
        if rank is not None:
            os.environ["RANK"] = str(rank)
        for _ in range(20):
            with prof.zone("child_zone"):
                pass
        return os.getpid()

    if __name__ == "__main__":
        with prof.zone("parent_zone"):
            pass
        prof.flush()
        ctx = mp.get_context("spawn")
        with ctx.Pool(2) as pool:
            workers = pool.map(work, [None, None])
        ranks = []
        for r in (1, 2):
            p = ctx.Process(target=work, args=(r,))
            p.start()
            p.join()
            ranks.append(p.pid)
        # A copy of os.environ, as scripts often pass: it still says whose
        # the trace is.
        sub = subprocess.run([sys.executable, "-c", "import prof\\nwith prof.zone('sub_zone'): pass"],
                             env=dict(os.environ))
        with prof.zone("parent_zone"):
            pass
        print("parent", os.getpid(), "workers", *workers, "ranks", *ranks)
"""


def test_spawned_processes_keep_out_of_the_parents_trace(tmp_path):
    trace = tmp_path / "t.json"
    script = tmp_path / "spawned.py"     # spawn imports the main module from its file
    script.write_text(textwrap.dedent(SCRIPT))
    out = run_script(str(script), cwd=str(tmp_path), timeout=120, PROF="1", PROF_SUMMARY=None,
                     PROF_TRACE=str(trace))
    m = re.search(r"^parent (\d+) workers (\d+) (\d+) ranks (\d+) (\d+)$", out.stdout, re.M)
    assert m, out.stdout + out.stderr
    parent, w1, w2, r1, r2 = (int(g) for g in m.groups())
    events = json.loads(trace.read_text())     # strict JSON, closed
    assert {e.get("pid") for e in events} == {parent}, out.stderr
    assert {e["name"] for e in events if e.get("ph") == "X"} == {"parent_zone"}
    tables = [int(p) for p in re.findall(r"^prof summary: \S+ \(pid (\d+)", out.stderr, re.M)]
    # The parent's, the two spawned ranks', the subprocess's: not the
    # pool's workers (the parent's rank, none).
    assert parent in tables and r1 in tables and r2 in tables, out.stderr
    assert w1 not in tables and w2 not in tables, out.stderr
    assert len(tables) == 4, out.stderr
    # The ranks and the subprocess (not workers) say once each that they
    # write no trace; the workers say nothing (the docs say where it goes).
    said = re.findall(rf"^prof: trace .*started below prof process {parent}, whose trace it is",
                      out.stderr, re.M)
    assert len(said) == 3, out.stderr
