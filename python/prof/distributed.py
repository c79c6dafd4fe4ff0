"""prof.distributed: one live cross-rank summary over torch.distributed.

    import prof, prof.distributed
    dist.init_process_group("nccl")          # or gloo, any backend
    prof.distributed.enable()                 # or PROF_RANKS=1 in the environment
    for batch in loader:
        ...
        prof.step()

With ``PROF_SUMMARY_EVERY=Nsteps``, every N-th ``prof.step()`` becomes a
collective: each rank snapshots the window that just closed and the ranks
reduce it in three rounds of all-reduces (MIN, MAX and SUM of CPU int64
tensors whose size does not grow with the number of ranks) on a dedicated
gloo group, whatever the default backend. Rank 0 prints one cross-rank
table where the summaries go, naming the straggler. The other ranks print
nothing periodic. The layout, the combine and the table are the runtime's
(src/output/ranks.c, ranks_table.c), the same code prof_mpi.h uses; this module only moves
tensors.

Rules that keep a job safe (docs/DISTRIBUTED.md):

- Only step windows can be collective; time windows are refused with one
  message and every rank keeps its own summaries.
- The window is read on the thread that calls ``prof.step()``; its
  reduction runs on a worker thread of this module (the only one that uses
  prof's group), so the training thread never waits for it.
- It never raises into the training loop and never hangs. The gloo group
  is created right after ``init_process_group`` (``enable()`` then, or
  ``PROF_RANKS=1`` with torch.distributed imported before prof), else at
  the first step; either way only once every rank has arrived, which is
  agreed through the default store and waited for at most
  ``PROF_RANKS_TIMEOUT`` (default 60s). The group's collectives time out
  after that long too. When a rank does not arrive (it never steps, left,
  or steps at another rate), prof names it, tells the other ranks through
  the store so that none of them waits a second time, and every rank goes
  back to its own summaries for the rest of the run.

``enable()`` wraps ``prof.step`` (the module attribute: code that took
``from prof import step`` before ``enable()`` keeps the unwrapped one; call
``prof.step()`` or ``prof.distributed.step()``).
"""

import json as _json
import os as _os
import sys as _sys
import time as _time

from . import _prof

__all__ = ["enable", "enabled", "step", "last"]

_c_step = _prof.step

# Store keys, under the default store (one job, one prof per process).
_K = "prof_ranks/"
_GRACE_S = 3.0      # how long a rank that failed waits for the reporter's words

# mode: "off", "pending" (waiting for the process group), "on", "refused"
# (time windows, PROF_RANKS=0, no periodic summaries), "failed" (a
# reduction failed: per-rank summaries for the rest of the run).
_st = {
    "mode": "off",
    "every": 0,
    "timeout": None,
    "group": None,
    "store": None,
    "rank": 0,
    "world": 1,
    "windows": 0,
    "flight": None,
    "skipped": 0,
    "state": None,
    "last": None,
    "cost": None,
    "keep": [],     # the tensors of the last window's collectives (_keep)
}


def _dist():
    """torch.distributed when the program imported it and initialised the
    default group; None otherwise (never imports torch itself)."""
    d = _sys.modules.get("torch.distributed")
    if d is None or not d.is_available() or not d.is_initialized():
        return None
    return d


def _fail(why):
    _st["mode"] = "failed"
    _prof._ranks_abandon(why)


# The store, from prof's worker thread while the training thread runs
# Python: only set, add and get, whose bindings hold the GIL while they make
# Python objects. Not compare_set: up to torch 2.3 it builds its bytes
# result with the GIL released, which corrupts the interpreter's heap when
# another thread runs Python then (a rank died of SIGSEGV in 1 of about 100
# DDP runs; a busy training thread beside prof's reductions crashed in
# seconds: test_store_beside_a_busy_training_thread in
# tests/distributed/test_torch.py). Not check: torch 1.13 does not
# bind it. get blocks until its key exists, so a text is published with a
# counter (add, which never blocks) that says it is there.

def _count(store, key):
    """The counter key (0 when absent), without waiting."""
    return store.add(key, 0)


def _publish(store, key, text):
    """Make text readable under key: the text first, then its counter."""
    store.set(key + "/text", text)
    store.add(key, 1)


def _read(store, key):
    """The text published under key, or None, without waiting."""
    if _count(store, key) == 0:
        return None
    v = store.get(key + "/text")
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _ranks_list(ranks, limit=8):
    s = ", ".join(str(r) for r in ranks[:limit])
    if len(ranks) > limit:
        s += " and %d more" % (len(ranks) - limit)
    return ("rank " if len(ranks) == 1 else "ranks ") + s


