#!/usr/bin/env python3
"""outputs_golden.py - every output of one fixed run, byte for byte.

Runs outputs_golden (a program whose clock stands still until it moves it:
see outputs_golden.c) twice, once with text summaries and once with JSON,
each writing a trace and a Prometheus file, and compares what it wrote with
tests/unit/golden/: the summaries (two periodic, the demand one in each
format, the final), the by-name statistics, the trace, the metrics text.
What the run cannot fix is masked first, and only that (MASKS below): the
pid, thread ids, the host, the realtime clock, the process's memory and the
time the ring memory took to fault in. A failure prints the diff.

With --gpu the program is outputs_golden_gpu (the GPU paths on the fake
driver, NVML and CUPTI built for it: outputs_golden_gpu.c), run four times:
PROF_CUDA=1 and PROF_CUDA=kernels, each with text and JSON summaries (and
prof-top in the text runs: the live file is the same in both); its files
are gpu.* and kernels.*, the CPU run's text.* and json.*. It adds no mask:
what the collector's timing would decide there (when NVML is sampled, in
which pass a GPU zone arrives, the float milliseconds of the events) the
program fixes itself (outputs_golden_gpu.c says how); the GPU's memory,
power and clocks are the fake NVML's, compared as written.

    outputs_golden.py PROGRAM [--gpu CUDA_LIB NVML_LIB CUPTI_LIB]
                              compare
    ... --update              rewrite this program's files in
                              tests/unit/golden/ (then read the diff in git
                              before committing)
"""
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
TOP = os.path.join(HERE, "..", "..", "tools", "prof-top")

# (pattern, replacement), applied to every output in this order. The GPU
# run's outputs get the same, no more.
MASKS = [
    # JSON keys whose values the run does not fix.
    (re.compile(r'"(pid|tid|ns_pid|id|host|unix_time|time|start_ticks|pid_namespace|'
                r'realtime_minus_monotonic_ns|[a-z_]*rss[a-z_]*)":( ?)'
                r'("[^"]*"|-?[0-9.e+-]+)'), r'"\1":\2@'),
    # What publishing the live file cost: measured on the clock the test
    # moves, so it holds a move made meanwhile.
    (re.compile(r'"(snapshot|publish|metrics)": [0-9.e+-]+'), r'"\1": @'),
    # How often the live file was published: once more when the collector
    # saw the clock at the start.
    (re.compile(r'"(publishes|seq)": \d+'), r'"\1": @'),
    # The trace's memory counter: its value is the process's (a GPU's,
    # the fake NVML's, is the run's).
    (re.compile(r'("name":"(?!GPU )[^"]*(?:RSS|rss|memory)[^"]*"[^\n]*"args":\{"[^"]*":)'
                r'[0-9.e+-]+'), r'\1@'),
    # The text header: pid, host, resident memory.
    (re.compile(r'\bpid \d+'), 'pid @'),
    (re.compile(r'(\bpid=)\d+'), r'\1@'),
    # (A GPU's "memory 1024 MiB (peak 3072 MiB)" is the fake NVML's.)
    (re.compile(r'(?<!\()\b(rss|peak) [0-9.]+ [KMGT]?i?B( \(run [0-9.]+ [KMGT]?i?B\))?'),
     r'\1 @B'),
    (re.compile(r'\(to [0-9.]+ [KMGT]?i?B\)'), '(to @B)'),
    (re.compile(r', [0-9.]+ [KMGT]?i?B \(run\)'), ', @B (run)'),
    (re.compile(r'\bhost \S+'), 'host @'),
    # The trace's on-CPU track is named for its thread.
    (re.compile(r'(prof\.on_cpu )\d+'), r'\1@'),
    # Prometheus: the process's own figures and the host label.
    (re.compile(r'^((?:prof_)?process_[a-z_]*(?:bytes|seconds)[a-z_]*(?:\{[^}]*\})?) .*$',
                re.M), r'\1 @'),
    (re.compile(r'(host=")[^"]*(")'), r'\1@\2'),
    (re.compile(r'(pid=")\d+(")'), r'\1@\2'),
]


def mask(text):
    for pat, rep in MASKS:
        text = pat.sub(rep, text)
    return text


def trace_lines(text):
    """The trace, strict JSON, with the memory sampler's counters taken
    out and said once at its end: they land where the collector was when
    the clock moved (so do their timestamps), and the padding that keeps
    later lines page-aligned moves with them."""
    lines = [l.rstrip(" ") for l in text.split("\n")]
    rss = sorted(set(re.sub(r'"ts":[0-9.]+', '"ts":@', l)
                     for l in lines if '"name":"RSS MiB"' in l))
    rest = [l for l in lines if '"name":"RSS MiB"' not in l]
    return "\n".join(rest + ["(the RSS counters)"] + rss) + "\n"


