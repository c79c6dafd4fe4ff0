"""Live files that know their process beyond its pid, and a live directory
nobody else can take (issue 36):

- a process in another pid namespace (a container sharing /dev/shm with
  --ipc=host; here `unshare --pid --fork --mount-proc`) publishing beside
  prof-top: prof-top outside neither removes its file (which goes on being
  updated) nor takes the namespace's pid 1 for its own pid 1; it shows the
  process by its pid here; a prof-top inside does not remove the files of
  processes outside it; once the namespace is gone, its files are removed;
- a file whose pid was taken again by another process (its start time
  differs) is a dead process's: removed, not listed;
- a live file removed under a running process is made again;
- /dev/shm/prof-UID made first by another user (a directory or a link):
  the process says so in one line and publishes in a directory of its own
  that prof-top finds (in a private mount namespace with a fresh
  /dev/shm).

The namespace tests need root and unshare(1) (and skip, saying so, where
the kernel or the container does not allow it)."""

import glob
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys

import pytest

from conftest import LIVE_PROG, PROF_TOP, prof_top, wait_for


def need_root_unshare(*flags):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) (a pid or mount namespace of its own)")
    r = subprocess.run(["unshare"] + list(flags) + ["true"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("unshare %s is not allowed here: %s"
                    % (" ".join(flags), r.stderr.decode().strip()))


def children(pid):
    """The pids of pid's children (from /proc)."""
    out = []
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task)) as f:
            out += [int(x) for x in f.read().split()]
    return out


