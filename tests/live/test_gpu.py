"""prof-top's GPU line (issue 29): a process with CUDA zones on the fake
driver (GPU_PROG: a 3 ms kernel every 10 ms, on the clock's deadlines, so
the GPU is busy 30% of the time whatever the load does to the sleeps) and
the fake NVML (utilization 40%) shows `GPU 0: busy 30% (window), 30% (run),
nvidia-smi 40%` under prof-top's header, and the same in --json; a
CPU-only process shows none. The file's GPU entries are versioned: the
header a version-1 reader checks is unchanged, a file from before them
(minor version 0) reads with no GPU line, a newer writer's longer entries
read by their front, and entries that do not fit are one error. The
same process's Prometheus text (PROF_METRICS, a .prom file) has the GPU
gauges, in this order and with these names, help texts, labels and
decimals: the busy ratio, NVML's four, or without NVML the driver's
device memory."""

import json
import os
import re
import struct

import pytest

from conftest import prof_top, survives_mutations, wait_for

GPU_PROG = os.environ.get("GPU_PROG")
FAKECUDA = os.environ.get("FAKECUDA_LIB")
FAKENVML = os.environ.get("FAKENVML_LIB")

BUSY = 30          # kernel 3 ms every 10 ms
NVML = 40          # FAKENVML_UTIL
SLACK = 6          # points: zones not polled yet at the snapshot, the run's edges
LINE = re.compile(r"^GPU (\d+): busy (\d+)% \(window\), (\d+)% \(run\)(?:, nvidia-smi (\d+)%)?"
                  r"(?:, memory (\S+ \S+) \(peak (\S+ \S+)\))?$")

# live.h: where the header's minor version and GPU fields are, and the
# size a version-1 reader insists on.
HEADER_SIZE = 336
MINOR_AT = 280
SIZE_AT = 32


@pytest.fixture
def gpu_start(start):
    if not GPU_PROG or not os.path.exists(GPU_PROG) or not FAKECUDA or not FAKENVML:
        pytest.fail("GPU_PROG, FAKECUDA_LIB and FAKENVML_LIB are not set to the built "
                    "tests/live/gpu_prog and tests/cuda fakes")

    def run(extra=None, **kw):
        e = {"PROF_CUDA_LIB": FAKECUDA, "PROF_NVML_LIB": FAKENVML, "FAKENVML_UTIL": str(NVML)}
        e.update(extra or {})
        return start(e, prog=GPU_PROG, **kw)
    return run


def settled(live, pid, seconds=3.0):
    """A snapshot of pid once it has run `seconds` with GPU figures: the
    run is long enough that the zones not polled yet (tens of ms) weigh a
    point at most."""
    return wait_for(lambda: (lambda s: s if s["run_s"] >= seconds and s["gpus"] else None)(
        live.snapshot(pid)), 60, "a publish with the GPU after %.0f s" % seconds)


def gpu_lines(text):
    return [line for line in text.splitlines() if line.startswith("GPU ")]


def test_gpu_line_once_and_json(env, gpu_start, live):
    p = gpu_start()
    settled(live, p.pid)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    gl = gpu_lines(r.stdout)
    assert len(gl) == 1, r.stdout
    # Under the header, above the columns' titles.
    assert lines.index(gl[0]) == 2 and lines[3].split()[:2] == ["STAGE", "COUNT"], r.stdout
    m = LINE.match(gl[0])
    assert m, gl[0]
    device, win, run, smi = (int(x) for x in m.groups()[:4])
    assert device == 0
    assert abs(win - BUSY) <= SLACK and abs(run - BUSY) <= SLACK, gl[0]
    assert smi == NVML, gl[0]
    # The fake NVML's device 0 has 1 GiB in use, every sample.
    assert m.group(5) == "1.00 GiB" and m.group(6) == "1.00 GiB", gl[0]

    r = prof_top(env, str(p.pid), "--json")
    assert r.returncode == 0, r.stderr
    gpus = json.loads(r.stdout)["gpus"]
    assert len(gpus) == 1 and gpus[0]["device"] == 0, gpus
    g = gpus[0]
    assert abs(g["busy_window"] * 100 - BUSY) <= SLACK, g
    assert abs(g["busy_run"] * 100 - BUSY) <= SLACK, g
    assert abs(g["nvml_utilization_window"] - NVML / 100) < 1e-6, g
    assert abs(g["nvml_utilization_run"] - NVML / 100) < 1e-6, g
    assert g["memory_used_bytes"] == g["memory_peak_window_bytes"] == 1 << 30, g


