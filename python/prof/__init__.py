"""prof: stage timing for Python, C, C++ and Cython code on one runtime.

    import prof

    for step, batch in enumerate(loader):
        with prof.zone("forward"):
            out = model(batch)
        prof.counter("loss", float(loss))
        prof.step()
    print(prof.summary())

Recording is off until ``PROF=1`` is set in the environment or the program
calls ``prof.enable()`` (or creates ``ProfilingContext(enabled=True)``);
``PROF=0`` always wins. While off, a zone costs the context-manager
protocol and one flag test.

Everything timing-related is implemented in C (``prof._prof``); this file
holds re-exports, ``ProfilingContext``, the logging route and path helpers
for building extensions against the runtime. See docs/PYTHON.md.
"""

import atexit as _atexit
import os as _os
import signal as _signal
import sys as _sys

from . import _prof
from ._prof import (  # noqa: F401  (re-exports)
    Zone,
    ZoneWrapper,
    CudaZone,
    zone,
    cuda_zone,
    step,
    counter,
    mark,
    flush,
    reset,
    enable,
    enabled,
    shutdown,
    thread_name,
    stats,
    counters,
    summary,
    runtime_version,
    window_stats,
    window_step,
    step_count,
)

__version__ = _prof.__version__
version = __version__


def _mirror_parent_pid():
    # The runtime set PROF_PARENT_PID in the C environment as it loaded
    # (docs/CONFIG.md); os.environ is a copy taken at start-up, and a
    # subprocess started with env=dict(os.environ, ...) would go without
    # it and open this process's trace again.
    if _os.environ.get("PROF", "").strip() in ("", "0"):
        return
    try:
        import ctypes
        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_char_p
        v = getenv(b"PROF_PARENT_PID")
    except Exception:
        return
    if v is not None and _os.environ.get("PROF_PARENT_PID") != v.decode():
        _os.environ["PROF_PARENT_PID"] = v.decode()


_mirror_parent_pid()

__all__ = [
    "zone", "cuda_zone", "step", "counter", "mark", "flush", "reset", "enable",
    "enabled", "shutdown", "thread_name", "stats", "counters", "summary",
    "ProfilingContext", "log_to_logging", "get_include", "get_lib_dir",
    "get_library", "get_link_args", "version", "__version__",
    "window_stats", "window_step", "step_count", "distributed",
]


# ---------------------------------------------------------------------------
# @prof.zone on generator and coroutine functions

def _wrap_special(z, func):
    """Called by Zone.__call__ for functions that return a generator or a
    coroutine: the zone must span the iteration or the await, not the call
    that creates the object. It stays open across each ``yield``/``await``,
    so it measures wall time including time spent suspended."""
    import functools
    import inspect

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def coroutine_wrapper(*args, **kwargs):
            with z:
                return await func(*args, **kwargs)
        return coroutine_wrapper
    if inspect.isasyncgenfunction(func):
        @functools.wraps(func)
        async def asyncgen_wrapper(*args, **kwargs):
            with z:
                # asend()/athrow() values are not forwarded: plain iteration.
                async for item in func(*args, **kwargs):
                    yield item
        return asyncgen_wrapper

    @functools.wraps(func)
    def generator_wrapper(*args, **kwargs):
        with z:
            return (yield from func(*args, **kwargs))
    return generator_wrapper


_prof._set_special_wrapper(_wrap_special)


# ---------------------------------------------------------------------------
# One summary: the runtime's table at exit only when it says something new

# prof.step_count() when the program last took a summary itself, or None.
_taken = {"step": None}


def summary(format="text"):
    """The whole-run table as a ``str`` (``format="json"``: one JSON
    object). A program that prints it after its last ``prof.step()`` does
    not also get the runtime's final table at exit (docs/PYTHON.md)."""
    steps = _prof.step_count()
    text = _prof.summary(format)
    _taken["step"] = steps
    return text


