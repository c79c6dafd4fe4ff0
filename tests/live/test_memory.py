"""The process's memory in the live file (minor version 4) and prof-top:
RSS and its peak as the kernel says them in /proc/PID/status, on
prof-top's second line; a writer without the entry, and an entry that does
not fit, read as such."""

import os
import re
import struct

from conftest import prof_top, wait_for
from test_gpu import MINOR_AT, SIZE_AT, replace_file

MEM_AT = 328        # live.h: mem_size, mem_off (uint32)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


def test_memory_entry_and_line(env, start, live, runtime_dir):
    p = start()
    s = wait_for(lambda: (lambda t: t if t["memory"] else None)(live.snapshot(p.pid)), 10,
                 "a publish with the memory entry")
    m = s["memory"]
    hwm = status(p.pid, "VmHWM")
    # The peak only rises: the one published is at most the kernel's now,
    # and the program's memory is steady (within 1% plus its last second's
    # growth, which is small beside its few MB).
    assert m["rss_peak_bytes"] <= hwm and m["rss_peak_bytes"] >= 0.99 * hwm - (1 << 20), (m, hwm)
    assert 0 < m["rss_bytes"] <= m["rss_peak_bytes"]
    assert 0 < m["rss_peak_window_bytes"] <= m["rss_peak_bytes"]
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    line = r.stdout.splitlines()[1]
    got = re.search(r"  rss (\S+ \S+)  peak (\S+ \S+) \(window\), (\S+ \S+) \(run\)", line)
    assert got is not None, line
    num, unit = got.group(3).split()
    assert abs(float(num) * UNITS[unit] - hwm) <= 0.02 * hwm + (1 << 20), (line, hwm)

    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    data = bytearray(live._read(path))
    mem_size, mem_off = struct.unpack_from("=II", data, MEM_AT)
    assert struct.unpack_from("=I", data, MINOR_AT)[0] >= 4 and mem_size == 24 and mem_off % 8 == 0

    # A writer from before minor 4 (its reserved bytes zero): no memory.
    old = bytearray(data)
    struct.pack_into("=III", old, MINOR_AT, 3, *struct.unpack_from("=II", data, MINOR_AT + 4))
    struct.pack_into("=II", old, MEM_AT, 0, 0)
    replace_file(runtime_dir, p.pid, old)
    assert live.snapshot(p.pid)["memory"] is None
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0 and " rss " not in r.stdout.splitlines()[1], r.stdout

    # An entry past the GPU entries' start: malformed, one line.
    bad = bytearray(data)
    struct.pack_into("=II", bad, MEM_AT, 24, struct.unpack_from("=Q", data, SIZE_AT)[0])
    replace_file(runtime_dir, p.pid, bad)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 1 and "malformed" in r.stderr and "memory entry" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_gpu_memory_from_the_driver_without_nvml(env, start, live, tmp_path):
    """PROF_NVML=0: the fake driver's cuMemGetInfo (512 MiB used of 80 GiB)
    in the live GPU entry, prof-top's GPU line and the metrics, whose text
    parses strictly (tests/cuda/labels.py)."""
    import sys
    from test_gpu import FAKECUDA, GPU_PROG
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
    import labels

    prom = str(tmp_path / "m.prom")
    p = start({"PROF_CUDA_LIB": FAKECUDA, "PROF_NVML": "0", "PROF_METRICS": prom},
              prog=GPU_PROG)
    s = wait_for(lambda: (lambda t: t if t["gpus"] and t["gpus"][0]["memory_used_bytes"]
                          else None)(live.snapshot(p.pid)), 20, "a GPU entry with memory")
    g = s["gpus"][0]
    assert g["memory_used_bytes"] == g["memory_peak_window_bytes"] == 512 << 20, g
    assert g["nvml_utilization_window"] is None, g
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0, r.stderr
    assert "memory 512 MiB (peak 512 MiB)" in r.stdout, r.stdout

    def gauge():
        try:
            with open(prom, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        return raw if b"prof_gpu_memory_used_bytes{" in raw else None
    raw = wait_for(gauge, 20, "the driver's gauge in the metrics")
    samples = labels.check_exposition(raw)
    assert samples["prof_gpu_memory_used_bytes"] == [{"device": '"0"', "rank": '"0"'}], samples
    line = [x for x in raw.decode().splitlines() if x.startswith("prof_gpu_memory_used_bytes{")]
    assert line[0].endswith(" %d" % (512 << 20)), line
    assert "process_resident_memory_bytes" in samples