def _absent(store, prefix, world):
    """The ranks that did not count prefix<rank> (one look-up a rank: only
    after a timeout)."""
    return [r for r in range(world) if _count(store, "%s%d" % (prefix, r)) == 0]


def _agree(store, tag, rank, world, timeout):
    """Wait until every rank has arrived at tag, for at most timeout. Every
    rank reaches the same answer: the first rank to see all arrivals, or to
    give up, takes the decision's lock (the first add to it), publishes the
    decision, and everyone reads it. Returns None (go) or why not."""
    store.add("%s%s/here/%d" % (_K, tag, rank), 1)
    store.add("%s%s/count" % (_K, tag), 1)
    decision = "%s%s/decision" % (_K, tag)
    deadline = _time.monotonic() + timeout
    pause = 0.002
    while True:
        d = _read(store, decision)
        here = d is None and _count(store, "%s%s/count" % (_K, tag)) >= world
        late = _time.monotonic() > deadline
        if d is None and (here or late) and store.add(decision + "/lock", 1) == 1:
            d = "go"
            if not here:
                missing = _absent(store, "%s%s/here/" % (_K, tag), world)
                d = "no: %s did not arrive within %gs" % (_ranks_list(missing), timeout)
            _publish(store, decision, d)
        if d is None and _time.monotonic() > deadline + _GRACE_S:
            # The lock's holder never published (it died between the two).
            d = "no: the rank deciding did not say within %gs" % (timeout + _GRACE_S)
        if d is not None:
            return None if d == "go" else d[4:]
        _time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _activate(d):
    """Create the gloo group once every rank is here, and mute the per-rank
    summaries."""
    rc, every, timeout = _prof._ranks_start()
    if rc != 0:
        # -EINVAL (time windows) and -ENOENT were said by the runtime.
        _st["mode"] = "refused"
        return
    if _st["timeout"] is not None:
        timeout = _st["timeout"]
    _st["timeout"] = timeout
    try:
        from datetime import timedelta
        from torch.distributed import distributed_c10d
        store = distributed_c10d._get_default_store()
        _st["rank"] = d.get_rank()
        _st["world"] = d.get_world_size()
        why = _agree(store, "group", _st["rank"], _st["world"], timeout)
        if why is not None:
            _fail("creating the gloo group: %s" % why)
            return
        _st["group"] = d.new_group(backend="gloo", timeout=timedelta(seconds=timeout))
        _st["store"] = store
        _hook_destroy(d)
    except Exception as e:  # noqa: BLE001 - never into the training loop
        _fail("creating the gloo group: %s: %s" % (type(e).__name__, e))
        return
    _st["every"] = every
    _st["mode"] = "on"


def _timed_out(k, step, err):
    """The reduction of window k failed on this rank (worker thread): name the ranks that
    did not arrive (each rank set its key as it started the window), tell
    every rank, and fail. The first rank to fail reports; the others print
    its words."""
    store = _st["store"]
    rank, world = _st["rank"], _st["world"]
    try:
        if store.add("%sw%d/failed" % (_K, k), 1) == 1:
            missing = _absent(store, "%sw%d/here/" % (_K, k), world)
            if missing:
                why = "%s did not reach the reduction of window %d (step %d on rank %d) " \
                      "within %gs" % (_ranks_list(missing), k + 1, step, rank, _st["timeout"])
            else:
                why = "the reduction of window %d (step %d on rank %d) failed: %s" % (
                    k + 1, step, rank, err)
            _publish(store, _K + "abort", why)
        else:
            deadline = _time.monotonic() + _GRACE_S
            why = None
            while why is None and _time.monotonic() < deadline:
                why = _read(store, _K + "abort")
                _time.sleep(0.02)
            if why is None:
                why = "the reduction of window %d at step %d: %s" % (k + 1, step, err)
    except Exception as e:  # noqa: BLE001
        why = "the reduction of window %d at step %d: %s (%s)" % (k + 1, step, err, e)
    _fail(why)


_WAIT_PREVIOUS_S = 0.2    # a window step waits this long for the last reduction


def _settle(works):
    """Wait out the works of a round that failed (each fails or ends within
    the group's timeout). One left pending kept gloo working on it into the
    interpreter's exit, where the process died of SIGABRT ("terminate called
    without an active exception") in 2 of 4 runs of a rank leaving early on
    a busy machine."""
    for w in works:
        try:
            w.wait()
        except Exception:  # noqa: BLE001 - the first failure is the one said
            pass