def _final_is_repeat():
    # The final table would show what the program's own last summary()
    # showed (no step since), and it would go where nobody asked for it:
    # PROF_SUMMARY unset (stderr by default) and not routed to logging.
    return (_taken["step"] is not None and _taken["step"] == _prof.step_count()
            and not _os.environ.get("PROF_SUMMARY", "").strip() and not _log_state["on"])


# ---------------------------------------------------------------------------
# ProfilingContext: the hand-written profiler's API, on prof

class ProfilingContext:
    """Drop-in for the hand-written ``ProfilingContext`` of training scripts::

        profiler = prof.ProfilingContext(enabled=args.profile)
        with profiler.track("forward"):
            ...
        if step % 100 == 0:
            print(profiler.summary())

    ``enabled=True`` switches recording on (``prof.enable()``; ``PROF=0`` in
    the environment still wins). ``track(name)`` is ``prof.zone(name)``:
    the same C context manager, also usable as a decorator. With
    ``enabled=False`` nothing is recorded, ``track`` returns one shared C
    no-op context manager (about the cost of the ``with`` statement
    itself), ``summary()`` returns ``""`` and ``stats()`` returns ``{}``.

    ``log=True`` routes the runtime's periodic and final summaries to the
    ``logging`` logger named ``prof`` (see ``log_to_logging``).

    Stage names are global to the process: two contexts that track
    "forward" add to the same row, like every other prof zone.
    """

    def __init__(self, enabled=True, *, log=False):
        self.enabled = bool(enabled)
        if self.enabled:
            enable(True)
            # track is an instance attribute holding the C function (not a
            # method): ``ctx.track(x)`` then costs one attribute load and one
            # C call, no Python frame.
            self.track = zone
            if log:
                log_to_logging(True)
        else:
            self.track = _prof._null_track

    def step(self):
        """Mark an iteration boundary (drives PROF_SUMMARY_EVERY=Nsteps)."""
        return step() if self.enabled else 0

    def summary(self, format="text"):
        """The whole-run table: count, total, self, avg, p50/p95/p99, max and
        share of wall time per stage, nested as a tree. Printed after the
        last step, it stands in for the runtime's table at exit (see
        ``prof.summary``)."""
        return summary(format) if self.enabled else ""

    def stats(self, name=None):
        """``prof.stats()``: per-stage numbers in milliseconds."""
        if not self.enabled:
            if name is None:
                return {}
            raise KeyError(name)
        return stats(name)

    def counter(self, name, value):
        if self.enabled:
            counter(name, value)

    def reset(self):
        if self.enabled:
            reset()

    def __repr__(self):
        return f"<prof.ProfilingContext enabled={self.enabled}>"


# ---------------------------------------------------------------------------
# Ends of a run the C runtime's own atexit does not see

def _at_exit():
    # Python's atexit, not C's: an uncaught KeyboardInterrupt (Ctrl-C) makes
    # Python finalise and then kill itself with SIGINT, so C atexit handlers
    # never run. These run during finalisation, after non-daemon threads
    # were joined and before logging shuts down (see log_to_logging); the
    # final summary is written and the trace closed here. A second call
    # (C atexit, prof.shutdown() again) does nothing.
    if _final_is_repeat():
        _prof._skip_final_summary()
    shutdown()


def _worker_at_exit():
    # A worker's end: its task loop returned, and Pool.terminate() or its
    # parent's exit may send it SIGTERM meanwhile. Delivered in the middle
    # of the final summary or of the trace's close, the runtime's handler
    # would cut them short (with the collector already stopped it ends the
    # trace at once and dies): the signal waits until both are written,
    # then is delivered as sent, and the worker dies by it as asked.
    try:
        old = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTERM})
    except (AttributeError, OSError, ValueError):
        old = None
    try:
        _at_exit()
    finally:
        if old is not None:
            _signal.pthread_sigmask(_signal.SIG_SETMASK, old)


def _worker_exit_hook(_anchor):
    # Runs in a multiprocessing child, from Process._bootstrap after it
    # cleared the finaliser registry: a Finalize registered here runs in
    # util._exit_function(), the last Python code before os._exit().
    # Priority 0: after the user's positive-priority finalisers (which may
    # still record), before the negative ones that may block on joins.
    import multiprocessing.util as mp_util
    mp_util.Finalize(None, _worker_at_exit, exitpriority=0)


