"""prof.live: read the live table that a running prof process publishes.

Every process recording with ``PROF=1`` (unless ``PROF_LIVE=0``) writes its
stages once a second to a file named by its pid, ``prof-live-PID``
(``prof-live-PID-nsINODE`` in a pid namespace other than the initial one:
a container), under this user's directory, ``$XDG_RUNTIME_DIR/prof``,
``/dev/shm/prof-UID``, or where another user took that name first,
``/dev/shm/prof-UID.XXXXXX`` (0700, the file 0600). This module reads it,
trusting only this user's own files (owner and mode checked, every count
and index bounded: a malformed file is a LiveError for that file);
``prof-top`` is built on it::

    import prof.live
    for p in prof.live.processes():
        print(p["pid"], p["rank"], p["program"])
    snap = prof.live.snapshot(pid)
    for row in snap["rows"]:
        print(row["path"], row["count"], row["p95_ns"])
    for gpu in snap["gpus"] or []:     # None: a writer older than the GPU figures
        print(gpu["device"], gpu["busy_window"], gpu["nvml_utilization_window"])
    for row in snap["rows"]:
        k = row["kernels"]             # None: no kernels (or PROF_CUDA not kernels)
        if k:
            print(row["path"], k["busy_window_ns"], k["count_window"], k["top"])

Standard library only, and importable without the C extension (prof-top
loads this file by path), so it reads processes on a host where only the
tools are installed. The layout is documented in docs/LIVE.md.
"""

import os
import stat
import struct
import time

__all__ = ["processes", "snapshot", "rates", "same_process", "directories", "path_of",
           "parse_id", "LiveError"]

MAGIC = b"PROFLIVE"
VERSION = 1
# Additions a reader of VERSION may ignore (live.h): 1, the GPU entries;
# 2, the GPU stages' kernel entries (PROF_CUDA=kernels); 3, the process's
# pid and time namespaces and its start time; 4, the process's memory;
# 5, the rows' on-CPU time; 6, the rows' peak rises.
MINOR = 6
PREFIX = "prof-live-"
# The initial pid namespace's inode (the kernel's PROC_PID_INIT_INO): its
# processes' files have the plain name prof-live-PID.
INIT_PID_NS = 0xEFFFFFFC

# src/output/live.h: struct prof_live_file_header, prof_live_file_row and
# prof_live_file_gpu, prof_live_file_kernels, prof_live_file_memory.
_HEADER = struct.Struct("=8sIIIIQQii64s64sQQQQQQIIQQQQQQIIIIIIIIIIQII")
_ROW = struct.Struct("=IIIIIIQQQQQQddd")
_GPU = struct.Struct("=iIdddd")
_KERN = struct.Struct("=IIQQQQd32s")
_MEM = struct.Struct("=QQQ")
_GPU_MEM = struct.Struct("=QQ")    # minor 4: after _GPU in a GPU entry
_CPU = struct.Struct("=Q")         # minor 5: one a row, at cpu_off
_CPU_UNKNOWN = 0xFFFFFFFFFFFFFFFF  # PROF_LIVE_CPU_UNKNOWN: not measured
# Minor 6: one a row after the on-CPU times; PROF_LIVE_PEAK_UNKNOWN: not measured
_PEAK_UNKNOWN = 0xFFFFFFFFFFFFFFFF
_SEQ_OFFSET = 24
_PID_OFFSET = 40
_IDENT_OFFSET = 312       # pid_ns, time_ns (uint32), start_ticks (uint64)
_MINOR_OFFSET = 280
_NO_PARENT = 0xFFFFFFFF
_PATH_MAX = 256


class LiveError(Exception):
    """A process's live table cannot be read (gone, another user's, not a
    prof process, malformed, or a layout this reader does not know)."""


# What a file may claim, whatever it says: a file is at most this big, and
# its table has at most this many rows (the writer publishes 4,096 and
# their ancestors, each at most 64k levels deep: far fewer in practice).
_MAX_FILE = 1 << 30
_MAX_ROWS = 1 << 22
# GPU entries: the writer publishes 64 at most, each may grow (a newer
# writer's) up to this size.
_MAX_GPUS = 1024
_MAX_GPU_SIZE = 4096
# Kernel entries: one per GPU stage of the table (the writer: 256 at most).
_MAX_KERN_SIZE = 4096