def _rounds(fl):
    """The reduction of one window, on prof's worker thread: the rounds one
    after the other (each a MIN, a MAX and a SUM all-reduce of one int64
    buffer on prof's group), then the table on rank 0. Only this thread
    issues collectives on prof's group, one window at a time, so every
    rank issues them in the same order."""
    import torch
    import torch.distributed as dist

    ops = (dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.SUM)
    k, step, store = fl["k"], fl["step"], _st["store"]
    try:
        # A rank that gave up told the others: do not wait for it again.
        why = _read(store, _K + "abort")
        if why is None:
            store.add("%sw%d/here/%d" % (_K, k, _st["rank"]), 1)
    except Exception as e:  # noqa: BLE001
        why = "the store: %s: %s" % (type(e).__name__, e)
    if why is not None:
        _fail(why)
        return
    moved = 0
    works = []
    keep = _st["keep"] = []
    try:
        for rnd in range(3):
            buf, parts = _prof._ranks_contribute(fl["state"], rnd)
            words = torch.frombuffer(buf, dtype=torch.int64)
            split = torch.split(words, list(parts))
            keep.append(words)
            keep.extend(split)
            works = [dist.all_reduce(part, op=op, group=_st["group"], async_op=True)
                     for part, op in zip(split, ops) if part.numel()]
            for w in works:
                w.wait()          # the group's timeout bounds it
            works = []
            _prof._ranks_result(fl["state"], rnd, buf)
            moved += len(buf)
    except Exception as e:  # noqa: BLE001 - never into the training loop
        _settle(works)
        msg = str(e).splitlines()[0] if str(e) else ""
        _timed_out(k, step, "%s: %s" % (type(e).__name__, msg))
        return
    try:
        if _st["rank"] == 0:
            _prof._ranks_emit(fl["state"])
    except Exception as e:  # noqa: BLE001
        _fail("printing the table of step %d: %s: %s" % (step, type(e).__name__, e))
        return
    _st["state"] = fl["state"]
    _st["last"] = None
    _st["cost"] = {"bytes_sent": moved, "bytes_received": moved,
                   "reduce_ms": (_time.perf_counter() - fl["t0"]) * 1e3,
                   "skipped_windows": _st["skipped"]}


def _window(step):
    """A step closed a window: snapshot it here (the window of this very
    step) and hand its reduction to a worker thread. The training thread
    never waits for the reduction, except up to _WAIT_PREVIOUS_S for the
    last window's when it is still running."""
    import threading

    prev = _st["flight"]
    if prev is not None:
        prev.join(_WAIT_PREVIOUS_S)
        if prev.is_alive():
            # Still reducing the last window (a rank is behind): this one
            # is not reduced; the ranks' steps will differ in the next
            # table, which says so.
            _st["skipped"] += 1
            return
        _st["flight"] = None
    if _st["mode"] != "on":
        return
    k = _st["windows"]
    _st["windows"] += 1
    if _dist() is None:
        _fail("reduction at step %d: the default process group is gone" % step)
        return
    try:
        fl = {"k": k, "step": step, "t0": _time.perf_counter(),
              "deadline": _time.monotonic() + _st["timeout"] + 2 * _GRACE_S,
              "state": _prof._ranks_snapshot(_st["rank"])}
    except Exception as e:  # noqa: BLE001
        _fail("reading this rank's window at step %d: %s" % (step, e))
        return
    t = threading.Thread(target=_rounds, args=(fl,), name="prof-ranks", daemon=True)
    t.deadline = fl["deadline"]
    _st["flight"] = t
    t.start()


def _drain():
    """Let the window in flight finish (at most until its deadline): before
    the process group goes, at exit, and for last()."""
    t = _st["flight"]
    if t is not None:
        t.join(max(0.0, t.deadline - _time.monotonic()))


def _at_exit():
    """_drain, then _keep: the interpreter is about to go."""
    _drain()
    _keep(_st["keep"])


def _keep(tensors):
    """Never free the tensors that prof gave to gloo. A gloo worker thread
    lets go of a finished collective's tensors a moment after wait()
    returns; when its reference is the last one, freeing the tensor's
    Python object needs the GIL, and once the interpreter is finalizing
    that thread is ended with pthread_exit inside C++ code that cannot
    unwind: "terminate called without an active exception", SIGABRT, the
    rank's exit status lost (1 run in 10 of the 4-rank DDP example on a
    busy machine). prof keeps a reference to the last window's tensors
    (_rounds) and, at exit, one that is never dropped: a few kilobytes."""
    try:
        import ctypes

        for t in tensors:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(t))
    except Exception:  # noqa: BLE001 - the list still holds them until the modules go
        pass


