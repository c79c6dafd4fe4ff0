"""The live view's shared files fail safe and trust nothing (issue 28), and
one metrics server per process tree (issue 30):

- a full tmpfs under the live file (a private mount namespace: needs root
  and unshare) costs the live view one line, never the program (SIGBUS);
  a table that outgrows the room stops publishing, said once;
- the live directory is the user's own: one made by someone else, or open
  to others, is refused with one line;
- prof-top and prof.live read only the user's own files: a file of
  another user's, one with a bad parent index, one claiming 2^62 bytes is
  one error each, and the real process is still listed;
- a zombie is an ended process: `prof-top PID --once` says so and fails;
- the .prom temporary cannot be taken by a name made first;
- forked workers never bind the PROF_METRICS port and say nothing, and a
  process a prof server started afresh (subprocess, spawn) stays silent
  when its parent holds the port."""

import glob
import json
import os
import pwd
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from conftest import LIVE_PROG, free_port, prof_top, wait_for

BUILD = os.environ.get("PROF_TEST_BUILD_DIR", "")
PKG = os.path.join(BUILD, "python")


def need_root_namespace():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a small tmpfs in a private mount "
                    "namespace")
    r = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("unshare -m is not allowed here: %s" % r.stderr.decode().strip())


def need_extension():
    if not glob.glob(os.path.join(PKG, "prof", "_prof*.so")):
        pytest.skip("the Python extension is not built in %s (meson -Dpython=true)" % PKG)


def in_full_tmpfs(mountpoint, argv, size_kb, fill_kb):
    """argv run in a private mount namespace where mountpoint is a fresh
    tmpfs of size_kb with fill_kb of it taken."""
    script = ('mount -t tmpfs -o size=%dk,mode=1777 tmpfs "$1" && '
              'dd if=/dev/zero of="$1/fill" bs=1k count=%d status=none 2>/dev/null; '
              'shift; exec "$@"' % (size_kb, fill_kb))
    return ["unshare", "-m", "sh", "-c", script, "sh", mountpoint] + argv


def live_lines(err):
    return [line for line in err.splitlines() if line.startswith("prof: live stats")]


