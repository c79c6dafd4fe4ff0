#!/usr/bin/env python3
"""Workers under a PROF_TRACE without %p (fork_fixed.c): the parent's trace
is the parent's alone, plain and gzip, however the workers end.

    fork_fixed.py <fork_fixed binary>

For t.json and t.json.gz, PROF_SUMMARY unset (the default):
  - the file parses as strict JSON (json.load; gzip.open for .gz), holds
    the parent's zones and no event of any other pid;
  - no other file appears beside it (no worker made one of its own);
  - one table on stderr from the run's own processes: the parent's, whose
    footer counts the forked workers that recorded; none from a forked
    worker ("forked from");
  - the process exec'd below the parent (its environment names the same
    file) says once that it writes no trace, and prints its own table (it
    is a program of its own, not a worker).
"""
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

HEADER = re.compile(r"^prof summary: \S+ \(pid (\d+)([^)]*)\)", re.M)


def fail(msg, p=None):
    if p is not None:
        msg += f"\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
    sys.exit("FAIL: " + msg)


def check(exe, d, name):
    path = os.path.join(d, name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROF")}
    env.update(PROF="1", PROF_TRACE=path)
    p = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60)
    if p.returncode == 77:
        print(p.stdout, p.stderr)
        sys.exit(77)
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode}", p)
    parent = int(re.search(r"^parent (\d+)$", p.stdout, re.M).group(1))
    workers = [int(x) for x in re.findall(r"^worker (\d+)$", p.stdout, re.M)]
    if len(workers) != 9:
        fail(f"{name}: {len(workers)} workers", p)
    try:
        with (gzip.open(path, "rt") if name.endswith(".gz") else open(path)) as f:
            events = json.load(f)
    except (ValueError, OSError, EOFError) as e:
        fail(f"{name}: not a readable trace: {e}", p)
    pids = {e.get("pid") for e in events}
    if pids != {parent}:
        fail(f"{name}: pids {sorted(pids)} in the parent's trace (parent {parent})", p)
    zones = {e["name"] for e in events if e.get("ph") == "X"}
    if zones != {"parent_zone"}:
        fail(f"{name}: zones {zones}", p)
    if sum(e["name"] == "parent_zone" for e in events if e.get("ph") == "X") != 300:
        fail(f"{name}: not the parent's 300 zones", p)
    if os.listdir(d) != [name]:
        fail(f"{name}: files beside it: {os.listdir(d)}", p)
    tables = [(int(m.group(1)), m.group(2)) for m in HEADER.finditer(p.stderr)]
    forked = [t for t in tables if "forked from" in t[1]]
    if forked:
        fail(f"{name}: forked workers printed tables: {forked}", p)
    own = [t for t in tables if t[0] == parent]
    if len(own) != 1:
        fail(f"{name}: {len(own)} tables of the parent", p)
    if not re.search(r"^8 forked worker processes recorded zones: no summaries of their own "
                     r".*; no traces \(PROF_TRACE has no %p\)$", p.stderr, re.M):
        fail(f"{name}: the parent's table does not count its 8 workers", p)
    exec_child = workers[-1]
    if [t[0] for t in tables if t[0] != parent] != [exec_child]:
        fail(f"{name}: tables {tables}: the exec'd process's own expected", p)
    said = re.findall(r"^prof: trace .*: this process was started below prof process "
                      rf"{parent}, whose trace it is", p.stderr, re.M)
    if len(said) != 1:
        fail(f"{name}: the exec'd process said {len(said)} times that it writes no trace", p)
    print(f"{name}: {len(events)} events of pid {parent}; {len(tables)} tables")
    os.unlink(path)


def main():
    exe = sys.argv[1]
    if os.environ.get("PROF_TEST_SANITIZER", "none") == "thread":
        print("SKIP: ThreadSanitizer cannot run a forked child that starts a thread (the child's collector)")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="prof-fixed-") as d:
        check(exe, d, "t.json")
        check(exe, d, "t.json.gz")
    print("ok")


if __name__ == "__main__":
    main()
