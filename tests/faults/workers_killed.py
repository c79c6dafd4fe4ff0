"""A forked worker that ends before it finishes is said by its parent
(issue 20): a log line per worker naming its pid, how it ended and its cut
trace; the final summary's footer lists the pids, and the JSON summary
carries them in workers_unfinished. A worker that finishes is not named.

    workers_killed.py <workers_killed binary> <tests/trace_check.py>

Workers (workers_killed.c): SIGKILLed and reaped, SIGKILLed and left a
zombie, _exit()ed and left a zombie, and exit()ed normally (the one not
to name).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ACTIONS = ["kill", "exit", "zombie", "_exit"]
LINE = re.compile(r"^prof: worker (\d+) ended before writing its summary \(([^)]*)\)(.*)$", re.M)


def run(exe, d, extra):
    env = dict(os.environ, PROF="1", PROF_TRACE=os.path.join(d, "w-%p.json"), **extra)
    p = subprocess.run([exe, *ACTIONS], env=env, capture_output=True, text=True, timeout=60)
    if p.returncode == 77:
        print(p.stdout, p.stderr)
        sys.exit(77)
    if p.returncode != 0:
        sys.exit(f"FAIL: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    pids = {}
    for line in p.stdout.splitlines():
        pid, action = line.split()
        pids[action] = int(pid)
    if sorted(pids) != sorted(ACTIONS):
        sys.exit(f"FAIL: workers {pids}\n{p.stderr}")
    return p, pids


def main():
    exe = sys.argv[1]
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[2])))
    import trace_check as tc

    with tempfile.TemporaryDirectory(prefix="prof-killed-") as d:
        out = os.path.join(d, "summary.txt")
        p, pids = run(exe, d, {"PROF_SUMMARY": out})
        said = {int(m.group(1)): (m.group(2), m.group(3)) for m in LINE.finditer(p.stderr)}
        print("said:", *(f"{k}: {v}" for k, v in said.items()), sep="\n  ")
        expect = {pids[a] for a in ("kill", "zombie", "_exit")}
        if set(said) != expect:
            sys.exit(f"FAIL: named {sorted(said)}, expected {sorted(expect)} "
                     f"(workers {pids}):\n{p.stderr}")
        if len(LINE.findall(p.stderr)) != len(expect):
            sys.exit("FAIL: a worker was named more than once:\n" + p.stderr)
        if said[pids["kill"]][0] != "killed?":      # reaped: how is unknown
            sys.exit(f"FAIL: the reaped worker's end: {said[pids['kill']]}")
        if said[pids["zombie"]][0] != "killed by SIGKILL":
            sys.exit(f"FAIL: the zombie's end: {said[pids['zombie']]}")
        if "status 3" not in said[pids["_exit"]][0]:
            sys.exit(f"FAIL: the _exit worker's end: {said[pids['_exit']]}")
        for pid in expect:
            trace = os.path.join(d, f"w-{pid}.json")
            if f"its trace {trace} is cut" not in said[pid][1]:
                sys.exit(f"FAIL: the line for {pid} does not name its cut trace: {said[pid]}")
            # Repairable, as a killed process's trace always was.
            tc.check_trace(trace, allow_unterminated=True)
        # The one that finished has its summary (on stderr: no %p in
        # PROF_SUMMARY) and a closed trace.
        tc.check_trace(os.path.join(d, f"w-{pids['exit']}.json"))
        text = open(out).read()
        print(text)
        footer = [l for l in text.splitlines() if "ended before finishing" in l]
        if len(footer) != 1 or not footer[0].startswith("3 workers ended before finishing"):
            sys.exit(f"FAIL: footer {footer}")
        listed = {int(x) for x in re.findall(r"\d+", footer[0].split("pids", 1)[1])}
        if listed != expect:
            sys.exit(f"FAIL: footer lists {sorted(listed)}, expected {sorted(expect)}")

    with tempfile.TemporaryDirectory(prefix="prof-killed-") as d:
        out = os.path.join(d, "summary.json")
        p, pids = run(exe, d, {"PROF_SUMMARY": out, "PROF_SUMMARY_FORMAT": "json"})
        doc = json.loads(open(out).read())      # strict: one JSON document
        expect = sorted(pids[a] for a in ("kill", "zombie", "_exit"))
        if sorted(doc.get("workers_unfinished", [])) != expect:
            sys.exit(f"FAIL: JSON workers_unfinished {doc.get('workers_unfinished')}, "
                     f"expected {expect}")
        if doc.get("workers_unfinished_count") != 3 or doc.get("workers_unwatched") != 0:
            sys.exit(f"FAIL: JSON counts {doc.get('workers_unfinished_count')} "
                     f"{doc.get('workers_unwatched')}")
    print("ok")


main()