def _private_dir(d):
    """d when it is a directory of this user's alone (not a link, owner is
    us, no group or other bits): the writer refuses any other, and so does
    the reader, or another user could plant files in it."""
    try:
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    return d


def directories():
    """Where this user's files are looked for: $XDG_RUNTIME_DIR/prof (the
    writer's choice where that variable names a directory of this user's),
    then /dev/shm/prof-UID, then /dev/shm/prof-UID.* (where a writer found
    /dev/shm/prof-UID taken by another user, it made one with mkdtemp);
    only those that are this user's alone (0700)."""
    out = []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    cands = [os.path.join(xdg, "prof")] if xdg and xdg.startswith("/") else []
    cands.append("/dev/shm/prof-%d" % os.geteuid())
    prefix = "prof-%d." % os.geteuid()
    try:
        cands += sorted(os.path.join("/dev/shm", n) for n in os.listdir("/dev/shm")
                        if n.startswith(prefix))
    except OSError:
        pass
    for d in cands:
        if d not in out and _private_dir(d):
            out.append(d)
    return out


def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (the first is
    the state, field 3), None when there is no such process, [] where
    /proc cannot say."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return []
    # pid (comm) state ...: comm may hold spaces and parentheses.
    return data[data.rfind(b")") + 1:].split()


def _state(pid):
    """The process's state letter from /proc/PID/stat ('R', 'S', 'Z', ...),
    None when there is no such process, '?' where /proc cannot say."""
    f = _stat_fields(pid)
    if f is None:
        return None
    return f[0].decode("ascii", "replace") if f else "?"


def _start_ticks(pid):
    """Its start time (field 22, clock ticks since boot), None where
    unknown."""
    f = _stat_fields(pid)
    try:
        return int(f[19]) if f else None
    except ValueError:
        return None


def _alive(pid):
    """A process that runs: not gone, and not a zombie (ended, its parent
    has not reaped it yet) or dead."""
    return _state(pid) not in (None, "Z", "X", "x")


def _ns_inode(pid, kind):
    """The inode of /proc/PID/ns/KIND (pid "self" too), None where /proc
    cannot say."""
    try:
        link = os.readlink("/proc/%s/ns/%s" % (pid, kind))
    except OSError:
        return None
    try:
        return int(link[link.index("[") + 1:link.rindex("]")])
    except ValueError:
        return None


class _Self:
    """The reader's own pid and time namespaces, and whether /proc's pids
    are its namespace's (a /proc mounted for another namespace names other
    processes by the same numbers)."""

    def __init__(self):
        self.pid_ns = _ns_inode("self", "pid")
        self.time_ns = _ns_inode("self", "time") or 0
        try:
            self.proc_ok = self.pid_ns is not None and \
                os.readlink("/proc/self") == str(os.getpid())
        except OSError:
            self.proc_ok = False


def _name_of(name):
    """(pid, pid namespace inode or None for the plain name) of a file
    name, None for a name that is not a live file's."""
    if not name.startswith(PREFIX):
        return None
    rest = name[len(PREFIX):]
    ns = None
    if "-ns" in rest:
        rest, ns = rest.split("-ns", 1)
        if not ns.isdigit() or not 0 < int(ns) < 1 << 32:
            return None
        ns = int(ns)
    if not rest.isdigit() or not 0 < int(rest) < 1 << 31:
        return None
    return int(rest), ns


def _entries():
    for d in directories():
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            n = _name_of(name)
            if n is not None:
                yield n[0], n[1], os.path.join(d, name)


def _ident(path):
    """(pid_ns, time_ns, start_ticks) from the file's header, each 0 where
    the writer did not say (a writer before minor version 3, or one that
    could not read /proc), or None when the header cannot be read. Read
    without the sequence number: these fields never change once written."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.pread(fd, _HEADER.size, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(head) < _HEADER.size or head[:8] != MAGIC or \
            struct.unpack_from("=I", head, 8)[0] != VERSION:
        return None
    if struct.unpack_from("=I", head, _MINOR_OFFSET)[0] < 3:
        return 0, 0, 0
    return struct.unpack_from("=IIQ", head, _IDENT_OFFSET)


def _nspid(pid):
    """/proc/PID/status's NSpid: the process's pid in each pid namespace
    from /proc's down to its own (the last), None where unreadable."""
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return [int(x) for x in line.split()[1:]] or None
    except (OSError, ValueError):
        pass
    return None