def step():
    """``prof.step()`` plus, at a step that closes a window, the start of
    the cross-rank reduction (which a worker thread finishes). Returns the
    step count. Installed as ``prof.step`` by ``enable()``."""
    n = _c_step()
    mode = _st["mode"]
    if mode == "pending":
        d = _dist()
        if d is not None:
            _activate(d)
            mode = _st["mode"]
    if mode == "on" and n % _st["every"] == 0:
        _window(n)
    return n


def _install():
    pkg = _sys.modules.get(__package__)
    if pkg is not None:
        pkg.step = step


def _hook_init(d):
    """Make init_process_group create prof's group as it returns: every rank
    is there then, so the group costs no wait at a step."""
    orig = getattr(d, "init_process_group", None)
    if orig is None or getattr(orig, "_prof_hook", False):
        return

    def init_process_group(*args, **kwargs):
        out = orig(*args, **kwargs)
        if _st["mode"] == "pending" and _dist() is not None:
            _activate(d)
        return out

    init_process_group._prof_hook = True
    init_process_group.__doc__ = orig.__doc__
    d.init_process_group = init_process_group


def _hook_destroy(d):
    """Finish the window in flight before the groups go (and at exit)."""
    orig = getattr(d, "destroy_process_group", None)
    if orig is not None and not getattr(orig, "_prof_hook", False):
        def destroy_process_group(*args, **kwargs):
            # python -m prof's last step (prof._torch turns an optimizer
            # step into prof.step() at the next boundary, which would come
            # at exit): reduced while the group is still there.
            t = _sys.modules.get(__package__ + "._torch")
            if t is not None:
                t._at_exit()
            _drain()
            return orig(*args, **kwargs)

        destroy_process_group._prof_hook = True
        destroy_process_group.__doc__ = orig.__doc__
        d.destroy_process_group = destroy_process_group
    import atexit
    atexit.register(_at_exit)


def _torch_loaded():
    """Called by prof._torch once the program imported torch (python -m
    prof imports prof before torch)."""
    td = _sys.modules.get("torch.distributed")
    if _st["mode"] == "pending" and td is not None:
        _hook_init(td)


def enable(timeout=None):
    """Make every step window a cross-rank summary (see the module's help).

    Call it on every rank, after ``init_process_group``: the gloo group is
    created there, once every rank has called it (at most ``timeout``).
    Before it, the group is created by ``init_process_group`` when prof can
    hook it, else at the first ``prof.step()`` after the group exists.
    ``timeout`` (seconds) overrides ``PROF_RANKS_TIMEOUT``. Returns True
    when cross-rank summaries are on (or will be once the group exists);
    False when they are refused: time-based or no periodic summaries (one
    message on stderr), ``PROF_RANKS=0``, a rank that did not arrive, or a
    failure earlier in the run. Never raises for those."""
    if timeout is not None:
        _st["timeout"] = float(timeout)
    if _st["mode"] in ("on", "failed", "refused"):
        return _st["mode"] == "on"
    _install()
    d = _dist()
    if d is None:
        _st["mode"] = "pending"
        td = _sys.modules.get("torch.distributed")
        if td is not None:
            _hook_init(td)
        return True
    _activate(d)
    return _st["mode"] == "on"


def enabled():
    """True while the periodic summaries are cross-rank ones."""
    return _st["mode"] == "on"


def last():
    """The numbers of the last cross-rank table (on every rank, not only
    rank 0), as a dict: the JSON form of the table (docs/DISTRIBUTED.md):
    ``step``, ``steps``, ``nranks``, ``ranks`` (the ranks named in notes),
    ``stages`` (per stage: name, ranks, ``avg_ns``, ``p95_ns`` and
    ``self_ns_per_step`` as {median, min, min_rank, max, max_rank},
    slowest_rank, spread, sums) and ``straggler`` ({rank, stage,
    excess_ns_per_step, ...} or None), plus ``cost`` ({bytes_sent,
    bytes_received, reduce_ms, skipped_windows} on this rank). Waits (at
    most PROF_RANKS_TIMEOUT) for a reduction in flight. None before the
    first one."""
    _drain()
    if _st["state"] is None:
        return None
    if _st["last"] is None:
        _st["last"] = _json.loads(_prof._ranks_format(_st["state"], "json"))
        _st["last"]["cost"] = _st["cost"]
    return _st["last"]


if _os.environ.get("PROF_RANKS", "").strip() == "1":
    _install()
    _st["mode"] = "pending"
    if "torch.distributed" in _sys.modules:
        _hook_init(_sys.modules["torch.distributed"])
