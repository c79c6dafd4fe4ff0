"""Summaries never outrun the run (issue 20).

    steps_json.py <steps_json binary>

1. PROF_SUMMARY_EVERY=1steps, JSON, 100,000 short steps: the periodic
   summaries are labelled with due steps, in order, and their
   merged_windows add up to 100,000 exactly (one per step, or merged ones
   that say how many windows they hold; the last due steps' windows
   too, when they came while the summaries' writer was behind); nothing
   is dropped. Records dropped while the loop itself had less than half
   of its wall time on a CPU are the machine's, not the summaries' (the
   collector beside it was kept off the CPU as long as the ring holds):
   the rest is still judged, and the test skips (77).
2. PROF_BUFFER=16, 7steps: most step records are dropped; the summaries are
   still labelled only with due steps (multiples of 7) and their
   merged_windows add up to the due steps exactly.
"""
import json
import os
import subprocess
import sys
import tempfile


def run(exe, steps, work, env_extra, path):
    env = dict(os.environ, PROF="1", PROF_SUMMARY=path, PROF_SUMMARY_FORMAT="json",
               **env_extra)
    p = subprocess.run([exe, str(steps), str(work)], env=env, capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAIL: exit {p.returncode}\n{p.stdout}\n{p.stderr[-2000:]}")
    docs = [json.loads(l) for l in open(path) if l.strip()]
    return p, [d for d in docs if d["kind"] == "periodic"], [d for d in docs if d["kind"] == "final"]


def cpu_share(stdout):
    for word in stdout.split():
        if word.startswith("cpu_share="):
            return float(word.split("=", 1)[1])
    sys.exit(f"FAIL: no cpu_share figure in: {stdout!r}")


def judge(name, periodic, final, steps, every, want_no_drop, share=1.0):
    """Returns why the drop check could not judge, or None."""
    due = steps // every
    labels = [d["step"] for d in periodic]
    merged = sum(d["merged_windows"] for d in periodic)
    print(f"{name}: {len(periodic)} periodic summaries, merged_windows sum {merged} "
          f"for {due} due steps; dropped {final[0]['dropped'] if final else '?'}")
    if len(final) != 1:
        sys.exit(f"FAIL {name}: {len(final)} final summaries")
    bad = [s for s in labels if s % every]
    if bad:
        sys.exit(f"FAIL {name}: summaries labelled with steps that were not due: {bad[:10]}")
    if labels != sorted(set(labels)):
        sys.exit(f"FAIL {name}: labels out of order or repeated")
    prev = 0
    for d in periodic:
        if d["merged_windows"] * every != d["step"] - prev:
            sys.exit(f"FAIL {name}: step {d['step']} says {d['merged_windows']} windows, "
                     f"but the last summary was at step {prev}")
        if d["window"]["steps"] != d["step"] - prev:
            sys.exit(f"FAIL {name}: step {d['step']}: window of {d['window']['steps']} steps")
        prev = d["step"]
    if merged != due or (labels and labels[-1] != due * every):
        sys.exit(f"FAIL {name}: merged_windows add up to {merged}, not {due}")
    if want_no_drop and final[0]["dropped"] != 0:
        if share < 0.5:
            return (f"{name}: {final[0]['dropped']} records dropped while the loop had "
                    f"{share:.0%} of its wall time on a CPU: the machine is busier than this "
                    f"test can judge")
        sys.exit(f"FAIL {name}: {final[0]['dropped']} records dropped")
    return None


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.json")
        p, periodic, final = run(exe, 100000, 2000, {"PROF_SUMMARY_EVERY": "1steps"}, path)
        print(p.stdout.strip())
        busy = judge("1steps", periodic, final, 100000, 1, True, cpu_share(p.stdout))
        p, periodic, final = run(exe, 3000, 0, {"PROF_SUMMARY_EVERY": "7steps",
                                               "PROF_BUFFER": "16"}, path)
        judge("7steps ring 16", periodic, final, 3000, 7, False)
    if busy:
        print(f"SKIP: {busy}")
        sys.exit(77)
    print("ok")


main()
