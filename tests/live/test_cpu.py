"""The on-CPU figure in the live outputs (issue 39): cpu_prog's "spin"
stage busy-loops, its "sleep" stage sleeps. prof-top's CPU% column, the
live file's per-row figure (prof.live's "cpu_ns") and the metrics'
prof_stage_cpu_seconds_total say so. Only relations scheduling cannot
break are asserted: a sleeping thread is sampled on a CPU at most a few
percent of its sleep (10 at most), and spinning beats sleeping."""
import json
import os
import re
import struct
import sys

from conftest import prof_top, survives_mutations, wait_for
from test_gpu import MINOR_AT, replace_file

CPU_PROG = os.environ.get("CPU_PROG", "")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
import labels  # noqa: E402 - the strict exposition parser of tests/cuda


def rows_by_path(snap):
    return {r["path"]: r for r in snap["rows"]}


def measured(live, pid):
    """A snapshot where both stages have 50 ms of self time and a figure
    (prof-top shows a share from 40 ms on)."""
    def ok():
        r = rows_by_path(live.snapshot(pid))
        if all(k in r and r[k]["self_ns"] >= 50e6 and r[k]["cpu_ns"] is not None
               for k in ("spin", "sleep")):
            return r
        return None
    return wait_for(ok, 30, "both stages measured")


def test_top_cpu_column(env, start, live):
    p = start(prog=CPU_PROG)
    r = measured(live, p.pid)
    spin, sleep = r["spin"], r["sleep"]
    assert 0 <= sleep["cpu_ns"] <= 0.10 * sleep["self_ns"], sleep
    assert spin["cpu_ns"] / spin["self_ns"] > sleep["cpu_ns"] / sleep["self_ns"], (spin, sleep)

    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    head = [x for x in lines if x.startswith("STAGE")][0]
    assert head.split()[-3:] == ["WALL%", "CPU%", "PEAK+"], head
    cells = {}
    for line in lines:
        m = re.match(r"^(spin|sleep) +\d+ .* (\S+) +(?:\S+ (?:[KMGT]iB|B)|0|-)$", line)
        if m:
            cells[m.group(1)] = m.group(2)
    assert set(cells) == {"spin", "sleep"}, out.stdout
    assert 0 <= int(cells["sleep"]) <= 10, out.stdout
    assert int(cells["spin"]) > int(cells["sleep"]), out.stdout

    js = prof_top(env, str(p.pid), "--json")
    assert js.returncode == 0, js.stderr
    jr = rows_by_path(json.loads(js.stdout))
    assert jr["sleep"]["cpu_ns"] <= 0.10 * jr["sleep"]["self_ns"], jr["sleep"]
    assert jr["spin"]["cpu_ns"] / jr["spin"]["self_ns"] > \
        jr["sleep"]["cpu_ns"] / jr["sleep"]["self_ns"], jr

    # PROF_CPU=0: no figure in the file, no CPU% column.
    p = start({"PROF_CPU": "0"}, prog=CPU_PROG)
    wait_for(lambda: all(k in rows_by_path(live.snapshot(p.pid)) for k in ("spin", "sleep")),
             20, "both stages")
    assert all(x["cpu_ns"] is None for x in live.snapshot(p.pid)["rows"])
    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 0, out.stderr
    assert "CPU%" not in out.stdout and "WALL%" in out.stdout, out.stdout


CPU_AT = MINOR_AT + 28    # live.h: cpu_off (minor 5)


def test_versions(env, start, live, runtime_dir):
    """A minor-4 writer's file (cpu_off zero) reads as before, without the
    figure; a cpu_off that does not fit is that file's one error; any byte
    of the figures changed gives a table or one error."""
    p = start(prog=CPU_PROG)
    measured(live, p.pid)
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    data = bytearray(live._read(path))
    minor, = struct.unpack_from("=I", data, MINOR_AT)
    cpu_off, = struct.unpack_from("=I", data, CPU_AT)
    nrows, = struct.unpack_from("=I", data, 20)
    assert minor >= 5 and cpu_off % 8 == 0 and cpu_off > 0, (minor, cpu_off)
    assert [r["cpu_ns"] is not None for r in live._parse(bytes(data))["rows"]] == [True] * nrows

    old = bytearray(data)
    struct.pack_into("=I", old, MINOR_AT, 4)
    struct.pack_into("=I", old, CPU_AT, 0)
    replace_file(runtime_dir, p.pid, old)
    assert all(r["cpu_ns"] is None for r in live.snapshot(p.pid)["rows"])
    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 0 and "CPU%" not in out.stdout and "spin" in out.stdout, out

    bad = bytearray(data)
    struct.pack_into("=I", bad, CPU_AT, len(data) - 8)
    replace_file(runtime_dir, p.pid, bad)
    out = prof_top(env, str(p.pid), "--once")
    assert out.returncode == 1 and "malformed" in out.stderr and "on-CPU" in out.stderr, out
    assert "Traceback" not in out.stderr

    places = list(range(CPU_AT, CPU_AT + 4)) + list(range(cpu_off, cpu_off + 8 * nrows))
    survives_mutations(live, bytes(data), places, 39, bursts=500)


def test_metrics_cpu_seconds(start, tmp_path):
    prom = str(tmp_path / "m.prom")
    start({"PROF_METRICS": prom}, prog=CPU_PROG)

    def text():
        try:
            with open(prom, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        vals = {}
        for line in raw.decode().splitlines():
            m = re.match(r'^prof_stage_(cpu|self)_seconds_total\{stage="(spin|sleep)",'
                         r'rank="0"\} (\S+)$', line)
            if m:
                vals[(m.group(1), m.group(2))] = float(m.group(3))
        return (raw, vals) if len(vals) == 4 and vals[("self", "sleep")] >= 0.05 else None
    raw, vals = wait_for(text, 30, "the on-CPU counters in the metrics")
    samples = labels.check_exposition(raw)
    assert {x["stage"] for x in samples["prof_stage_cpu_seconds_total"]} >= \
        {'"spin"', '"sleep"'}, samples
    assert vals[("cpu", "sleep")] <= 0.10 * vals[("self", "sleep")], vals
    assert vals[("cpu", "spin")] / vals[("self", "spin")] > \
        vals[("cpu", "sleep")] / vals[("self", "sleep")], vals

    # PROF_CPU=0: no figure, so no such family.
    prom = str(tmp_path / "off.prom")
    start({"PROF_METRICS": prom, "PROF_CPU": "0"}, prog=CPU_PROG)

    def off_text():
        try:
            with open(prom, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        return raw if b'prof_stage_self_seconds_total{stage="sleep"' in raw else None
    raw = wait_for(off_text, 30, "the metrics")
    labels.check_exposition(raw)
    assert b"prof_stage_cpu_seconds_total" not in raw
