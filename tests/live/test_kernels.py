"""prof-top's kernel figures (issue 31): a process with CUDA zones on the
fake driver and PROF_CUDA=kernels on the fake CUPTI (GPU_PROG: a zone
"step" around one 3 ms kernel, _Z11fake_kernelv, every 10 ms) shows, on a
line under its `step [gpu]` row, the kernels' busy time and count over
the window and the run and the top kernel, `busy 1.22 s, 405 kernels
(window); 1.22 s, 405 (run); top: fake_kernel 100%`, and --json carries
them as the row's "kernels". The fake's kernels last exactly 3 ms and never
overlap (one stream), so busy is the count times 3 ms whatever the load
does to the launches. An events-mode process shows none; kernel entries
that do not fit or lie are that file's error, the other processes read."""

import json
import os
import re
import struct
import time

import pytest

from conftest import prof_top, survives_mutations, wait_for
from test_gpu import FAKECUDA, FAKENVML, GPU_PROG, MINOR_AT, replace_file

FAKECUPTI = os.environ.get("FAKECUPTI_LIB")
KERNEL_NS = 3000000
KERN_AT = MINOR_AT + 16     # live.h: kern_size, nkern, kern_off, pad
LINE = re.compile(r"^(\s+)busy ([\d.]+ \w+), (\d+) kernels? \(window\); ([\d.]+ \w+), (\d+) "
                  r"\(run\); top: (\S+) (\d+)%$")
UNIT = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


@pytest.fixture
def kernels_start(start):
    if not GPU_PROG or not FAKECUDA or not FAKENVML or not FAKECUPTI or \
            not os.path.exists(FAKECUPTI):
        pytest.fail("GPU_PROG, FAKECUDA_LIB, FAKENVML_LIB and FAKECUPTI_LIB are not set to "
                    "the built tests/live/gpu_prog and tests/cuda fakes")

    def run(kernels=True):
        extra = {"PROF_CUDA_LIB": FAKECUDA, "PROF_NVML_LIB": FAKENVML}
        if kernels:
            extra.update({"PROF_CUDA": "kernels", "PROF_CUPTI_LIB": FAKECUPTI})
        return start(extra, prog=GPU_PROG)
    return run


def step_gpu(snap):
    rows = [r for r in snap["rows"] if r["path"] == "step/step [gpu]"]
    return rows[0] if rows else None


def settled(live, pid, seconds=2.0):
    """A snapshot once the run is `seconds` long with kernels counted."""
    def ok():
        s = live.snapshot(pid)
        r = step_gpu(s)
        return s if s["run_s"] >= seconds and r and r["kernels"] and \
            r["kernels"]["count_run"] >= 20 else None
    return wait_for(ok, 60, "a publish with kernels after %.0f s" % seconds)


def dur(text):
    v, u = text.split()
    return float(v) * UNIT[u]


def test_kernel_line_once_and_json(env, kernels_start, live):
    t0 = time.monotonic()
    p = kernels_start()
    settled(live, p.pid)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = [i for i, line in enumerate(lines) if line.split()[:2] == ["step", "[gpu]"]]
    assert len(at) == 1, r.stdout
    m = LINE.match(lines[at[0] + 1])
    assert m, r.stdout
    indent, bw, cw, br, cr, top, share = m.groups()
    # Under the row, one level deeper than its name ("  step [gpu]").
    assert len(indent) == 4, r.stdout
    cw, cr = int(cw), int(cr)
    assert 0 < cw <= cr, r.stdout
    # Printed to 3 significant digits: within 1% of count x 3 ms.
    assert abs(dur(bw) - cw * KERNEL_NS) <= 0.01 * cw * KERNEL_NS, r.stdout
    assert abs(dur(br) - cr * KERNEL_NS) <= 0.01 * cr * KERNEL_NS, r.stdout
    assert (top, share) == ("fake_kernel", "100"), r.stdout
    # Only GPU stages have the line.
    assert sum(1 for line in lines if LINE.match(line)) == 1, r.stdout

    r = prof_top(env, str(p.pid), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    row = step_gpu(out)
    k = row["kernels"]
    assert k["top"] == "fake_kernel" and k["top_share"] == 1.0, k
    assert 0 < k["count_window"] <= k["count_run"], k
    assert k["busy_window_ns"] == k["count_window"] * KERNEL_NS, k
    assert k["busy_run_ns"] == k["count_run"] * KERNEL_NS, k
    # The GPU is busy 30% of the run on a quiet machine (the zone line's
    # figure); a loaded one launches less often (a launch follows a 10 ms
    # sleep), so only what load cannot move is asked: the run is no longer
    # than the test has waited, and kernels written at launch run up to one
    # period ahead of the snapshot.
    assert 0 < out["run_s"] <= time.monotonic() - t0, out["run_s"]
    assert 0 < k["busy_run_ns"] / 1e9 / out["run_s"] <= 0.4, (k, out["run_s"])
    assert all(x["kernels"] is None for x in out["rows"] if x is not row), out["rows"]


def test_no_kernel_figures_in_events_mode(env, kernels_start, live, runtime_dir):
    p = kernels_start(kernels=False)
    wait_for(lambda: (lambda s: s if s["gpus"] and step_gpu(s) else None)(
        live.snapshot(p.pid)), 60, "a publish with the GPU stage")
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    assert "step [gpu]" in r.stdout and "kernel" not in r.stdout, r.stdout
    r = prof_top(env, str(p.pid), "--json")
    assert r.returncode == 0, r.stderr
    assert all(x["kernels"] is None for x in json.loads(r.stdout)["rows"]), r.stdout
    data = live._read(os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid))
    assert struct.unpack_from("=I", data, MINOR_AT)[0] == 6
    assert struct.unpack_from("=II", data, KERN_AT)[1] == 0


