"""The peak rise in the live outputs (issue 40): peak_prog's "load" stage
touches 64 MiB once, then computes 40 ms, so the sampler sees the risen
peak inside it; its "work" stage allocates nothing. The live file's
per-row figure (prof.live's "peak_rise_bytes"), prof-top's PEAK+ column
and --json, and the metrics' prof_stage_peak_rise_bytes say so."""
import json
import os
import re
import struct
import sys

from conftest import prof_top, survives_mutations, wait_for
from test_gpu import MINOR_AT, replace_file

PEAK_PROG = os.environ.get("PEAK_PROG", "")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
import labels  # noqa: E402 - the strict exposition parser of tests/cuda

MIB = 1 << 20
CPU_AT = MINOR_AT + 28    # live.h: cpu_off (minor 5); the peak rises follow (minor 6)


def rows_by_path(snap):
    return {r["path"]: r for r in snap["rows"]}


# Under ThreadSanitizer the shadow of the memory touched is resident too
# (64 MiB touched read 192 MiB): at least what was touched.
TSAN = os.environ.get("PROF_TEST_SANITIZER", "none") == "thread"


def near_64mib(n):
    if n is not None and TSAN:
        return n >= 0.9 * 64 * MIB
    return n is not None and abs(n - 64 * MIB) <= 0.10 * 64 * MIB


def both_rows(live, pid):
    def ok():
        r = rows_by_path(live.snapshot(pid))
        return r if "load" in r and "work" in r else None
    return wait_for(ok, 30, "both stages")


def test_top_peak_column(env, start, live):
    p = start(prog=PEAK_PROG)
    r = both_rows(live, p.pid)
    assert near_64mib(r["load"]["peak_rise_bytes"]), r["load"]
    assert r["work"]["peak_rise_bytes"] is not None and \
        r["work"]["peak_rise_bytes"] < 8 * MIB, r["work"]

    js = prof_top(env, str(p.pid), "--json")
    assert js.returncode == 0, js.stderr
    jr = rows_by_path(json.loads(js.stdout))
    assert near_64mib(jr["load"]["peak_rise_bytes"]), jr["load"]

    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    head = [x for x in lines if x.startswith("STAGE")][0]
    assert head.split()[-3:] == ["WALL%", "CPU%", "PEAK+"], head
    cells = {}
    for line in lines:
        m = re.match(r"^(load|work) +\d+ .* (\S+ (?:[KMGT]iB|B)|0|-)$", line)
        if m:
            cells[m.group(1)] = m.group(2)
    assert set(cells) == {"load", "work"}, out.stdout
    m = re.match(r"^([\d.]+) MiB$", cells["load"])
    assert m and 57.6 <= float(m.group(1)) <= 70.4, out.stdout

    # PROF_CPU=0: nothing sampled, so no figure and no PEAK+ column.
    p = start({"PROF_CPU": "0"}, prog=PEAK_PROG)
    both_rows(live, p.pid)
    assert all(x["peak_rise_bytes"] is None for x in live.snapshot(p.pid)["rows"])
    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 0, out.stderr
    assert "PEAK+" not in out.stdout and "WALL%" in out.stdout, out.stdout
    js = prof_top(env, str(p.pid), "--json")
    assert js.returncode == 0, js.stderr
    assert rows_by_path(json.loads(js.stdout))["load"]["peak_rise_bytes"] is None, js.stdout


def test_versions(env, start, live, runtime_dir):
    """A minor-5 writer's file (on-CPU times, no peak rises) reads as
    before, without the figure; peak rises that do not fit are that file's
    one error; any byte of the figures changed gives a table or one error."""
    p = start(prog=PEAK_PROG)
    both_rows(live, p.pid)
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    data = bytearray(live._read(path))
    minor, = struct.unpack_from("=I", data, MINOR_AT)
    cpu_off, = struct.unpack_from("=I", data, CPU_AT)
    nrows, = struct.unpack_from("=I", data, 20)
    assert minor == 6 and cpu_off % 8 == 0 and cpu_off > 0, (minor, cpu_off)
    rows = rows_by_path(live._parse(bytes(data)))
    assert near_64mib(rows["load"]["peak_rise_bytes"]), rows["load"]
    peak_off = cpu_off + 8 * nrows

    old = bytearray(data)
    struct.pack_into("=I", old, MINOR_AT, 5)
    replace_file(runtime_dir, p.pid, old)
    snap = live.snapshot(p.pid)
    assert all(r["peak_rise_bytes"] is None and r["cpu_ns"] is not None
               for r in snap["rows"]), snap
    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 0 and "PEAK+" not in out.stdout and "CPU%" in out.stdout, out

    # The on-CPU times moved up to end where the GPU entries start: no room
    # left for the peak rises.
    bad = bytearray(data)
    gpu_off, = struct.unpack_from("=I", data, MINOR_AT + 12)
    struct.pack_into("=I", bad, CPU_AT, gpu_off - 8 * nrows)
    replace_file(runtime_dir, p.pid, bad)
    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 1 and "malformed" in out.stderr and "peak rises" in out.stderr, out
    assert "Traceback" not in out.stderr

    places = list(range(CPU_AT, CPU_AT + 4)) + list(range(peak_off, peak_off + 8 * nrows))
    survives_mutations(live, bytes(data), places, 40, bursts=500)


def test_metrics_peak_rise(start, tmp_path):
    prom = str(tmp_path / "m.prom")
    start({"PROF_METRICS": prom}, prog=PEAK_PROG)

    def text():
        try:
            with open(prom, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        vals = {}
        for line in raw.decode().splitlines():
            m = re.match(r'^prof_stage_peak_rise_bytes\{stage="(load|work)",rank="0"\} (\d+)$',
                         line)
            if m:
                vals[m.group(1)] = int(m.group(2))
        return (raw, vals) if len(vals) == 2 else None
    raw, vals = wait_for(text, 30, "the peak rise gauge in the metrics")
    samples = labels.check_exposition(raw)
    assert {x["stage"] for x in samples["prof_stage_peak_rise_bytes"]} >= \
        {'"load"', '"work"'}, samples
    assert b"# TYPE prof_stage_peak_rise_bytes gauge\n" in raw, raw
    assert near_64mib(vals["load"]), vals
    assert vals["work"] < 8 * MIB, vals

    # PROF_CPU=0: no figure, so no such family.
    prom = str(tmp_path / "off.prom")
    start({"PROF_METRICS": prom, "PROF_CPU": "0"}, prog=PEAK_PROG)

    def off_text():
        try:
            with open(prom, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        return raw if b'prof_stage_self_seconds_total{stage="load"' in raw else None
    raw = wait_for(off_text, 30, "the metrics")
    labels.check_exposition(raw)
    assert b"prof_stage_peak_rise_bytes" not in raw
