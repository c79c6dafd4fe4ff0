"""prof.live: read the live table that a running prof process publishes.

Every process recording with ``PROF=1`` (unless ``PROF_LIVE=0``) writes its
stages once a second to a file named by its pid, ``prof-live-PID``, under
``$XDG_RUNTIME_DIR`` or ``/dev/shm`` (mode 0600: the owner and root can read
it). This module reads it; ``prof-top`` is built on it::

    import prof.live
    for p in prof.live.processes():
        print(p["pid"], p["rank"], p["program"])
    snap = prof.live.snapshot(pid)
    for row in snap["rows"]:
        print(row["path"], row["count"], row["p95_ns"])

Standard library only, and importable without the C extension (prof-top
loads this file by path), so it reads processes on a host where only the
tools are installed. The layout is documented in docs/LIVE.md.
"""

import os
import struct
import time

__all__ = ["processes", "snapshot", "rates", "directories", "path_of", "LiveError"]

MAGIC = b"PROFLIVE"
VERSION = 1
PREFIX = "prof-live-"

# src/live.h: struct prof_live_file_header and prof_live_file_row.
_HEADER = struct.Struct("=8sIIIIQQii64s64sQQQQQQIIQQQQQQ56x")
_ROW = struct.Struct("=IIIIIIQQQQQQddd")
_SEQ_OFFSET = 24
_NO_PARENT = 0xFFFFFFFF
_PATH_MAX = 256


class LiveError(Exception):
    """A process's live table cannot be read (gone, another user's, not a
    prof process, or a layout this reader does not know)."""


def directories():
    """Where the files are looked for: $XDG_RUNTIME_DIR (the writer's
    first choice), then /dev/shm."""
    out = []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    for d in (xdg, "/dev/shm"):
        if d and d.startswith("/") and os.path.isdir(d) and d not in out:
            out.append(d)
    return out


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True    # another user's process: alive
    return True


def _entries():
    for d in directories():
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if not name.startswith(PREFIX) or not name[len(PREFIX):].isdigit():
                continue
            yield int(name[len(PREFIX):]), os.path.join(d, name)


def _clean(path):
    # A process killed by a signal leaves its file: nobody else will
    # remove it. Where permissions do not allow, it stays (and is skipped).
    try:
        os.unlink(path)
    except OSError:
        pass


def path_of(pid):
    """The live file of pid, or None when it publishes none."""
    for p, path in _entries():
        if p == pid:
            return path
    return None


