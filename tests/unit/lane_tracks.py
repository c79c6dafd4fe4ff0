#!/usr/bin/env python3
"""lane_tracks.py EXE TRACE_CHECK [N]: run lane_tracks.c with a trace and
check, reading the trace as strict JSON, that each of its N threads drew
its lane's zone on a track (tid) of its own, and its own zone on another.

Fails on 1d361fc past 16,384 threads: a lane's tid was the thread's index
masked to 14 bits, so the lanes of threads 16,384 apart shared a track."""
import os
import subprocess
import sys
import tempfile


def main():
    exe, tc_path = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 16500
    sys.path.insert(0, os.path.dirname(os.path.abspath(tc_path)))
    import trace_check as tc

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        env = dict(os.environ, PROF_TRACE=path, PROF_SUMMARY="off")
        subprocess.run([exe, str(n)], env=env, check=True, timeout=600)
        tasks, own = [], set()
        for e in tc.check_trace(path, expect_stages=("task", "own")):
            if e.get("ph") != "X":
                continue
            if e["name"] == "task":
                tasks.append(e["tid"])
            elif e["name"] == "own":
                own.add(e["tid"])
    if len(tasks) != n:
        sys.exit(f"{len(tasks)} task zones in the trace, not {n}")
    shared = len(tasks) - len(set(tasks))
    if shared:
        sys.exit(f"{shared} of {n} threads' lanes drew on a track another thread's lane had")
    if own & set(tasks):
        sys.exit("a lane's track is also a thread's")
    print(f"ok: {n} lanes on {len(set(tasks))} tracks")


if __name__ == "__main__":
    main()