class _ForkAnchor:
    """A weak-referenceable key for multiprocessing's after-fork registry."""


_fork_anchor = _ForkAnchor()
_fork_hooked = False


def _hook_torch_worker_signals():
    # A DataLoader worker whose parent exits with the worker still running
    # (its iterator still referenced, persistent_workers) is sent SIGTERM
    # by multiprocessing; PyTorch's handler, set when the worker loop
    # starts, _exit()s at once, and no Python exit hook runs. Once it is
    # set, the runtime's handler goes in front of it: the worker's final
    # summary and the end of its trace are written, then PyTorch's handler
    # gets the signal as sent.
    sh = _sys.modules.get("torch.utils.data._utils.signal_handling")
    if sh is None:
        return
    orig = getattr(sh, "_set_worker_signal_handlers", None)
    if orig is None or getattr(orig, "_prof_hooked", False):
        return

    def _set_worker_signal_handlers(*args, **kwargs):
        r = orig(*args, **kwargs)
        _prof._signal_chain(_signal.SIGTERM)
        return r

    _set_worker_signal_handlers._prof_hooked = True
    sh._set_worker_signal_handlers = _set_worker_signal_handlers


def _after_fork_in_child():
    # Called right after os.fork() in the child, before multiprocessing's
    # Process._bootstrap clears its finalisers and runs its after-fork
    # registry: an entry added now runs there. Children that are not
    # multiprocessing processes never run that registry, and lose nothing
    # by the entry. Once per lineage: grandchildren inherit it.
    global _fork_hooked
    _taken["step"] = None       # the parent's summary is not the child's
    _hook_torch_worker_signals()
    mp_util = _sys.modules.get("multiprocessing.util")
    if _fork_hooked or mp_util is None:
        return
    mp_util.register_after_fork(_fork_anchor, _worker_exit_hook)
    _fork_hooked = True


def _in_mp_child():
    # A multiprocessing child that imports prof itself: forkserver and
    # spawn children import their target's module while they are prepared
    # (spawn._main, before Process._bootstrap sets parent_process(), with
    # current_process()._inheriting set), and a forkserver child leaves
    # through os._exit() like a fork child (Python 3.11-3.13: the
    # forkserver does not preload __main__, so the child is the first to
    # import prof). Registered in the after-fork registry that _bootstrap
    # runs next, as for a forked child. A child already running its target
    # (prof imported inside the task) is past that registry: its Finalize
    # is registered directly.
    global _fork_hooked
    mp = _sys.modules.get("multiprocessing")
    mp_util = _sys.modules.get("multiprocessing.util")
    if mp is None or mp_util is None or _fork_hooked:
        return
    try:
        preparing = bool(getattr(mp.current_process(), "_inheriting", False))
        running = mp.parent_process() is not None
    except Exception:
        return
    if preparing:
        mp_util.register_after_fork(_fork_anchor, _worker_exit_hook)
    elif running:
        _worker_exit_hook(None)
    else:
        return
    _fork_hooked = True


_atexit.register(_at_exit)
_os.register_at_fork(after_in_child=_after_fork_in_child)
_hook_torch_worker_signals()
_in_mp_child()


# ---------------------------------------------------------------------------
# Summaries to Python's logging

_log_state = {"on": False, "noted": False}


def _log_fallback_note():
    if not _log_state["noted"]:
        _log_state["noted"] = True
        _sys.stderr.write(
            "prof: summaries are routed to logging (PROF_SUMMARY=logging or "
            "prof.log_to_logging()), but logging has no handler for them; printing them "
            "here. Configure logging (e.g. logging.basicConfig(level=logging.INFO)) to "
            "receive them as records.\n")