class _Scan:
    """What /proc shows of the pid namespaces: found, (namespace, pid
    there) -> [pid here]; seen, the namespaces of the processes whose
    namespace could be read; unread, (pid here, pid in its own namespace
    or None) of those whose namespace could not be read (another user's,
    or a process the kernel keeps from ptrace-like access: one of them may
    be in any namespace)."""

    def __init__(self, wanted):
        self.found, self.seen, self.unread = {}, set(), []
        try:
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        except OSError:
            self.unread.append((None, None))
            return
        for pid in pids:
            try:
                link = os.readlink("/proc/%d/ns/pid" % pid)
                ns = int(link[link.index("[") + 1:link.rindex("]")])
            except FileNotFoundError:
                continue          # ended meanwhile
            except (OSError, ValueError):
                nspid = _nspid(pid)
                self.unread.append((pid, nspid[-1] if nspid else None))
                continue
            self.seen.add(ns)
            if ns in wanted:
                nspid = _nspid(pid)
                if nspid:
                    self.found.setdefault((ns, nspid[-1]), []).append(pid)

    def may_be(self, ns_pid, start):
        """Whether a process whose namespace could not be read may be the
        one of pid ns_pid there (started at start, None: unknown)."""
        for pid, last in self.unread:
            if pid is None or last is None:
                return True
            if last == ns_pid and (start is None or _start_ticks(pid) in (None, start)):
                return True
        return False


def _resolve():
    """This user's live files, each with the process it is as this reader
    sees it: a dict with path, ns_pid (the pid in its own namespace),
    pid_namespace (None where unknown), start_ticks and pid (the pid here,
    None where this reader cannot see the process). A file is removed only
    when its process is provably dead: its namespace is this reader's and
    the pid there is gone, a zombie, or another process started since; or
    the namespace is one this reader sees whole and the process is not in
    it. Anything else is kept: a file may be a process in another
    container's pid namespace sharing /dev/shm."""
    me = _Self()
    out, foreign = [], []
    for ns_pid, name_ns, path in _entries():
        ident = _ident(path)
        pid_ns, time_ns, start = ident if ident is not None else (0, 0, 0)
        if name_ns is not None:
            ns = name_ns        # the name says (and the header must agree)
        elif pid_ns == INIT_PID_NS:
            ns = INIT_PID_NS
        else:
            ns = None           # an older writer, or one that could not tell
        e = {"path": path, "ns_pid": ns_pid, "pid_namespace": ns,
             "start_ticks": start or None, "pid": None,
             "same_time": time_ns == me.time_ns}
        if ns is None or not me.proc_ok:
            # Its namespace unknown (or /proc not this reader's): the pid
            # is taken as this reader's while it runs, never removed.
            if ns is None or ns == me.pid_ns:
                if _alive(ns_pid):
                    e["pid"] = ns_pid
                    out.append(e)
            else:
                out.append(e)
            continue
        if ns == me.pid_ns:
            if not _alive(ns_pid) or (e["start_ticks"] and e["same_time"] and
                                      _start_ticks(ns_pid) not in (None, start)):
                _clean(path)
                continue
            e["pid"] = ns_pid
            out.append(e)
            continue
        foreign.append(e)
    if foreign:
        scan = _Scan({e["pid_namespace"] for e in foreign})
        for e in foreign:
            ns = e["pid_namespace"]
            start = e["start_ticks"] if e["same_time"] else None
            here = [p for p in scan.found.get((ns, e["ns_pid"]), ())
                    if start is None or _start_ticks(p) == start]
            if here and _alive(here[0]):
                e["pid"] = here[0]
            elif here or ((ns in scan.seen or me.pid_ns == INIT_PID_NS) and
                          not scan.may_be(e["ns_pid"], start)):
                # Seen ended; or not among the processes of a namespace
                # this reader sees whole (one it sees a process of, or any
                # from the initial namespace, which sees them all): dead.
                _clean(e["path"])
                continue
            out.append(e)
    return out


