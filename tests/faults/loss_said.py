"""A loss is said where the user looks (issue 20): a burst into
PROF_BUFFER=16 prints one log line naming PROF_BUFFER (not one per drain),
marks the short stages with * in the table and "lossy" in the JSON, and
prof_stats() callers see PROF_STAGE_LOSSY.

    loss_said.py <loss_said binary> <tests/trace_check.py>
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def run(exe, extra):
    env = dict(os.environ, PROF="1", PROF_BUFFER="16", **extra)
    p = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"FAIL: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "summary.txt")
        p = run(exe, {"PROF_SUMMARY": out})
        lines = [l for l in p.stderr.splitlines() if "PROF_BUFFER" in l]
        print("stderr:", *lines, sep="\n  ")
        if len(lines) != 1:
            sys.exit(f"FAIL: {len(lines)} lines name PROF_BUFFER on stderr, expected 1:\n"
                     + p.stderr)
        if "lost" not in lines[0] or "behind" not in lines[0]:
            sys.exit("FAIL: the line does not say what was lost and how far behind")
        if "lossy=1" not in p.stdout:
            sys.exit("FAIL: prof_stats does not flag outer PROF_STAGE_LOSSY: " + p.stdout)
        text = open(out).read()
        print(text)
        # Rows only: a name, then a count (the lines under the table
        # start with a stage's name too).
        rows = {l.split()[0]: l.split()[1] for l in text.splitlines()
                if l.startswith(("outer", "inner", "  inner"))
                and re.fullmatch(r"[0-9]+\*?", l.split()[1])}
        if not rows.get("outer", "").endswith("*"):
            sys.exit("FAIL: outer's count is not marked *")
        if "* short:" not in text or "PROF_BUFFER=" not in text:
            sys.exit("FAIL: no loss footer in the summary")

        out = os.path.join(d, "summary.json")
        run(exe, {"PROF_SUMMARY": out, "PROF_SUMMARY_FORMAT": "json"})
        doc = json.loads(open(out).read())
        stages = {s["name"]: s for s in doc["total"]["stages"]}
        if not stages["outer"]["lossy"]:
            sys.exit("FAIL: JSON outer not lossy")
        if doc["total"]["loss"]["records"] != doc["dropped"] or doc["dropped"] == 0:
            sys.exit(f"FAIL: JSON loss {doc['total']['loss']} vs dropped {doc['dropped']}")

        # The trace says it too: an instant event at the first loss.
        trace = os.path.join(d, "t.json")
        run(exe, {"PROF_SUMMARY": "off", "PROF_TRACE": trace})
        sys.path.insert(0, os.path.dirname(sys.argv[2]))
        from trace_check import check_trace
        names = [e.get("name", "") for e in check_trace(trace) if e.get("ph") == "i"]
        if not any(n.startswith("prof.loss:") and "PROF_BUFFER=" in n for n in names):
            sys.exit(f"FAIL: no prof.loss instant in the trace: {names[:5]}")
    print("ok")


main()
