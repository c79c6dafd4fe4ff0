"""A multiprocessing worker killed before it finishes is named by its
parent (issue 20).

SIGKILL leaves the worker no chance to write its summary or end its
trace; its parent, which forked it, says so: one log line naming the pid
and the cut trace, and the final summary's footer (text) or
workers_unfinished (JSON). A worker that ends normally is not named.
DataLoader workers that end with their loader: test_workers_end.py.
"""
import json
import os
import re

from conftest import run_py

SCRIPT = """
    import json, multiprocessing as mp, os, sys
    import prof

    def work(ready, forever):
        for i in range(20):
            with prof.zone("worker.step"):
                pass
        prof.flush()
        ready.set()
        while forever:
            with prof.zone("worker.step"):
                sum(range(1000))

    if __name__ == "__main__":
        ctx = mp.get_context("fork")
        with prof.zone("main.before"):
            pass
        pids = {}
        for name, forever in (("killed", True), ("finished", False)):
            ready = ctx.Event()
            p = ctx.Process(target=work, args=(ready, forever))
            p.start()
            assert ready.wait(60)
            if forever:
                p.kill()
            p.join(60)
            pids[name] = p.pid
        with prof.zone("main.after"):
            pass
        print(json.dumps(pids))
"""

LINE = re.compile(r"prof: worker (\d+) ended before writing its summary \(([^)]*)\)(.*)")


def _run(tmp_path, **env):
    proc = run_py(SCRIPT, cwd=str(tmp_path), PROF="1",
                  PROF_TRACE=str(tmp_path / "w-%p.json"), **env)
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


def test_killed_worker_is_named_by_its_parent(tmp_path):
    proc, pids = _run(tmp_path, PROF_SUMMARY="stderr")
    named = {int(m.group(1)): m.group(3) for m in LINE.finditer(proc.stderr)}
    assert set(named) == {pids["killed"]}, proc.stderr
    assert f"w-{pids['killed']}.json is cut" in named[pids["killed"]], proc.stderr
    footer = [l for l in proc.stderr.splitlines() if "ended before finishing" in l]
    assert len(footer) == 1 and footer[0].startswith("1 worker ended before finishing"), \
        proc.stderr
    assert footer[0].endswith(f"pid {pids['killed']}"), footer
    # The worker that finished wrote its own final summary.
    assert f"(pid {pids['finished']}, forked from" in proc.stderr, proc.stderr


def test_killed_worker_in_json_summary(tmp_path):
    out = tmp_path / "summary.json"
    proc, pids = _run(tmp_path, PROF_SUMMARY=str(out), PROF_SUMMARY_FORMAT="json")
    doc = json.loads(out.read_text())
    assert doc["pid"] != pids["killed"]
    assert doc["workers_unfinished"] == [pids["killed"]], (doc, proc.stderr)
    assert doc["workers_unfinished_count"] == 1
