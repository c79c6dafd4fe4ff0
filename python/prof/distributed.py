"""prof.distributed: one live cross-rank summary over torch.distributed.

    import prof, prof.distributed
    dist.init_process_group("nccl")          # or gloo, any backend
    prof.distributed.enable()                 # or PROF_RANKS=1 in the environment
    for batch in loader:
        ...
        prof.step()

With ``PROF_SUMMARY_EVERY=Nsteps``, every N-th ``prof.step()`` becomes a
collective: each rank packs the numbers of the window that just closed
(count, total, self, avg, p50, p95, max per stage: one fixed-size block of
``PROF_RANKS_BLOCK_SIZE`` bytes), one ``all_gather`` on a dedicated gloo
group (CPU tensors, whatever the default backend) moves every rank's block
to every rank, and rank 0 prints one cross-rank table where the summaries
go, naming the straggler. The other ranks print nothing periodic. The table
is formatted by the runtime (src/ranks.c), the same code prof_mpi.h uses.

Rules that keep a job safe (docs/DISTRIBUTED.md):

- Only step windows can be collective; time windows are refused with one
  message and every rank keeps its own summaries.
- The gather runs here, on the thread that calls ``prof.step()`` (the
  training thread), never on prof's collector thread.
- It never raises into the training loop and never hangs: the gloo group
  has a timeout (``PROF_RANKS_TIMEOUT``, default 60s); when a gather fails
  or times out (a rank has gone), prof says so once and every rank goes
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

# mode: "off", "pending" (waiting for the process group), "on", "refused"
# (time windows, PROF_RANKS=0, no periodic summaries), "failed" (a gather
# failed: per-rank summaries for the rest of the run).
_st = {
    "mode": "off",
    "every": 0,
    "timeout": None,
    "group": None,
    "rank": 0,
    "world": 1,
    "blocks": None,
    "last": None,
    "cost": None,
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


def _activate(d):
    """Create the gloo group (a collective over the default group: every
    rank does it at the same step) and mute the per-rank summaries."""
    rc, every, timeout = _prof._ranks_start()
    if rc != 0:
        # -EINVAL (time windows) and -ENOENT were said by the runtime.
        _st["mode"] = "refused"
        return
    if _st["timeout"] is not None:
        timeout = _st["timeout"]
    try:
        from datetime import timedelta
        _st["group"] = d.new_group(backend="gloo", timeout=timedelta(seconds=timeout))
        _st["rank"] = d.get_rank()
        _st["world"] = d.get_world_size()
    except Exception as e:  # noqa: BLE001 - never into the training loop
        _fail("creating the gloo group: %s: %s" % (type(e).__name__, e))
        return
    _st["every"] = every
    _st["mode"] = "on"


def _window():
    """The collective at a step that closed a window: pack, gather, print."""
    import torch

    d = _dist()
    try:
        if d is None:
            raise RuntimeError("the default process group is gone")
        t0 = _time.perf_counter()
        block = _prof._ranks_pack(_st["rank"])
        mine = torch.frombuffer(bytearray(block), dtype=torch.uint8)
        parts = [torch.empty_like(mine) for _ in range(_st["world"])]
        d.all_gather(parts, mine, group=_st["group"])
        blocks = b"".join(p.numpy().tobytes() for p in parts)
        t1 = _time.perf_counter()
        if _st["rank"] == 0:
            _prof._ranks_emit(blocks)
        _st["blocks"] = blocks
        _st["last"] = None
        _st["cost"] = {"bytes_sent": len(block), "bytes_received": len(blocks),
                       "gather_ms": (t1 - t0) * 1e3,
                       "total_ms": (_time.perf_counter() - t0) * 1e3}
    except Exception as e:  # noqa: BLE001 - never into the training loop
        _fail("gather at step %d: %s: %s" % (_prof.step_count(), type(e).__name__,
                                             str(e).splitlines()[0] if str(e) else ""))


def step():
    """``prof.step()`` plus, at a step that closes a window, the cross-rank
    gather. Returns the step count. Installed as ``prof.step`` by
    ``enable()``."""
    n = _c_step()
    mode = _st["mode"]
    if mode == "on":
        if n % _st["every"] == 0:
            _window()
    elif mode == "pending":
        d = _dist()
        if d is not None:
            _activate(d)
            if _st["mode"] == "on" and n % _st["every"] == 0:
                _window()
    return n


def _install():
    pkg = _sys.modules.get(__package__)
    if pkg is not None:
        pkg.step = step


def enable(timeout=None):
    """Make every step window a cross-rank summary (see the module's help).

    Call it on every rank, after ``init_process_group`` (before it, it takes
    effect at the first ``prof.step()`` after the group exists). ``timeout``
    (seconds) overrides ``PROF_RANKS_TIMEOUT``. Returns True when cross-rank
    summaries are on (or will be once the group exists); False when they
    are refused: time-based or no periodic summaries (one message on
    stderr), ``PROF_RANKS=0``, or a failure earlier in the run. Never
    raises for those."""
    if timeout is not None:
        _st["timeout"] = float(timeout)
    if _st["mode"] in ("on", "failed", "refused"):
        return _st["mode"] == "on"
    _install()
    d = _dist()
    if d is None:
        _st["mode"] = "pending"
        return True
    _activate(d)
    return _st["mode"] == "on"


def enabled():
    """True while the periodic summaries are cross-rank ones."""
    return _st["mode"] == "on"


def last():
    """The numbers of the last cross-rank table (on every rank, not only
    rank 0), as a dict: the JSON form of the table (docs/FORMATS.md):
    ``step``, ``steps``, ``nranks``, ``ranks`` (per rank: state, step,
    steps, wall_ns), ``stages`` (per stage: name, ranks, ``avg_ns`` and
    ``p95_ns`` as {median, min, max}, slowest_rank, spread, per_rank
    numbers) and ``straggler`` ({rank, stage, excess_ns_per_step, ...} or
    None), plus ``cost`` ({bytes_sent, bytes_received, gather_ms,
    total_ms} of the gather on this rank). None before the first one."""
    if _st["blocks"] is None:
        return None
    if _st["last"] is None:
        _st["last"] = _json.loads(_prof._ranks_format(_st["blocks"], "json"))
        _st["last"]["cost"] = _st["cost"]
    return _st["last"]


if _os.environ.get("PROF_RANKS", "").strip() == "1":
    _install()
    _st["mode"] = "pending"