def log_to_logging(on=True, logger="prof", level=None):
    """Send the summaries the runtime prints by itself (``PROF_SUMMARY_EVERY``
    periodic ones and the final one at exit) to ``logging`` instead of
    ``PROF_SUMMARY``.

    The collector thread formats a summary without the GIL and queues its
    text; it reaches the logger on the next ``prof.step()``,
    ``prof.flush()``, ``prof.summary()``, ``prof.stats()`` or
    ``prof.shutdown()`` call from Python (so a periodic summary usually
    appears one step after the step that triggered it), and the final one
    at interpreter exit. At most 64 summaries wait; older ones are dropped
    and counted in a log line.

    ``logger``: a logger name or a ``logging.Logger``; ``level``: default
    ``logging.INFO``. Each summary is one log record (multi-line for the
    text table). Also switched on by ``PROF_SUMMARY=logging`` at import.

    When logging has no handler for the logger at all (no
    ``logging.basicConfig()`` or other setup: Python would pass the record
    to its last-resort handler, which drops anything below WARNING), a
    summary is written to ``sys.stderr`` instead, with a one-time note.
    A configured logger's level and filters are obeyed as they are.
    """
    import logging

    if not on:
        _log_state["on"] = False
        _prof._set_log_sink(None)
        return
    lg = logging.getLogger(logger) if isinstance(logger, str) else logger
    lvl = logging.INFO if level is None else level

    def sink(text, kind):
        text = text.rstrip("\n")
        if not lg.hasHandlers():
            _log_fallback_note()
            _sys.stderr.write(text + "\n")
            _sys.stderr.flush()
            return
        lg.log(lvl, "%s", text, extra={"prof_kind": kind})

    _prof._set_log_sink(sink)
    _log_state["on"] = True
    # Last registered runs first: the final summary reaches logging before
    # logging's own atexit shutdown, which was registered when logging was
    # first imported, before this.
    _atexit.unregister(_at_exit)
    _atexit.register(_at_exit)


if _os.environ.get("PROF_SUMMARY", "").strip().lower() == "logging":
    log_to_logging(True)


# ---------------------------------------------------------------------------
# Building C, C++ and Cython extensions against the runtime

_here = _os.path.dirname(_os.path.abspath(__file__))


def get_include():
    """Directory holding prof.h (and, one level up, the ``prof`` package
    with its ``.pxd`` for Cython's ``cimport prof``)."""
    return _os.path.join(_here, "include")


def get_library():
    """Path of the libprof shared library this process loaded: the one an
    extension must link so its zones share this process's runtime."""
    path = _prof._library_path()
    if path:
        return _os.path.realpath(path)
    return None


def get_lib_dir():
    """Directory of ``get_library()``, for ``-L`` and an rpath."""
    lib = get_library()
    return _os.path.dirname(lib) if lib else None


def get_link_args():
    """Linker arguments for an extension that uses prof: the runtime by
    path plus an rpath to its directory, e.g.
    ``cc -shared -fPIC ext.c -I$(get_include) $(get_link_args)``."""
    lib = get_library()
    if lib is None:
        return ["-lprof"]
    d = _os.path.dirname(lib)
    unversioned = _os.path.join(d, "libprof.so")
    if _os.path.exists(unversioned):
        return ["-L" + d, "-lprof", "-Wl,-rpath," + d]
    return [lib, "-Wl,-rpath," + d]


def get_pxd_dir():
    """Directory to put on Cython's include path (``-I``) so ``cimport prof``
    finds ``prof/__init__.pxd`` (not needed when this package is on
    sys.path: Cython searches sys.path too)."""
    return _os.path.dirname(_here)


# Cross-rank summaries (docs/DISTRIBUTED.md); imports no torch by itself.
from . import distributed  # noqa: E402,F401

# PROF_TORCH=1: zone a PyTorch loop with no code change (docs/TORCH.md);
# torch is instrumented when the program imports it, never imported here.
# Asking for torch's zones asks for recording: it is switched on as by
# python -m prof (PROF=0 still wins, in the runtime).
if _os.environ.get("PROF_TORCH", "").strip().lower() not in ("", "0", "off", "false", "no"):
    from . import _torch
    if _os.environ.get("PROF", "").strip() != "0" and not enabled():
        enable(True)
    _torch.install()