def run(prog, workdir, name, fmt, extra, live=True):
    """One run of prog; its outputs named name.FILE; with live, prof-top's
    reading of its live file too."""
    out = os.path.join(workdir, name)
    os.mkdir(out)
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PROF"):
            del env[k]
    env.update({
        "PROF": "1",
        "PROF_CPU": "1",
        "PROF_SUMMARY": os.path.join(out, "summary"),
        "PROF_SUMMARY_FORMAT": fmt,
        "PROF_SUMMARY_EVERY": "3steps",
        "PROF_TRACE": os.path.join(out, "trace.json"),
        "PROF_METRICS": os.path.join(out, "metrics.prom"),
    })
    env.update(extra)
    if live:
        env["GOLDEN_LIVE"] = "1"
    p = subprocess.Popen([prog, out], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    live = {}
    ready = os.path.join(out, "ready")
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if os.path.exists(ready):
        for mode in ("--once", "--json"):
            t = subprocess.run([sys.executable, TOP, str(p.pid), mode], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            live["%s.top%s" % (name, mode.replace("--", "."))] = mask(t.stdout.decode("utf-8"))
        open(os.path.join(out, "go"), "w").close()
    try:
        stdout, stderr = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        stdout, stderr = p.communicate()
    if p.returncode != 0:
        sys.exit("%s (%s) exited %d\nstdout:\n%s\nstderr:\n%s"
                 % (os.path.basename(prog), name, p.returncode, stdout.decode(errors="replace"),
                    stderr.decode(errors="replace")))
    files = {}
    for fname in sorted(os.listdir(out)):
        with open(os.path.join(out, fname), "rb") as f:
            raw = f.read()
        # prof's outputs are UTF-8, or this fails; stats.txt holds the API's
        # names as the program gave them.
        text = raw.decode("utf-8", "backslashreplace" if fname == "stats.txt" else "strict")
        if fname == "trace.json":
            json.loads(text)    # strict JSON, or the test fails here
            text = trace_lines(mask(text))
        files["%s.%s" % (name, fname)] = mask(text)
    files["%s.stderr" % name] = mask(stderr.decode("utf-8"))
    files.update(live)
    return files


def main():
    args = sys.argv[1:]
    prog = args.pop(0)
    update = "--update" in args
    if "--gpu" in args:
        i = args.index("--gpu")
        cuda, nvml, cupti = args[i + 1:i + 4]
        libs = {"PROF_CPU": "0", "PROF_CUDA_LIB": cuda, "PROF_NVML_LIB": nvml,
                "PROF_CUPTI_LIB": cupti}
        # The live file does not depend on the summaries' format: prof-top
        # (seconds a reading) reads it in the text runs only.
        runs = [("gpu.text", "text", dict(libs, PROF_CUDA="1"), True),
                ("gpu.json", "json", dict(libs, PROF_CUDA="1"), False),
                ("kernels.text", "text", dict(libs, PROF_CUDA="kernels"), True),
                ("kernels.json", "json", dict(libs, PROF_CUDA="kernels"), False)]
    else:
        runs = [("text", "text", {}, True), ("json", "json", {}, True)]
    # This program's files in GOLDEN: the other program's are not its.
    prefixes = tuple(r[0] + "." for r in runs)
    with tempfile.TemporaryDirectory() as d:
        got = {}
        for name, fmt, extra, live in runs:
            got.update(run(prog, d, name, fmt, extra, live))
    if update:
        os.makedirs(GOLDEN, exist_ok=True)
        for old in os.listdir(GOLDEN):
            if old.startswith(prefixes):
                os.unlink(os.path.join(GOLDEN, old))
        for name, text in got.items():
            with open(os.path.join(GOLDEN, name), "w", encoding="utf-8") as f:
                f.write(text)
        print("wrote %d files to %s" % (len(got), GOLDEN))
        return
    want = {n: open(os.path.join(GOLDEN, n), encoding="utf-8").read()
            for n in sorted(os.listdir(GOLDEN)) if n.startswith(prefixes)}
    bad = 0
    for name in sorted(set(want) | set(got)):
        if name not in got:
            print("%s: not written by this run" % name)
            bad += 1
        elif name not in want:
            print("%s: written by this run, not in %s" % (name, GOLDEN))
            bad += 1
        elif got[name] != want[name]:
            print("%s differs:" % name)
            sys.stdout.writelines(difflib.unified_diff(
                want[name].splitlines(True), got[name].splitlines(True),
                "golden/" + name, "this run"))
            bad += 1
    if bad:
        sys.exit("%d of %d outputs differ from tests/unit/golden/ (if the change is meant, "
                 "rerun with --update and say which bytes changed and why)" % (bad, len(want)))
    print("%d outputs identical to tests/unit/golden/" % len(want))


if __name__ == "__main__":
    main()