def _clean(path):
    # A process killed by a signal leaves its file: nobody else will
    # remove it. Where permissions do not allow, it stays (and is skipped).
    try:
        os.unlink(path)
    except OSError:
        pass


def parse_id(text):
    """A process as prof-top takes it: "PID" (a pid as this reader sees
    it) or "PID@NAMESPACE" (a pid in the pid namespace of that inode, for
    a process this reader cannot see). (pid, namespace or None); ValueError
    for anything else."""
    text = str(text)
    pid, _, ns = text.partition("@")
    if not pid.isdigit() or not 0 < int(pid) < 1 << 31 or \
            (ns and (not ns.isdigit() or not 0 < int(ns) < 1 << 32)) or (_ and not ns):
        raise ValueError("not a pid or PID@NAMESPACE: %r" % text)
    return int(pid), int(ns) if ns else None


def _id_of(e):
    """How prof-top names a process: its pid here, else PID@NAMESPACE."""
    if e["pid"] is not None:
        return str(e["pid"])
    return "%d@%d" % (e["ns_pid"], e["pid_namespace"])


def _find(pid):
    """The entry for pid (a pid here, or "PID@NAMESPACE"), or None."""
    want, ns = parse_id(pid)
    for e in _resolve():
        if ns is None and e["pid"] == want:
            return e
        if ns is not None and e["ns_pid"] == want and e["pid_namespace"] == ns:
            return e
    return None


def path_of(pid):
    """The live file of pid (as for snapshot), or None when it publishes
    none."""
    e = _find(pid)
    return e["path"] if e is not None else None


def _cstr(b):
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def _check_file(fd, path):
    """The file is trusted only when it is a regular file of this user's
    that nobody else may write."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise LiveError("%s is not a regular file: not read" % path)
    if st.st_uid != os.geteuid():
        raise LiveError("%s belongs to uid %d, not to this user (uid %d): not trusted"
                        % (path, st.st_uid, os.geteuid()))
    if st.st_mode & 0o077:
        raise LiveError("%s has mode %04o, not 0600 (others may read or write it): not "
                        "trusted" % (path, st.st_mode & 0o7777))
    return st


def _read(path, retries=200):
    """The file's bytes as of one whole publish (seqlock: the sequence
    number is even and the same before and after the copy)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except PermissionError:
        raise LiveError("%s cannot be read (another user's): run as that user"
                        % path) from None
    except FileNotFoundError:
        raise LiveError("%s is gone (the process ended)" % path) from None
    except OSError as e:
        raise LiveError("%s cannot be opened (%s)" % (path, e.strerror)) from None
    try:
        for _ in range(retries):
            st = _check_file(fd, path)
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
            if not _HEADER.size <= size <= min(st.st_size, _MAX_FILE):
                raise LiveError("%s is malformed: it claims %d bytes in use, the file has %d"
                                % (path, size, st.st_size))
            data = os.pread(fd, size, 0)
            again = struct.unpack_from("=Q", os.pread(fd, 8, _SEQ_OFFSET))[0]
            if again == seq and len(data) == size and \
                    struct.unpack_from("=Q", data, _SEQ_OFFSET)[0] == seq:
                return data
            time.sleep(0.001)
        raise LiveError("%s kept changing while read" % path)
    finally:
        os.close(fd)


