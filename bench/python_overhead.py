#!/usr/bin/env python3
"""Cost of a prof zone from Python, against baselines measured in this run.

Every figure is nanoseconds per zone with the empty loop's cost taken off
(for the decorator: the undecorated call's cost taken off), the minimum over
several interleaved repeats (the least-disturbed run of each).

  empty        `for _ in r: pass` (subtracted from the rest)
  nullctx      `with NULL:` on a prebuilt C no-op context manager
               (prof._prof._NULL: __enter__/__exit__ in C doing nothing):
               the with-statement protocol's own cost
  nullcall     `with nullzone("x"):`, a C function returning that object:
               the protocol plus the call prof.zone("x") also makes
  zone         `with prof.zone("x"):`, recording
  zone_off     the same with recording off
  decorator    a call of @prof.zone("x") def f(): pass, minus a plain call
  track        `with ctx.track("x"):` on ProfilingContext(enabled=True)
  track_off    the same on ProfilingContext(enabled=False)
  pytracker    `with tracker.track("x"):` a pure-Python perf_counter +
               dict-of-lists tracker, as a contextlib.contextmanager
  pyclass      the same tracker written as a class with __enter__/__exit__
  record_function      torch.profiler.record_function("x"), no profiler
  record_function_on   the same inside torch.profiler.profile()

The last line has a fixed form for scripts:
  prof-bench python: zone=<ns> nullctx=<ns> ratio=<x> pytracker=<ns> record_function=<ns>
where ratio = zone / nullctx and record_function is the profiler-on
figure (what a user pays when they actually collect; "n/a" without torch).

A second line gives a zone's cost on the asyncio path (four tasks taking
turns, each zone spanning one await):
  prof-bench python-async: zone=<ns> ...

A third line compares with the C floor, `with` on a C no-op context
manager made by a C call (nullcall: the same two calls `with
prof.zone("x")` makes), and gives the decorator's cost over a plain call:
  prof-bench python-floor: zone=<ns> nullcall=<ns> ratio=<x> decorator=<ns>

Run: PYTHONPATH=build/python python3 bench/python_overhead.py [--quick]

Old against new, alternated in one run (each round runs this script once
per build, in a fresh interpreter, the builds' order swapped every round):
  PYTHONPATH=build/python python3 bench/python_overhead.py --quick \
      --compare OLD_BUILD/python [--rounds 4]
prints each round's python-floor line per build, then the medians.

Instruction counts (load-independent), per block of one loop:
  PYTHONPATH=build/python valgrind --tool=callgrind --separate-threads=yes \
      python3 bench/python_overhead.py --loop zone 40000
(zone, nullcall, decorator, plain; see docs/BENCHMARKS.md, "Issue 30").
"""

import os
import sys
import time

# Before the runtime loads: big enough rings that the collector keeps up
# (a full ring drops records, which would make zones look cheaper), and no
# summary printed after the figures.
os.environ.setdefault("PROF", "1")
os.environ.setdefault("PROF_BUFFER", "1M")
os.environ.setdefault("PROF_SUMMARY", "off")

import contextlib  # noqa: E402
from collections import defaultdict  # noqa: E402
from time import perf_counter  # noqa: E402

import prof  # noqa: E402
from prof import _prof  # noqa: E402

QUICK = "--quick" in sys.argv
N = 50_000 if QUICK else 200_000
REPEATS = 3 if QUICK else 7


class PyTracker:
    """The hand-written profiler prof replaces."""

    def __init__(self):
        self.timings = defaultdict(list)

    @contextlib.contextmanager
    def track(self, name):
        t0 = perf_counter()
        try:
            yield
        finally:
            self.timings[name].append(perf_counter() - t0)


class _Timer:
    __slots__ = ("timings", "name", "t0")

    def __init__(self, timings, name):
        self.timings = timings
        self.name = name

    def __enter__(self):
        self.t0 = perf_counter()
        return self

    def __exit__(self, *exc):
        self.timings[self.name].append(perf_counter() - self.t0)
        return False


class PyClassTracker:
    def __init__(self):
        self.timings = defaultdict(list)

    def track(self, name):
        return _Timer(self.timings, name)


def loop_empty(n):
    for _ in range(n):
        pass


def loop_nullctx(n):
    null = _prof._NULL
    for _ in range(n):
        with null:
            pass