BUSY_HEAD = [
    "# HELP prof_gpu_busy_ratio Share of the last second during which the device ran GPU "
    "zones' work (union of their spans).",
    "# TYPE prof_gpu_busy_ratio gauge",
    re.compile(r'prof_gpu_busy_ratio\{device="0",rank="0"\} [01]\.\d{4}'),
]
NVML_GAUGES = [
    "# HELP prof_gpu_utilization_ratio NVML's utilization (what nvidia-smi shows), last sample.",
    "# TYPE prof_gpu_utilization_ratio gauge",
    'prof_gpu_utilization_ratio{device="0",rank="0"} 0.40',
    "# HELP prof_gpu_memory_used_bytes NVML's device memory used, last sample.",
    "# TYPE prof_gpu_memory_used_bytes gauge",
    'prof_gpu_memory_used_bytes{device="0",rank="0"} 1073741824',
    "# HELP prof_gpu_power_watts NVML's power draw, last sample.",
    "# TYPE prof_gpu_power_watts gauge",
    'prof_gpu_power_watts{device="0",rank="0"} 250.000',
    "# HELP prof_gpu_sm_clock_hertz NVML's SM clock, last sample.",
    "# TYPE prof_gpu_sm_clock_hertz gauge",
    'prof_gpu_sm_clock_hertz{device="0",rank="0"} 1980000000',
]
DRIVER_GAUGE = [
    "# HELP prof_gpu_memory_used_bytes The driver's device memory used (cuMemGetInfo), "
    "last sample.",
    "# TYPE prof_gpu_memory_used_bytes gauge",
    'prof_gpu_memory_used_bytes{device="0",rank="0"} 536870912',
]


@pytest.mark.parametrize("nvml", [True, False], ids=["nvml", "driver"])
def test_gpu_metrics(gpu_start, tmp_path, nvml):
    prom = str(tmp_path / "gpu.prom")
    extra = {"PROF_METRICS": prom}
    if not nvml:
        extra["PROF_NVML"] = "0"
    p = gpu_start(extra=extra, seconds=2.5)
    assert p.proc.wait(timeout=60) == 0, "".join(p.err)
    with open(prom) as f:
        lines = f.read().splitlines()
    # The GPU gauges follow the process's and end the text (no kernels
    # without PROF_CUDA=kernels).
    first = next(i for i, line in enumerate(lines) if line.startswith("# HELP prof_gpu_"))
    got = lines[first:]
    want = BUSY_HEAD + (NVML_GAUGES if nvml else DRIVER_GAUGE)
    assert len(got) == len(want), "\n".join(got)
    for g, w in zip(got, want):
        assert (w.fullmatch(g) if isinstance(w, re.Pattern) else g == w), (g, w)


def test_no_gpu_line_without_gpu_zones(env, start):
    p = start()
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    assert gpu_lines(r.stdout) == [], r.stdout
    assert r.stdout.splitlines()[2].split()[:2] == ["STAGE", "COUNT"]
    r = prof_top(env, str(p.pid), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpus"] == []


def replace_file(runtime_dir, pid, data):
    """The process's live file replaced by data. Its writer keeps writing
    into the mapping of the file it made, now unlinked: the new one stays
    as written."""
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % pid)
    os.unlink(path)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(data)