def _parse(data, path="the live file"):
    """The table in data, every count, size and index checked against the
    bytes there are: a malformed file is a LiveError, never an IndexError
    or a MemoryError."""
    def bad(what):
        return LiveError("%s is malformed: %s" % (path, what))

    if len(data) < _HEADER.size:
        raise bad("shorter than its header")
    h = _HEADER.unpack_from(data, 0)
    (_, _, header_size, row_size, nrows, seq, size, pid, rank, program, host,
     real_ns, run_ns, win_ns, win_start_step, steps, dropped, threads, gpu_stages,
     stages, folded, snap_ns, publish_ns, publishes, metrics_ns,
     minor, gpu_size, ngpus, gpu_off, kern_size, nkern, kern_off, cpu_off,
     pid_ns, time_ns, start_ticks, mem_size, mem_off) = h
    if header_size != _HEADER.size or row_size != _ROW.size:
        raise bad("header or row size %d/%d, expected %d/%d"
                  % (header_size, row_size, _HEADER.size, _ROW.size))
    if size != len(data) or nrows > _MAX_ROWS or header_size + nrows * row_size > size:
        raise bad("%d rows do not fit in %d bytes" % (nrows, size))
    names_at = header_size + nrows * row_size
    names_end = size
    gpus = None    # a writer from before the GPU entries (minor version 0)
    if minor >= 1:
        if not _GPU.size <= gpu_size <= _MAX_GPU_SIZE or ngpus > _MAX_GPUS or \
                not names_at <= gpu_off <= size or ngpus * gpu_size > size - gpu_off:
            raise bad("%d GPU entries of %d bytes at %d do not fit in %d bytes after the "
                      "rows at %d" % (ngpus, gpu_size, gpu_off, size, names_at))
        names_end = gpu_off
        gpus = [_gpu(bad, data, gpu_off + i * gpu_size, gpu_size) for i in range(ngpus)]
    kernels = {}
    if minor >= 2:
        gpu_end = gpu_off + ngpus * gpu_size
        if not _KERN.size <= kern_size <= _MAX_KERN_SIZE or nkern > nrows or \
                not gpu_end <= kern_off <= size or nkern * kern_size > size - kern_off:
            raise bad("%d kernel entries of %d bytes at %d do not fit in %d bytes after the "
                      "GPU entries' end at %d" % (nkern, kern_size, kern_off, size, gpu_end))
        for i in range(nkern):
            row, k = _kern(bad, data, kern_off + i * kern_size, nrows)
            kernels[row] = k
    memory = None    # a writer from before minor version 4, or one that knows none
    if minor >= 4 and mem_size:
        if not _MEM.size <= mem_size <= 4096 or not names_at <= mem_off <= names_end or \
                mem_size > names_end - mem_off:
            raise bad("a memory entry of %d bytes at %d does not fit between the rows at %d "
                      "and the GPU entries at %d" % (mem_size, mem_off, names_at, names_end))
        rss, peak_win, peak_run = _MEM.unpack_from(data, mem_off)
        memory = {"rss_bytes": rss, "rss_peak_window_bytes": peak_win,
                  "rss_peak_bytes": peak_run}
    cpu = None    # a writer from before minor version 5
    if minor >= 5 and cpu_off:
        if cpu_off % 8 or not names_at <= cpu_off <= names_end or \
                nrows * _CPU.size > names_end - cpu_off:
            raise bad("%d on-CPU times at %d do not fit between the rows at %d and the GPU "
                      "entries at %d" % (nrows, cpu_off, names_at, names_end))
        cpu = [_CPU.unpack_from(data, cpu_off + i * _CPU.size)[0] for i in range(nrows)]
    peak = None   # a writer from before minor version 6
    if minor >= 6 and cpu_off:
        peak_off = cpu_off + nrows * _CPU.size
        if nrows * _CPU.size > names_end - peak_off:
            raise bad("%d peak rises at %d do not fit before the GPU entries at %d"
                      % (nrows, peak_off, names_end))
        peak = [_CPU.unpack_from(data, peak_off + i * _CPU.size)[0] for i in range(nrows)]
    names_len = names_end - names_at
    rows = []
    for i in range(nrows):
        r = _ROW.unpack_from(data, header_size + i * row_size)
        (name_off, name_len, parent, depth, flags, _, count, total, self_ns, outer,
         win_count, win_total, p50, p95, p99) = r
        if name_off > names_len or name_len > names_len - name_off:
            raise bad("row %d's name (%d bytes at %d) is past the names (%d bytes)"
                      % (i, name_len, name_off, names_len))
        name = data[names_at + name_off:names_at + name_off + name_len].decode("utf-8", "replace")
        if parent == _NO_PARENT:
            parent = None
        elif parent >= i:
            # Rows are in tree order: a parent comes before its children.
            raise bad("row %d's parent is row %d" % (i, parent))
        if depth > i:
            # The writer's depth is at most the row's index (its ancestors
            # come first); a larger one would indent by gigabytes.
            raise bad("row %d's depth is %d" % (i, depth))
        if parent is None:
            path_ = name
        elif len(rows[parent]["path"]) > _PATH_MAX:
            path_ = ".../" + name    # as the metrics label: a deep chain's path is cut
        else:
            path_ = rows[parent]["path"] + "/" + name
        rows.append({
            "name": name, "path": path_, "parent": parent, "depth": depth,
            "gpu": bool(flags & 1), "count": count, "total_ns": total, "self_ns": self_ns,
            "outer_ns": outer, "window_count": win_count, "window_total_ns": win_total,
            "p50_ns": p50, "p95_ns": p95, "p99_ns": p99,
            "kernels": kernels.get(i),
            # Of self_ns, the time on a CPU; None where not measured (or
            # not published). Never more than self_ns.
            "cpu_ns": None if cpu is None or cpu[i] == _CPU_UNKNOWN else min(cpu[i], self_ns),
            # How much the process's peak RSS rose while the row's stage
            # ran (every path of its name together), whole run, bytes;
            # None where not measured (or not published).
            "peak_rise_bytes": None if peak is None or peak[i] == _PEAK_UNKNOWN else peak[i],
        })
    for i, k in kernels.items():
        if not rows[i]["gpu"]:
            raise bad("row %d has kernel figures but is not a GPU stage" % i)
    return {
        "pid": pid, "rank": rank if rank >= 0 else None, "program": _cstr(program),
        "host": _cstr(host), "time": real_ns / 1e9, "run_s": run_ns / 1e9,
        "window_s": win_ns / 1e9, "window_start_step": win_start_step, "steps": steps,
        "dropped": dropped, "threads": threads, "gpu_stages": gpu_stages, "stages": stages,
        "folded": folded, "publishes": publishes, "seq": seq,
        "ns_pid": pid,
        "pid_namespace": (pid_ns or None) if minor >= 3 else None,
        "start_ticks": (start_ticks or None) if minor >= 3 else None,
        "cost_us": {"snapshot": snap_ns / 1e3, "publish": publish_ns / 1e3,
                    "metrics": metrics_ns / 1e3},
        "gpus": gpus,
        "memory": memory,
        "rows": rows,
    }