def kernel_file(live, runtime_dir, pid):
    data = live._read(os.path.join(runtime_dir, "prof", "prof-live-%d" % pid))
    kern_size, nkern, kern_off = struct.unpack_from("=III", data, KERN_AT)
    assert (kern_size, nkern) == (80, 1) and kern_off + 80 == len(data)
    return bytearray(data), kern_off


def test_versions_and_malformed_entries(env, kernels_start, live, runtime_dir):
    p = kernels_start()
    other = kernels_start()
    settled(live, p.pid, 0.5)
    data, kern_off = kernel_file(live, runtime_dir, p.pid)
    snap = live._parse(bytes(data))
    rows = snap["rows"]
    gpu_row = struct.unpack_from("=I", data, kern_off)[0]
    assert rows[gpu_row]["path"] == "step/step [gpu]"
    cpu_row = [i for i, r in enumerate(rows) if not r["gpu"]][0]

    # A writer from before the kernel entries (minor 1): no kernel line.
    old = bytearray(data)
    struct.pack_into("=I", old, MINOR_AT, 1)
    struct.pack_into("=IIII", old, KERN_AT, 0, 0, 0, 0)
    replace_file(runtime_dir, p.pid, old)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0 and "step [gpu]" in r.stdout, r.stderr
    assert not any(LINE.match(line) for line in r.stdout.splitlines()), r.stdout
    assert all(x["kernels"] is None for x in live.snapshot(p.pid)["rows"])

    # A newer writer's longer entries read by their front.
    new = bytearray(data) + b"\xff" * 16
    struct.pack_into("=I", new, KERN_AT, 96)
    struct.pack_into("=Q", new, 32, len(new))
    replace_file(runtime_dir, p.pid, new)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    assert sum(1 for line in r.stdout.splitlines() if LINE.match(line)) == 1, r.stdout

    def header(kern_size=80, nkern=1, off=kern_off):
        def f(b):
            struct.pack_into("=III", b, KERN_AT, kern_size, nkern, off)
        return f

    def entry(fmt, at, v):
        def f(b):
            struct.pack_into(fmt, b, kern_off + at, v)
        return f

    cases = (("past the end", header(off=len(data)), "do not fit"),
             ("too many", header(nkern=1 << 30), "do not fit"),
             ("too short", header(kern_size=8), "do not fit"),
             ("over the GPU entries", header(off=kern_off - 8), "do not fit"),
             ("row out of range", entry("=I", 0, len(rows)), "names row"),
             ("not a GPU stage", entry("=I", 0, cpu_row), "not a GPU stage"),
             ("share NaN", entry("=d", 40, float("nan")), "not a number"))
    for what, change, says in cases:
        bad = bytearray(data)
        change(bad)
        replace_file(runtime_dir, p.pid, bad)
        r = prof_top(env, str(p.pid), "--once")
        assert r.returncode == 1 and "malformed" in r.stderr and says in r.stderr, \
            (what, r.stderr)
        assert "Traceback" not in r.stderr, (what, r.stderr)
        r = prof_top(env, "--json")
        assert r.returncode == 0, (what, r.stderr)
        listed = {x["pid"]: x for x in json.loads(r.stdout)}
        assert says in listed[p.pid]["error"], (what, listed)
        # That file's error only: the other process reads.
        assert "error" not in listed[other.pid], (what, listed[other.pid])
        r = prof_top(env, str(other.pid), "--json")
        assert r.returncode == 0 and step_gpu(json.loads(r.stdout)) is not None, (what, r.stderr)


def test_reader_survives_corrupt_kernel_entries(kernels_start, live, runtime_dir):
    """Every byte of the header's kernel fields and of the entry changed:
    a table or a LiveError, nothing else."""
    p = kernels_start()
    settled(live, p.pid, 0.5)
    real, kern_off = kernel_file(live, runtime_dir, p.pid)
    places = list(range(KERN_AT, KERN_AT + 16)) + list(range(kern_off, len(real)))
    survives_mutations(live, real, places, 31, extra=(0x7FF8000000000000,))   # NaN
