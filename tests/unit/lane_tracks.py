#!/usr/bin/env python3
"""lane_tracks.py EXE TRACE_CHECK N|pid_max: run lane_tracks.c with a
trace and check, reading the trace as strict JSON, that each of its N
threads drew its lane's zone on a track (tid) of its own, and its own zone
on another track of its own.

Fails on 1d361fc past 16,384 threads: a lane's tid was the thread's index
masked to 14 bits, so the lanes of threads 16,384 apart shared a track.
With `pid_max`, N is 1,000 more than the kernel's pid_max (skipped where
that is over 65,536): the kernel then gives some thread a tid an earlier
one had, and on 1d361fc both drew on that tid's track."""
import os
import subprocess
import sys
import tempfile


def main():
    exe, tc_path = sys.argv[1], sys.argv[2]
    n = sys.argv[3] if len(sys.argv) > 3 else "16500"
    if n == "pid_max":
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        if pid_max > 65536:
            print(f"pid_max is {pid_max}: too many threads to wrap it here; skipped")
            sys.exit(77)
        n = pid_max + 1000
    n = int(n)
    sys.path.insert(0, os.path.dirname(os.path.abspath(tc_path)))
    import trace_check as tc

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        env = dict(os.environ, PROF_TRACE=path, PROF_SUMMARY="off")
        subprocess.run([exe, str(n)], env=env, check=True, timeout=600)
        tasks, own, names = [], [], set()
        for e in tc.check_trace(path, expect_stages=("task", "own")):
            if e.get("ph") == "M" and e.get("name") == "thread_name":
                names.add(e["args"]["name"])
            if e.get("ph") != "X":
                continue
            if e["name"] == "task":
                tasks.append(e["tid"])
            elif e["name"] == "own":
                own.append(e["tid"])
    if len(tasks) != n:
        sys.exit(f"{len(tasks)} task zones in the trace, not {n}")
    shared = len(tasks) - len(set(tasks))
    if shared:
        sys.exit(f"{shared} of {n} threads' lanes drew on a track another thread's lane had")
    shared = len(own) - len(set(own))
    if len(own) != n or shared:
        sys.exit(f"{len(own)} threads' own zones, {shared} on a track another thread had")
    if set(own) & set(tasks):
        sys.exit("a lane's track is also a thread's")
    # The lane tracks' names: the thread's name cut at 60 bytes, at the end
    # of a character (a split one reads as U+FFFD), then " task 1".
    lanes = {x for x in names if x.endswith(" task 1")}
    if lanes != {"w" * 59 + " task 1"}:
        sys.exit(f"lane track names: {sorted(lanes)[:3]}")
    print(f"ok: {n} lanes on {len(set(tasks))} tracks")


if __name__ == "__main__":
    main()