def loop_nullcall(n):
    nullzone = _prof._null_track
    for _ in range(n):
        with nullzone("x"):
            pass


def loop_zone(n):
    for _ in range(n):
        with prof.zone("x"):
            pass


def loop_call_plain(n):
    def f():
        pass
    for _ in range(n):
        f()


def loop_call_decorated(n):
    @prof.zone("deco")
    def f():
        pass
    for _ in range(n):
        f()


CTX_ON = prof.ProfilingContext(enabled=True)
CTX_OFF = prof.ProfilingContext(enabled=False)


def loop_track(n, ctx=CTX_ON):
    for _ in range(n):
        with ctx.track("x"):
            pass


def loop_track_off(n, ctx=CTX_OFF):
    for _ in range(n):
        with ctx.track("x"):
            pass


def loop_pytracker(n):
    t = PyTracker()
    for _ in range(n):
        with t.track("x"):
            pass


def loop_pyclass(n):
    t = PyClassTracker()
    for _ in range(n):
        with t.track("x"):
            pass


def async_per_zone(n, make):
    """ns per `with make("x"):` block in four asyncio tasks that take turns
    (each block awaits once, so every zone begins and ends right after
    another task's: the task-switching path of docs/PYTHON.md)."""
    import asyncio

    async def worker(k):
        for _ in range(k):
            with make("x"):
                await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*(worker(n // 4) for _ in range(4)))

    t0 = time.perf_counter_ns()
    asyncio.run(main())
    return (time.perf_counter_ns() - t0) / n


def measure(fn, n):
    t0 = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t0) / n


def run(cases, n, repeats, setup=None):
    """Interleave the cases so drift hits all of them alike; keep the min."""
    best = {name: float("inf") for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            if setup:
                setup()
            best[name] = min(best[name], measure(fn, n))
    return best


def compare(old_path, rounds):
    """Run this script (without --compare) under the old build's PYTHONPATH
    and under this one's, alternately, and print the floor lines."""
    import re
    import statistics
    import subprocess

    new_path = os.path.dirname(os.path.dirname(os.path.abspath(prof.__file__)))
    builds = {"old": os.path.abspath(old_path), "new": new_path}
    args = [a for a in sys.argv[1:] if a in ("--quick",)]
    got = {"old": [], "new": []}
    for r in range(rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for label in order:
            env = dict(os.environ, PYTHONPATH=builds[label], PROF_BENCH_NO_TORCH="1")
            out = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                                 env=env, capture_output=True, text=True, check=True).stdout
            line = next(ln for ln in out.splitlines() if ln.startswith("prof-bench python-floor:"))
            fields = dict(kv.split("=") for kv in re.findall(r"\w+=[\d.]+", line))
            got[label].append({k: float(v) for k, v in fields.items()})
            print(f"round {r + 1} {label}: {line}", flush=True)
    for label in ("old", "new"):
        med = {k: statistics.median(d[k] for d in got[label]) for k in got[label][0]}
        print(f"median {label} ({builds[label]}): zone={med['zone']:.0f} "
              f"nullcall={med['nullcall']:.0f} ratio={med['ratio']:.2f} "
              f"decorator={med['decorator']:.0f}")


def loop_only(case, n):
    """--loop CASE N: only the loop, for instruction counts under callgrind
    (zone, nullcall, decorator or plain: one block or call per iteration)."""
    loops = {"zone": loop_zone, "nullcall": loop_nullcall,
             "decorator": loop_call_decorated, "plain": loop_call_plain}
    loops[case](n)


def main():
    if "--loop" in sys.argv:
        i = sys.argv.index("--loop")
        loop_only(sys.argv[i + 1], int(sys.argv[i + 2]))
        return
    if "--compare" in sys.argv:
        i = sys.argv.index("--compare")
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 4
        compare(sys.argv[i + 1], rounds)
        return
    if not prof.enabled():
        print("note: recording is off (PROF=0?); zone figures are the off path",
              file=sys.stderr)
    # Warm up: interning, thread attach, ring pages.
    loop_zone(1000)
    loop_call_decorated(1000)
    loop_track(1000)

    def reset_between():
        # Keeps the stats table from growing without bound between repeats;
        # costs nothing inside the timed loops.
        prof.flush()

    cases = {
        "empty": loop_empty,
        "nullctx": loop_nullctx,
        "nullcall": loop_nullcall,
        "zone": loop_zone,
        "call_plain": loop_call_plain,
        "decorator_call": loop_call_decorated,
        "track": loop_track,
        "track_off": loop_track_off,
        "pytracker": loop_pytracker,
        "pyclass": loop_pyclass,
    }
    raw = run(cases, N, REPEATS, setup=reset_between)

    # The off path: same loops with recording switched off.
    prof.enable(False)
    raw_off = run({"zone": loop_zone, "decorator_call": loop_call_decorated},
                  N, REPEATS)
    prof.enable(True)

    empty = raw["empty"]
    net = {k: v - empty for k, v in raw.items() if k not in ("empty", "call_plain",
                                                            "decorator_call")}
    net["decorator"] = raw["decorator_call"] - raw["call_plain"]
    net["zone_off"] = raw_off["zone"] - empty
    net["decorator_off"] = raw_off["decorator_call"] - raw["call_plain"]

    # torch.profiler.record_function, off and on.
    rf = rf_on = None
    try:
        if os.environ.get("PROF_BENCH_NO_TORCH"):
            raise ImportError("--compare leaves torch out")
        import torch  # noqa: F401
        from torch.profiler import profile, record_function, ProfilerActivity

        def loop_rf(n):
            for _ in range(n):
                with record_function("x"):
                    pass

        n_rf = max(N // 10, 5000)
        loop_rf(1000)
        rf = min(measure(loop_rf, n_rf) for _ in range(REPEATS)) - empty
        with profile(activities=[ProfilerActivity.CPU]):
            loop_rf(1000)
            rf_on = min(measure(loop_rf, n_rf) for _ in range(max(REPEATS // 2, 2))) - empty
    except ImportError:
        pass
    except Exception as e:  # a torch that cannot profile here: say so, go on
        print(f"record_function: {type(e).__name__}: {e}", file=sys.stderr)

    prof.flush()
    dropped = None
    s = prof.summary("json")
    try:
        import json
        dropped = json.loads(s).get("dropped")
    except Exception:
        pass

    print(f"python {sys.version.split()[0]}, prof {prof.__version__}, N={N}, "
          f"repeats={REPEATS}, empty loop {empty:.1f} ns/iter, dropped={dropped}")
    print(f"{'case':<22}{'ns/zone':>10}{'x nullctx':>11}")
    order = ["nullctx", "nullcall", "zone", "zone_off", "decorator", "decorator_off",
             "track", "track_off", "pyclass", "pytracker"]
    for k in order:
        print(f"{k:<22}{net[k]:>10.1f}{net[k] / net['nullctx']:>11.2f}")
    if rf is not None:
        print(f"{'record_function':<22}{rf:>10.1f}{rf / net['nullctx']:>11.2f}")
    if rf_on is not None:
        print(f"{'record_function_on':<22}{rf_on:>10.1f}{rf_on / net['nullctx']:>11.2f}")
    print(f"decorator / zone = {net['decorator'] / net['zone']:.2f}, "
          f"track / zone = {net['track'] / net['zone']:.2f}, "
          f"pytracker / zone = {net['pytracker'] / net['zone']:.1f}"
          + (f", record_function_on / zone = {rf_on / net['zone']:.1f}" if rf_on else ""))

    # Zones across awaits: the same loop of tasks with a no-op context
    # manager from a C call (nullcall's) and with prof.zone.
    n_async = max(N // 10, 5000)
    async_null = min(async_per_zone(n_async, _prof._null_track) for _ in range(REPEATS))
    async_zone = min(async_per_zone(n_async, prof.zone) for _ in range(REPEATS))
    print(f"prof-bench python-async: zone={async_zone - async_null:.0f} "
          f"(per zone whose task took turns with three others, over a no-op context "
          f"manager: {async_null:.0f} ns per block of the loop)")

    print(f"prof-bench python-floor: zone={net['zone']:.1f} nullcall={net['nullcall']:.1f} "
          f"ratio={net['zone'] / net['nullcall']:.2f} decorator={net['decorator']:.1f}")

    rf_txt = f"{rf_on:.0f}" if rf_on is not None else "n/a"
    print(f"prof-bench python: zone={net['zone']:.0f} nullctx={net['nullctx']:.0f} "
          f"ratio={net['zone'] / net['nullctx']:.2f} pytracker={net['pytracker']:.0f} "
          f"record_function={rf_txt}")


if __name__ == "__main__":
    main()