def _gpu(bad, data, at, size):
    """One GPU entry: the fields this reader knows, from the front of an
    entry that a newer writer may have made longer."""
    device, flags, busy_win, busy_run, nvml_win, nvml_run = _GPU.unpack_from(data, at)
    mem = (None, None)
    if size >= _GPU.size + _GPU_MEM.size and flags & 4:
        mem = _GPU_MEM.unpack_from(data, at + _GPU.size)

    def share(v):
        if v != v or v in (float("inf"), float("-inf")):
            raise bad("GPU %d has a share that is not a number" % device)
        return min(max(v, 0.0), 1.0)

    return {
        "device": device, "busy_window": share(busy_win), "busy_run": share(busy_run),
        "nvml_utilization_window": share(nvml_win) if flags & 1 else None,
        "nvml_utilization_run": share(nvml_run) if flags & 2 else None,
        "memory_used_bytes": mem[0], "memory_peak_window_bytes": mem[1],
    }


def _kern(bad, data, at, nrows):
    """One kernel entry (a GPU stage's kernels): its row and figures, from
    the front of an entry a newer writer may have made longer."""
    row, _, win_busy, win_count, run_busy, run_count, share, top = _KERN.unpack_from(data, at)
    if row >= nrows:
        raise bad("a kernel entry names row %d of %d" % (row, nrows))
    if share != share or share in (float("inf"), float("-inf")):
        raise bad("row %d's top kernel has a share that is not a number" % row)
    top = _cstr(top)
    return row, {
        "busy_window_ns": win_busy, "count_window": win_count,
        "busy_run_ns": run_busy, "count_run": run_count,
        "top": top or None, "top_share": min(max(share, 0.0), 1.0) if top else None,
    }


def _load(e):
    """The table of entry e (from _resolve), its pid the reader's."""
    path = e["path"]
    table = _parse(_read(path), path)
    if table["pid"] != e["ns_pid"]:
        raise LiveError("%s is malformed: it names pid %d" % (path, table["pid"]))
    if e["pid_namespace"] is not None and table["pid_namespace"] not in (
            None, e["pid_namespace"]):
        raise LiveError("%s is malformed: it names pid namespace %d"
                        % (path, table["pid_namespace"]))
    table["pid"] = e["pid"]
    table["pid_namespace"] = e["pid_namespace"]
    table["id"] = _id_of(e)
    return table