def test_versions(env, gpu_start, live, runtime_dir):
    p = gpu_start()
    settled(live, p.pid, 1.0)
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    data = bytearray(live._read(path))    # a whole publish, never a torn one
    # What a version-1 reader (before the GPU entries) insists on holds:
    # it reads this file as it did, the entries past its last name.
    magic, version, header_size = struct.unpack_from("=8sII", data, 0)
    assert (magic, version, header_size) == (b"PROFLIVE", 1, HEADER_SIZE)
    minor, gpu_size, ngpus, gpu_off = struct.unpack_from("=IIII", data, MINOR_AT)
    assert minor >= 1 and ngpus == 1 and gpu_off % 8 == 0
    # No kernel entries (minor 2) without PROF_CUDA=kernels: the GPU
    # entries end the file.
    assert gpu_off + ngpus * gpu_size == len(data)
    entry = bytes(data[gpu_off:gpu_off + gpu_size])

    # A writer from before the GPU entries: its reserved bytes are zero.
    old = bytearray(data)
    struct.pack_into("=IIII", old, MINOR_AT, 0, 0, 0, 0)
    replace_file(runtime_dir, p.pid, old)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    assert gpu_lines(r.stdout) == [] and "\ndata " in r.stdout, r.stdout
    assert live.snapshot(p.pid)["gpus"] is None

    # A newer writer: minor version 5, GPU entries 16 bytes longer (and
    # no kernel entries, after them).
    new = bytearray(data[:gpu_off]) + entry + b"\xff" * 16
    struct.pack_into("=IIII", new, MINOR_AT, 5, gpu_size + 16, 1, gpu_off)
    struct.pack_into("=IIII", new, MINOR_AT + 16, 80, 0, len(new), 0)
    struct.pack_into("=Q", new, SIZE_AT, len(new))
    replace_file(runtime_dir, p.pid, new)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    assert len(gpu_lines(r.stdout)) == 1 and LINE.match(gpu_lines(r.stdout)[0]), r.stdout

    # Entries that do not fit, and a share that is not a number: one error
    # each, never a traceback.
    for what, field in (("past the end", (1, gpu_size, 1, len(data))),
                        ("too many", (1, gpu_size, 1 << 30, gpu_off)),
                        ("too short", (1, 4, 1, gpu_off)),
                        ("before the rows", (1, gpu_size, 1, 8))):
        bad = bytearray(data)
        struct.pack_into("=IIII", bad, MINOR_AT, *field)
        replace_file(runtime_dir, p.pid, bad)
        r = prof_top(env, str(p.pid), "--once")
        assert r.returncode == 1 and "malformed" in r.stderr, (what, r.stderr)
        assert "Traceback" not in r.stderr, (what, r.stderr)
        r = prof_top(env, "--json")
        assert r.returncode == 0, (what, r.stderr)
        listed = {x["pid"]: x for x in json.loads(r.stdout)}
        assert "malformed" in listed[p.pid]["error"], (what, listed)
    nan = bytearray(data)
    struct.pack_into("=d", nan, gpu_off + 8, float("nan"))
    replace_file(runtime_dir, p.pid, nan)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 1 and "not a number" in r.stderr, r.stderr


def test_reader_survives_corrupt_gpu_entries(gpu_start, live, runtime_dir):
    """Every byte of the header's GPU fields and of the entries changed,
    one at a time and in bursts: a table or a LiveError, nothing else
    (test_safety.py does the same to a file without GPU entries)."""
    p = gpu_start()
    settled(live, p.pid, 0.5)
    real = live._read(os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid))
    gpu_off = struct.unpack_from("=I", real, MINOR_AT + 12)[0]
    places = list(range(MINOR_AT, MINOR_AT + 16)) + list(range(gpu_off, len(real)))
    # The bursts stay off the last 7 places: a word written there would
    # run past the file's end.
    survives_mutations(live, real, places if len(places) <= 8 else places[:-7], 29,
                       extra=(0x7FF8000000000000, 0x7FF0000000000000))    # NaN, inf