def free_host_pid():
    """A pid no process has here (the namespace's second program takes it
    there, so that the reader outside finds nothing alive by its number)."""
    with open("/proc/sys/kernel/pid_max") as f:
        top = int(f.read())
    rng = random.Random()
    for _ in range(1000):
        pid = rng.randrange(max(1000, top // 2), top - 10)
        if not os.path.exists("/proc/%d" % pid):
            return pid
    pytest.skip("no free pid found under pid_max %d" % top)


def listed(env):
    r = prof_top(env, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def publishes(path):
    with open(path, "rb") as f:
        return struct.unpack_from("=Q", f.read(336), 264)[0]


def test_pid_namespace(env, start, runtime_dir):
    """Two programs in an unshared pid namespace, pid 1 and a pid no
    process has outside, beside one outside. On 15b10bc: prof-top outside
    removes the second's file (its pid is dead here), lists the first as
    pid 1 and `prof-top 1 --once` shows its table as the host's pid 1; a
    prof-top inside removes the outside program's file."""
    need_root_unshare("--pid", "--fork", "--mount-proc")
    outside = start()
    d = os.path.join(runtime_dir, "prof")
    outside_file = glob.glob(os.path.join(d, "prof-live-%d*" % outside.pid))
    assert len(outside_file) == 1
    want = free_host_pid()
    # sh is the namespace's pid 1 until it execs the first program; the
    # second, started before, takes the pid after ns_last_pid.
    script = ('echo %d > /proc/sys/kernel/ns_last_pid 2>/dev/null; '
              '"$1" 60 >/dev/null & exec "$1" 60 >/dev/null' % (want - 1))
    ns = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
                           "sh", "-c", script, "sh", LIVE_PROG], env=env,
                          stderr=subprocess.PIPE, text=True)
    try:
        first = wait_for(lambda: children(ns.pid), 20, "the namespace's pid 1")[0]
        second = wait_for(lambda: children(first), 20, "the namespace's second program")[0]
        with open("/proc/%d/status" % second) as f:
            nspid = [line.split()[-1] for line in f if line.startswith("NSpid:")]
        in_ns = int(nspid[0])
        mine = lambda: [p for p in os.listdir(d)  # noqa: E731
                        if p != os.path.basename(outside_file[0])]
        wait_for(lambda: len(mine()) == 2, 20, "the namespace's two live files")
        files = [os.path.join(d, p) for p in mine()]
        before = {f: publishes(f) for f in files}

        procs = {p["pid"]: p for p in listed(env)}
        # Shown by their pids here, each as its namespace's pid too.
        assert procs.get(first, {}).get("program") == "live_prog", procs
        assert procs.get(second, {}).get("program") == "live_prog", procs
        assert procs[first]["ns_pid"] == 1 and procs[second]["ns_pid"] == in_ns
        assert 1 not in procs, procs[1]
        text = prof_top(env).stdout
        assert "[pid 1 in pid namespace %d]" % procs[first]["pid_namespace"] in text, text
        # The host's pid 1 is not the namespace's.
        r = prof_top(env, "1", "--once")
        assert r.returncode == 1 and "publishes no live stats" in r.stderr, (r.stdout, r.stderr)
        r = prof_top(env, str(first), "--once")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("prof-top  pid %d (live_prog)  [pid 1 in pid namespace"
                                   % first), r.stdout
        # Nothing removed, and both files go on being written.
        assert sorted(mine()) == sorted(os.path.basename(f) for f in files)
        wait_for(lambda: all(publishes(f) > before[f] for f in files), 10,
                 "the namespace's files updated after prof-top ran")

        # A prof-top inside the namespace sees its processes by their pids
        # there and leaves the outside program's file alone.
        if shutil.which("nsenter"):
            r = subprocess.run(["nsenter", "-t", str(first), "-p", "-m", sys.executable,
                                PROF_TOP, "--json"], env=env, capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
            inside = {p["id"]: p for p in json.loads(r.stdout)}
            assert inside["1"]["program"] == "live_prog" and str(in_ns) in inside, inside
            there = [p for p in inside.values() if p["ns_pid"] == outside.pid]
            assert len(there) == 1 and there[0]["pid"] is None, inside
            assert os.path.exists(outside_file[0])
            assert "live_prog" in prof_top(env, str(outside.pid), "--once").stdout

        # A program that ended in a namespace this reader sees: removed.
        os.kill(second, signal.SIGKILL)
        wait_for(lambda: second not in {p["pid"] for p in listed(env)} and
                 len(mine()) == 1, 10, "the killed program's file removed")
        # The namespace gone: its pid 1's file too (the initial namespace's
        # reader sees every process there is).
        os.kill(first, signal.SIGKILL)
        ns.wait(timeout=20)
        wait_for(lambda: first not in {p["pid"] for p in listed(env)} and not mine(), 10,
                 "the ended namespace's files removed")
        assert os.path.exists(outside_file[0])
    finally:
        if ns.poll() is None:
            ns.kill()
            ns.wait()


def test_pid_taken_again(env, start, runtime_dir):
    """A file left by a killed process whose pid another process took
    since (here: the file given a running sleep's pid, its start time
    the dead one's) is a dead process's: not listed, removed. On 15b10bc
    the sleep is listed as the dead live_prog."""
    p = start()
    d = os.path.join(runtime_dir, "prof")
    path = os.path.join(d, "prof-live-%d" % p.pid)
    data = bytearray(open(path, "rb").read())
    p.proc.send_signal(signal.SIGKILL)
    p.proc.wait()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        struct.pack_into("=i", data, 40, sleeper.pid)
        fake = os.path.join(d, "prof-live-%d" % sleeper.pid)
        with os.fdopen(os.open(fake, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(data)
        procs = {x["pid"] for x in listed(env)}
        assert sleeper.pid not in procs
        assert not os.path.exists(fake)
        r = prof_top(env, str(sleeper.pid), "--once")
        assert r.returncode == 1 and "publishes no live stats" in r.stderr, r.stderr
    finally:
        sleeper.kill()
        sleeper.wait()


def test_removed_file_made_again(env, start, runtime_dir):
    """A running process's file removed by someone else (an older reader
    that took it for a dead process's) is made again at the next publish,
    said once; prof-top sees the process. On 15b10bc it is never seen
    again."""
    p = start()
    path = os.path.join(runtime_dir, "prof", "prof-live-%d" % p.pid)
    os.unlink(path)
    wait_for(lambda: os.path.exists(path), 10, "the live file made again")
    r = prof_top(env, str(p.pid), "--once")
    assert r.returncode == 0 and "live_prog" in r.stdout, r.stderr


SQUAT = r'''
import json, os, subprocess, sys, time
prog, top, uid = sys.argv[1], sys.argv[2], os.geteuid()
e = dict(os.environ)
e.pop("XDG_RUNTIME_DIR", None)
p = subprocess.Popen([prog, "5"], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                     text=True)
out = {"pid": p.pid}
end = time.monotonic() + 20
while time.monotonic() < end:
    r = subprocess.run([sys.executable, top, "--json"], env=e, capture_output=True, text=True)
    out["list"] = r.stdout + r.stderr
    if r.returncode == 0 and p.pid in {x["pid"] for x in json.loads(r.stdout)}:
        break
    time.sleep(0.2)
r = subprocess.run([sys.executable, top, str(p.pid), "--once"], env=e, capture_output=True,
                   text=True)
out["once"] = [r.returncode, r.stdout, r.stderr]
out["stderr"] = p.communicate(timeout=60)[1]    # its end: the file removed
out["shm"] = {n: [os.lstat("/dev/shm/" + n).st_uid,
                  sorted(os.listdir("/dev/shm/" + n)) if os.path.isdir("/dev/shm/" + n)
                  and not os.path.islink("/dev/shm/" + n) else None]
              for n in os.listdir("/dev/shm")}
print(json.dumps(out))
'''


@pytest.mark.parametrize("how", ["directory", "link"])
def test_directory_taken_by_another_user(env, tmp_path, how):
    """/dev/shm/prof-UID made first by nobody (a directory of its own, or
    a link to one), and a decoy /dev/shm/prof-UID.squat of nobody's: the
    program says so in one line and publishes in a directory of its own,
    where prof-top finds it; nothing of nobody's is touched. In a private
    mount namespace with a fresh /dev/shm. On 15b10bc the program is
    refused and prof-top does not see it."""
    need_root_unshare("-m")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv(1) to act as another user")
    uid = os.geteuid()
    nob = "setpriv --reuid=65534 --regid=65534 --clear-groups"
    squat = {"directory": "%s mkdir -m 700 /dev/shm/prof-%d" % (nob, uid),
             "link": "%s mkdir -m 700 /dev/shm/n && %s ln -s /dev/shm/n /dev/shm/prof-%d"
                     % (nob, nob, uid)}[how]
    script = ('mount -t tmpfs -o size=8m,mode=1777 tmpfs /dev/shm && %s && '
              '%s mkdir -m 700 /dev/shm/prof-%d.squat && exec "$@"' % (squat, nob, uid))
    e = dict(env, PROF_SUMMARY="off")
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-c", SQUAT,
                        LIVE_PROG, PROF_TOP], env=e, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    pid = out["pid"]
    assert pid in {x["pid"] for x in json.loads(out["list"])}, out["list"]
    code, stdout, stderr = out["once"]
    assert code == 0 and stdout.startswith("prof-top  pid %d (live_prog)" % pid), stderr
    lines = [line for line in out["stderr"].splitlines() if line.startswith("prof: live stats")]
    assert len(lines) == 1, out["stderr"]
    assert ("/dev/shm/prof-%d" % uid) in lines[0] and \
        ("publishing in /dev/shm/prof-%d." % uid) in lines[0], lines
    if how == "directory":
        assert "belongs to uid 65534" in lines[0], lines
    shm = out["shm"]
    # The squatter's names are as it left them; the program's directory is
    # the user's own and its file went at exit.
    assert shm["prof-%d" % uid][0] == 65534 and shm["prof-%d.squat" % uid] == [65534, []]
    own = [n for n in shm if n.startswith("prof-%d." % uid) and n != "prof-%d.squat" % uid]
    assert len(own) == 1 and shm[own[0]] == [uid, []], shm