def snapshot(pid):
    """The table process pid published last, as a dict (rows in tree order,
    each with its path "a/b/c"). pid is a pid as this reader sees it (a
    process in a container's pid namespace is found by its pid here), or
    "PID@NAMESPACE" for one in a pid namespace this reader cannot see. The
    dict's "pid" is the pid here (None where not seen), "ns_pid" the pid
    in its own namespace, "pid_namespace" that namespace's inode. Raises
    LiveError when there is none, the process has ended (a zombie too), or
    the file is not to be trusted."""
    try:
        want, ns = parse_id(pid)
    except ValueError as e:
        raise LiveError(str(e)) from None
    e = _find(pid)
    if e is None:
        if ns is None and _state(want) in ("Z", "X", "x"):
            raise LiveError("process %d has ended" % want)
        raise LiveError("process %s publishes no live stats (not running with PROF=1, "
                        "PROF_LIVE=0, another user's, or not on this host)" % pid)
    return _load(e)


def processes():
    """This user's prof processes on this host: a dict per process (pid,
    id, ns_pid, pid_namespace, rank, program, host, steps, stages, run_s,
    or error where its file cannot be read or trusted), by rank then pid.
    pid is the pid as this reader sees it (None for a process in a pid
    namespace it cannot see; id is then "PID@NAMESPACE"). Files of
    processes that provably ended are removed."""
    out = []
    for e in _resolve():
        try:
            s = _load(e)
        except (LiveError, OSError, ValueError, struct.error) as err:
            out.append({"pid": e["pid"], "id": _id_of(e), "ns_pid": e["ns_pid"],
                        "pid_namespace": e["pid_namespace"], "rank": None, "program": "?",
                        "host": "?", "threads": 0, "steps": 0, "stages": 0, "run_s": 0.0,
                        "error": str(err)})
            continue
        del s["rows"]
        out.append(s)
    out.sort(key=lambda p: (p["rank"] is None, p["rank"] or 0, p["pid"] is None,
                            p["pid"] or 0, p["ns_pid"]))
    return out


def same_process(prev, cur):
    """Whether two snapshots are of one process (not a pid taken again)."""
    def key(s):
        return (s.get("ns_pid", s.get("pid")), s.get("pid_namespace"), s.get("start_ticks"))
    return prev is not None and key(prev) == key(cur)


def rates(prev, cur):
    """Per row of cur, by path: count per second and wall share over the
    time between two snapshots of one process; with prev None (or not
    older), over the run so far. Returns {path: (rate, wall_share)} and the
    seconds it covers.

    The wall share is the time the stage's zones covered (recursion once,
    summed over threads) over the interval, 1.0 for a thread in it all the
    time. A zone is counted when it ends, so a zone longer than the
    interval would count whole in the interval it ends in (300% for a 3 s
    zone in a 1 s refresh, 0 in the others): for a stage whose zones last
    longer than the interval on average, the share is the run's. It is at
    most 1.0 per thread of the process."""
    out = {}
    cap = max(1, cur["threads"])
    run = cur["run_s"]

    def run_share(r):
        return min(r["outer_ns"] / 1e9 / run, cap) if run > 0 else 0.0

    if same_process(prev, cur) and run > prev["run_s"]:
        dt = run - prev["run_s"]
        before = {r["path"]: r for r in prev["rows"]}
        for r in cur["rows"]:
            b = before.get(r["path"])
            dc = r["count"] - (b["count"] if b else 0)
            do = r["outer_ns"] - (b["outer_ns"] if b else 0)
            if r["count"] and r["total_ns"] / r["count"] / 1e9 >= dt:
                share = run_share(r)
            else:
                share = min(max(do, 0) / 1e9 / dt, cap)
            out[r["path"]] = (max(dc, 0) / dt, share)
        return out, dt
    for r in cur["rows"]:
        out[r["path"]] = (r["count"] / run if run > 0 else 0.0, run_share(r))
    return out, run