def test_full_tmpfs_c(env, tmp_path):
    """$XDG_RUNTIME_DIR on a full tmpfs: exit 0, the final summary, one
    line. On 1d361fc: killed by SIGBUS at the collector's first publish."""
    need_root_namespace()
    xdg = tmp_path / "full"
    xdg.mkdir(mode=0o700)
    e = dict(env, PROF_SUMMARY="stderr", XDG_RUNTIME_DIR=str(xdg))
    r = subprocess.run(in_full_tmpfs(str(xdg), [LIVE_PROG, "1.5"], 64, 64), env=e,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, "status %d: %s" % (r.returncode, r.stderr)
    assert "final:" in r.stderr and "\nrequest " in r.stderr, r.stderr
    lines = live_lines(r.stderr)
    assert len(lines) == 1 and "No space left on device" in lines[0], r.stderr


GROW = r"""
import os, sys, time, prof
path = sys.argv[1]
with prof.zone("first"):
    pass
end = time.monotonic() + 20
while not os.path.exists(path) and time.monotonic() < end:
    time.sleep(0.05)
print("published" if os.path.exists(path) else "never published", flush=True)
# 3,000 stages of 60-byte names: a table of about 470 kB, past the room.
for i in range(3000):
    with prof.zone("stage-%05d-" % i + "x" * 49):
        pass
time.sleep(2.5)    # two publishes
with prof.zone("last"):
    pass
"""


def test_full_tmpfs_midrun_python(env, tmp_path):
    """/dev/shm with room for the first table only: the table that
    outgrows it stops publishing (one line), the program ends normally
    with its summary. On 1d361fc: SIGBUS when the table grew."""
    need_root_namespace()
    need_extension()
    e = dict(env, PROF_SUMMARY="stderr", PYTHONPATH=PKG)
    e.pop("XDG_RUNTIME_DIR")
    path = "/dev/shm/prof-%d/prof-live-" % os.geteuid()
    code = "import os, sys; sys.argv[1] += str(os.getpid()); exec(%r)" % GROW
    r = subprocess.run(in_full_tmpfs("/dev/shm", [sys.executable, "-c", code, path],
                                     256, 128), env=e, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, "status %d: %s" % (r.returncode, r.stderr)
    assert r.stdout.strip() == "published", r.stdout + r.stderr
    assert "final:" in r.stderr and "\nlast " in r.stderr, r.stderr
    lines = live_lines(r.stderr)
    assert len(lines) == 1 and "outgrew" in lines[0], r.stderr


@pytest.mark.parametrize("how", ["open", "owner"])
def test_directory_not_the_users_refused(env, tmp_path, how):
    """A live directory that is not the user's alone (open to others, or
    made by another user) is refused with one line, and nothing is written
    into it. On 1d361fc the file is made in whatever $XDG_RUNTIME_DIR
    names."""
    xdg = tmp_path / "xdg-precreated"
    xdg.mkdir()
    (xdg / "prof").mkdir()
    if how == "open":
        os.chmod(xdg / "prof", 0o777)      # precreated, open to all
        says = "mode 777"
    else:
        nob = nobody()
        if os.geteuid() != 0 or nob is None:
            pytest.skip("needs root and a 'nobody' user to make another user's directory")
        os.chmod(xdg / "prof", 0o700)
        os.chown(xdg / "prof", nob.pw_uid, -1)
        says = "belongs to uid %d" % nob.pw_uid
    e = dict(env, PROF_SUMMARY="stderr", XDG_RUNTIME_DIR=str(xdg))
    r = subprocess.run([LIVE_PROG, "1.5"], env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = live_lines(r.stderr)
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert os.listdir(xdg / "prof") == [] and sorted(os.listdir(xdg)) == ["prof"]
    assert "final:" in r.stderr


def test_file_in_user_directory(start, runtime_dir):
    p = start()
    d = os.path.join(runtime_dir, "prof")
    assert os.stat(d).st_mode & 0o777 == 0o700
    assert os.stat(os.path.join(d, "prof-live-%d" % p.pid)).st_mode & 0o777 == 0o600


def nobody():
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


def write_as(uid, path, data, mode=0o600):
    """path written by uid (a forked child that setuid()s), as another local
    user would make it."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(uid)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            os.write(fd, data)
            os.close(fd)
            os._exit(0)
        except BaseException:     # noqa: BLE001 - the child must not return
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert status == 0, "the child as uid %d could not write %s" % (uid, path)


def test_forged_and_malformed_files(env, start, runtime_dir, tmp_path):
    """Beside a real process: a copy of its file made by another user, one
    whose row names a parent after it, one that claims 2^62 bytes. Each is
    one error; the real process is listed and read. On 1d361fc the forged
    file is listed as a process and the malformed ones end the listing
    (IndexError, MemoryError)."""
    p = start()
    d = os.path.join(runtime_dir, "prof")
    real = open(os.path.join(d, "prof-live-%d" % p.pid), "rb").read()
    # Live processes to name: the files of processes that ended are removed.
    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    try:
        def fake(pid):
            # The sleeper's pid and start time: a file of a process that
            # runs (another start time is a dead process's whose pid was
            # taken again: removed).
            data = bytearray(real)
            struct.pack_into("=i", data, 40, pid)
            with open("/proc/%d/stat" % pid) as f:
                struct.pack_into("=Q", data, 320, int(f.read().rsplit(")", 1)[1].split()[19]))
            return data

        forged_pid, parent_pid, size_pid = (s.pid for s in sleepers)
        nob = nobody()
        if os.geteuid() == 0 and nob is not None:
            # Made by nobody in a directory of its own, then moved in (the
            # test's directory is 0700: nobody cannot write there itself).
            # (pytest's own directories are 0700 too: one of /tmp's, which
            # holds pytest's, so the rename keeps the file and its owner.)
            drop = tempfile.mkdtemp(prefix="prof-live-test-", dir="/tmp")
            try:
                os.chmod(drop, 0o777)
                write_as(nob.pw_uid, os.path.join(drop, "f"), bytes(fake(forged_pid)))
                os.rename(os.path.join(drop, "f"), os.path.join(d, "prof-live-%d" % forged_pid))
            finally:
                shutil.rmtree(drop, ignore_errors=True)
            forged_says = "belongs to uid %d" % nob.pw_uid
        else:
            path = os.path.join(d, "prof-live-%d" % forged_pid)
            with open(path, "wb") as f:
                f.write(fake(forged_pid))
            os.chmod(path, 0o644)
            forged_says = "has mode 0644"
        bad_parent = fake(parent_pid)
        nrows = struct.unpack_from("=I", bad_parent, 20)[0]
        assert nrows >= 2
        struct.pack_into("=I", bad_parent, 336 + 96 * 1 + 8, nrows + 5)   # row 1's parent
        huge = fake(size_pid)
        struct.pack_into("=Q", huge, 32, 1 << 62)                          # the size in use
        for pid, data in ((parent_pid, bad_parent), (size_pid, huge)):
            fd = os.open(os.path.join(d, "prof-live-%d" % pid),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, bytes(data))
            os.close(fd)

        r = prof_top(env, "--json")
        assert r.returncode == 0, r.stderr
        procs = {x["pid"]: x for x in json.loads(r.stdout)}
        assert "error" not in procs[p.pid] and procs[p.pid]["program"] == "live_prog"
        assert forged_says in procs[forged_pid]["error"]
        assert "malformed" in procs[parent_pid]["error"]
        assert "malformed" in procs[size_pid]["error"]
        r = prof_top(env)
        assert r.returncode == 0, r.stderr
        listed = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
        assert "live_prog" in listed[str(p.pid)]
        assert "not trusted" in listed[str(forged_pid)]
        for pid in (forged_pid, parent_pid, size_pid):
            r = prof_top(env, str(pid), "--once")
            assert r.returncode == 1 and r.stderr.startswith("prof-top: "), r.stderr
            assert "Traceback" not in r.stderr
        r = prof_top(env, str(p.pid), "--once")
        assert r.returncode == 0 and "live_prog" in r.stdout, r.stderr
    finally:
        for s in sleepers:
            s.kill()
            s.wait()


def test_zombie_has_ended(env, start, runtime_dir):
    """A process killed and not reaped yet (a zombie) has ended: not
    listed, and `--once` fails saying so. On 1d361fc it is listed, and
    `--once` prints its last table with status 0."""
    p = start()
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    os.kill(p.pid, signal.SIGKILL)       # not waited for: a zombie

    def state():
        with open("/proc/%d/stat" % p.pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    wait_for(lambda: state() == "Z", 10, "the zombie")
    assert os.path.exists(path)
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 1 and "has ended" in r.stderr, (r.returncode, r.stdout, r.stderr)
    r = prof_top(env, "--json")
    assert r.returncode == 0 and p.pid not in {x["pid"] for x in json.loads(r.stdout)}
    assert state() == "Z"                # still not reaped: the test saw a zombie


def test_prom_temporary_cannot_be_taken(env, tmp_path):
    """The name a writer could guess (PATH.tmp.PID, 1d361fc's) made first:
    the metrics are written all the same, the file is
    the user's with mode 0644, and what was there is untouched. On 1d361fc
    the program writes into the file made first and renames it (it is
    gone, and job.prom is whoever made it first's)."""
    prom = tmp_path / "job.prom"
    bait = tmp_path / "bait"
    bait.write_text("not yours\n")
    # exec keeps the shell's pid: the names are made for the program's pid.
    script = 'printf "planted\\n" > "$1.tmp.$$"; chmod 666 "$1.tmp.$$"; shift 2; exec "$@"'
    e = dict(env, PROF_METRICS=str(prom))
    r = subprocess.run(["sh", "-c", script, "sh", str(prom), str(bait), LIVE_PROG, "2"], env=e,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "PROF_METRICS" not in r.stderr, r.stderr
    st = os.lstat(prom)
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o644
    assert 'prof_stage_count_total{stage="request/parse",rank="0"}' in prom.read_text()
    planted = [f for f in os.listdir(tmp_path) if f.startswith("job.prom.tmp.")]
    assert len(planted) == 1, os.listdir(tmp_path)
    assert (tmp_path / planted[0]).read_text() == "planted\n"
    assert bait.read_text() == "not yours\n"
    # Nothing else left behind: the temporaries were renamed.
    assert sorted(set(os.listdir(tmp_path)) - set(planted)) == ["bait", "job.prom", "xdg"]


TRAINER = r"""
import os, sys, time, prof
# Workers forked at once, before the trainer's first publish (as a
# DataLoader's are): they record their own stage.
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 4
        while time.monotonic() < end:
            with prof.zone("getitem"):
                time.sleep(0.001)
        os._exit(0)
    kids.append(pid)
if len(sys.argv) > 2:
    # And one started afresh with the same environment (subprocess, spawn).
    import subprocess
    kids.append(subprocess.Popen([sys.executable, "-c", sys.argv[2]]).pid)
import threading
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("up", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end and not stop.is_set():
    with prof.zone("trainer"):
        time.sleep(0.001)
    prof.step()
for k in kids:
    os.waitpid(k, 0)
"""

FRESH = r"""
import time, prof
end = time.monotonic() + 4
while time.monotonic() < end:
    with prof.zone("fresh"):
        time.sleep(0.001)
"""


@pytest.mark.parametrize("fresh", [False, True], ids=["forked", "forked+spawned"])
def test_workers_never_serve(env, fresh):
    """The trainer serves /metrics, whenever its workers were forked, and
    no worker says anything about the port. On 1d361fc every run has a
    'cannot serve' (or 'does not serve') line, from the workers or, when a
    worker won the race, from the trainer."""
    need_extension()
    for attempt in range(3):
        port = free_port()
        e = dict(env, PYTHONPATH=PKG, PROF_METRICS="127.0.0.1:%d" % port)
        # The trainer runs until its stdin closes (60 s at most); its
        # workers 4 s, publishing several times.
        argv = [sys.executable, "-c", TRAINER, "60"] + ([FRESH] if fresh else [])
        p = subprocess.Popen(argv, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "up"

            def scrape():
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                            timeout=5) as r:
                    return r.read().decode()

            text = wait_for(lambda: (lambda t: t if 'stage="trainer"' in t else None)(scrape()),
                            20, "the trainer's stage in /metrics")
            assert 'stage="getitem"' not in text and 'stage="fresh"' not in text
            _, err = p.communicate("", timeout=90)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        assert p.returncode == 0, err
        assert "PROF_METRICS" not in err, "attempt %d: %s" % (attempt, err)


def snap(run_s, threads, rows):
    return {"pid": 1, "run_s": run_s, "threads": threads,
            "rows": [dict(path=p, count=c, total_ns=t, outer_ns=o) for p, c, t, o in rows]}


def test_wall_share_of_long_zones(live):
    """A one-thread stage of 2.5 s zones, refreshed every second: the
    second in which a zone ends must not read 250%. On 1d361fc it does
    (the zone's whole time over the refresh)."""
    g = 1e9
    prev = snap(10.0, 1, [("step", 3, 7.5 * g, 7.5 * g), ("tick", 900, 0.9 * g, 0.9 * g)])
    cur = snap(11.0, 1, [("step", 4, 10 * g, 10 * g), ("tick", 1000, 1.0 * g, 1.0 * g)])
    r, dt = live.rates(prev, cur)
    assert dt == pytest.approx(1.0)
    assert 0.85 < r["step"][1] <= 1.0       # the run's share: 10 s of 11
    assert r["step"][0] == pytest.approx(1.0)
    assert r["tick"][1] == pytest.approx(0.1)   # short zones: the refresh's own share
    # Never more than one per thread, whatever the counters say.
    bad = snap(11.0, 2, [("step", 4, 1 * g, 9 * g)])
    assert live.rates(snap(10.0, 2, [("step", 3, 0, 0)]), bad)[0]["step"][1] <= 2.0
    assert live.rates(None, bad)[0]["step"][1] <= 2.0


def test_reader_survives_any_corruption(start, live, runtime_dir):
    """Every byte of a real file changed, one at a time and in bursts:
    the reader returns a table or raises LiveError, nothing else (no
    IndexError, MemoryError, struct.error, ...)."""
    import random

    p = start()
    real = open(os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid), "rb").read()
    rng = random.Random(28)
    values = (0, 1, 0x7F, 0x80, 0xFF)
    for i in range(len(real)):
        for v in (rng.choice(values), rng.randrange(256)):
            data = bytearray(real)
            data[i] = v
            try:
                live._parse(bytes(data), "mutated")
            except live.LiveError:
                pass
    for _ in range(3000):
        data = bytearray(real)
        for _ in range(rng.randrange(1, 8)):
            at = rng.randrange(len(data) - 8)
            struct.pack_into("=Q", data, at, rng.choice((0, 1 << 62, (1 << 64) - 1,
                                                         rng.getrandbits(64))))
        try:
            live._parse(bytes(data), "mutated")
        except live.LiveError:
            pass


def test_port_taken_said_once_per_tree(env):
    """The port held by another program: the trainer says so, once; its
    forked workers and a process it started afresh with the same
    PROF_METRICS say nothing (the trainer has said it). On 1d361fc each
    of the six processes says it."""
    need_extension()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        e = dict(env, PYTHONPATH=PKG, PROF_METRICS="127.0.0.1:%d" % port)
        p = subprocess.Popen([sys.executable, "-c", TRAINER, "60", FRESH], env=e,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "up"
            time.sleep(2.5)      # two publishes of the trainer
            _, err = p.communicate("", timeout=90)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert p.returncode == 0, err
    said = [line for line in err.splitlines() if "PROF_METRICS" in line]
    assert len(said) == 1 and "cannot serve on 127.0.0.1:%d" % port in said[0], err