def _cstr(b):
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def _read(path, retries=200):
    """The file's bytes as of one whole publish (seqlock: the sequence
    number is even and the same before and after the copy)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except PermissionError:
        raise LiveError("%s belongs to another user (mode 0600): run as that user or root"
                        % path) from None
    except FileNotFoundError:
        raise LiveError("%s is gone (the process ended)" % path) from None
    try:
        for _ in range(retries):
            head = os.pread(fd, _HEADER.size, 0)
            if len(head) < _HEADER.size:
                time.sleep(0.005)     # created, not written yet
                continue
            h = _HEADER.unpack(head)
            if h[0] != MAGIC:
                raise LiveError("%s is not a prof live file" % path)
            if h[1] != VERSION:
                raise LiveError("%s has layout version %d; this reader knows %d"
                                % (path, h[1], VERSION))
            seq, size = h[5], h[6]
            if seq & 1:
                time.sleep(0.001)
                continue
            data = os.pread(fd, size, 0)
            again = struct.unpack_from("=Q", os.pread(fd, 8, _SEQ_OFFSET))[0]
            if again == seq and len(data) == size and \
                    struct.unpack_from("=Q", data, _SEQ_OFFSET)[0] == seq:
                return data
            time.sleep(0.001)
        raise LiveError("%s kept changing while read" % path)
    finally:
        os.close(fd)


def _parse(data):
    h = _HEADER.unpack_from(data, 0)
    (_, _, header_size, row_size, nrows, seq, size, pid, rank, program, host,
     real_ns, run_ns, win_ns, win_start_step, steps, dropped, threads, gpu_stages,
     stages, folded, snap_ns, publish_ns, publishes, metrics_ns) = h
    names_at = header_size + nrows * row_size
    rows = []
    for i in range(nrows):
        r = _ROW.unpack_from(data, header_size + i * row_size)
        (name_off, name_len, parent, depth, flags, _, count, total, self_ns, outer,
         win_count, win_total, p50, p95, p99) = r
        name = data[names_at + name_off:names_at + name_off + name_len].decode("utf-8", "replace")
        parent = None if parent == _NO_PARENT else parent
        if parent is None:
            path = name
        elif len(rows[parent]["path"]) > _PATH_MAX:
            path = ".../" + name    # as the metrics label: a deep chain's path is cut
        else:
            path = rows[parent]["path"] + "/" + name
        rows.append({
            "name": name, "path": path, "parent": parent, "depth": depth,
            "gpu": bool(flags & 1), "count": count, "total_ns": total, "self_ns": self_ns,
            "outer_ns": outer, "window_count": win_count, "window_total_ns": win_total,
            "p50_ns": p50, "p95_ns": p95, "p99_ns": p99,
        })
    return {
        "pid": pid, "rank": rank if rank >= 0 else None, "program": _cstr(program),
        "host": _cstr(host), "time": real_ns / 1e9, "run_s": run_ns / 1e9,
        "window_s": win_ns / 1e9, "window_start_step": win_start_step, "steps": steps,
        "dropped": dropped, "threads": threads, "gpu_stages": gpu_stages, "stages": stages,
        "folded": folded, "publishes": publishes, "seq": seq,
        "cost_us": {"snapshot": snap_ns / 1e3, "publish": publish_ns / 1e3,
                    "metrics": metrics_ns / 1e3},
        "rows": rows,
    }


def snapshot(pid):
    """The table process pid published last, as a dict (rows in tree order,
    each with its path "a/b/c"). Raises LiveError when there is none."""
    pid = int(pid)
    path = path_of(pid)
    if path is None:
        raise LiveError("process %d publishes no live stats (not running with PROF=1, "
                        "PROF_LIVE=0, or not on this host)" % pid)
    if not _alive(pid):
        _clean(path)
        raise LiveError("process %d has ended" % pid)
    return _parse(_read(path))


def processes():
    """The prof processes on this host: a dict per process (pid, rank,
    program, host, steps, stages, run_s, or error where its table cannot be
    read), by rank then pid. Files of dead processes are removed."""
    out = []
    for pid, path in _entries():
        if not _alive(pid):
            _clean(path)
            continue
        try:
            s = _parse(_read(path))
        except LiveError as e:
            out.append({"pid": pid, "rank": None, "program": "?", "host": "?", "steps": 0,
                        "stages": 0, "run_s": 0.0, "error": str(e)})
            continue
        del s["rows"]
        out.append(s)
    out.sort(key=lambda p: (p["rank"] is None, p["rank"] or 0, p["pid"]))
    return out


def rates(prev, cur):
    """Per row of cur, by path: count per second and wall share (0-1) over
    the time between two snapshots of one process; with prev None (or not
    older), over the run so far. Returns {path: (rate, wall_share)} and the
    seconds it covers."""
    out = {}
    if prev is not None and prev["pid"] == cur["pid"] and cur["run_s"] > prev["run_s"]:
        dt = cur["run_s"] - prev["run_s"]
        before = {r["path"]: r for r in prev["rows"]}
        for r in cur["rows"]:
            b = before.get(r["path"])
            dc = r["count"] - (b["count"] if b else 0)
            do = r["outer_ns"] - (b["outer_ns"] if b else 0)
            out[r["path"]] = (max(dc, 0) / dt, max(do, 0) / 1e9 / dt)
        return out, dt
    dt = cur["run_s"]
    for r in cur["rows"]:
        out[r["path"]] = (r["count"] / dt if dt > 0 else 0.0,
                          r["outer_ns"] / 1e9 / dt if dt > 0 else 0.0)
    return out, dt
