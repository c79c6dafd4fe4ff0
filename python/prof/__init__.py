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

import os as _os

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
)

__version__ = _prof.__version__
version = __version__

__all__ = [
    "zone", "cuda_zone", "step", "counter", "mark", "flush", "reset", "enable",
    "enabled", "shutdown", "thread_name", "stats", "counters", "summary",
    "ProfilingContext", "log_to_logging", "get_include", "get_lib_dir",
    "get_library", "get_link_args", "version", "__version__",
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
        share of wall time per stage, nested as a tree."""
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
# Summaries to Python's logging

_log_atexit_registered = False


def _atexit_final_summary():
    # Runs before the interpreter finalises: the final summary is formatted
    # now (prof_shutdown) and handed to logging while logging still works.
    if _log_state["on"]:
        shutdown()
        _prof._drain_log()


_log_state = {"on": False}


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
    """
    import logging

    global _log_atexit_registered
    if not on:
        _log_state["on"] = False
        _prof._set_log_sink(None)
        return
    lg = logging.getLogger(logger) if isinstance(logger, str) else logger
    lvl = logging.INFO if level is None else level

    def sink(text, kind):
        lg.log(lvl, "%s", text.rstrip("\n"), extra={"prof_kind": kind})

    _prof._set_log_sink(sink)
    _log_state["on"] = True
    if not _log_atexit_registered:
        import atexit
        # Registered after `import logging`, so it runs before logging's own
        # atexit shutdown (atexit runs handlers last-in, first-out).
        atexit.register(_atexit_final_summary)
        _log_atexit_registered = True


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
