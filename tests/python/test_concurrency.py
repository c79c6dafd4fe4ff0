"""Threads, generators and coroutines crossing zones.

What prof promises here (docs/PYTHON.md, "Threads, generators, async"):
- every Python thread records into its own ring; a Zone object may be used
  on many threads at once;
- a zone that spans a `yield` or an `await` stays open on its thread while
  the generator or task is suspended: it measures wall time, and zones that
  other code opens on that thread meanwhile are counted as its children;
- zones that end out of order (interleaved tasks) are all recorded with
  their exact durations, and the thread's nesting is repaired so later zones
  are placed correctly;
- a zone must end on the thread that began it; otherwise __exit__ raises
  RuntimeError.
"""
import asyncio
import json
import threading
import time

import pytest

import prof
from prof import _prof

from conftest import run_threads


def clean_state():
    return _prof._debug_state() == {"open": 0, "depth": 0, "dead": 0, "dead_pending": 0}


def test_threads_exact_counts():
    n_threads, per = 4, 2000
    z = prof.zone("thr.shared")          # one object shared by every thread
    barrier = threading.Barrier(n_threads)

    def work(i):
        prof.thread_name(f"worker-{i}")
        barrier.wait(timeout=60)
        for _ in range(per):
            with z:
                with prof.zone("thr.inner"):
                    pass
        assert clean_state()

    run_threads(work, [(i,) for i in range(n_threads)])
    s = prof.stats()
    assert s["thr.shared"]["count"] == n_threads * per
    assert s["thr.inner"]["count"] == n_threads * per
    assert s["thr.inner"]["parent"] == "thr.shared"


def test_threads_overlapping_same_object_with_sleeps():
    z = prof.zone("thr.sleep")

    def work():
        for _ in range(3):
            with z:
                time.sleep(0.01)         # releases the GIL: uses interleave
        assert clean_state()

    run_threads(work, [()] * 3)
    st = prof.stats("thr.sleep")
    assert st["count"] == 9 and st["min_ms"] >= 10.0


def _dropped():
    return json.loads(prof.summary("json"))["dropped"]


def test_cross_thread_exit_refused_counted_and_freed():
    # docs/CONFIG.md: a zone ended on another thread is refused, counted
    # with the dropped records, and its level freed on the thread that
    # began it; the ending thread learns of it (RuntimeError), as with
    # prof.cuda_zone.
    with prof.zone("xthread.before"):
        pass
    dropped0 = _dropped()
    z = prof.zone("xthread")
    z.__enter__()

    def other():
        with pytest.raises(RuntimeError, match="thread that began it"):
            z.__exit__(None, None, None)
        st = _prof._debug_state()          # the refusal left this thread alone
        assert st["open"] == 0 and st["depth"] in (-1, 0) and st["dead"] == 0

    run_threads(other, [()])
    with pytest.raises(RuntimeError):    # ended already: nothing to end
        z.__exit__(None, None, None)
    with prof.zone("xthread.after"):     # the owner's level was given back
        with prof.zone("xthread.child"):
            pass
    assert clean_state()
    s = prof.stats()
    assert "xthread" not in s
    assert s["xthread.after"]["parent"] is None and s["xthread.after"]["depth"] == 0
    assert s["xthread.child"]["parent"] == "xthread.after"
    assert _dropped() - dropped0 == 1


def test_generator_zone_spans_yields_and_nests_consumer():
    def produce():
        with prof.zone("gen.produce"):
            for i in range(3):
                yield i

    for _ in produce():
        with prof.zone("gen.consume"):
            time.sleep(0.005)
    s = prof.stats()
    assert s["gen.produce"]["count"] == 1
    assert s["gen.consume"]["count"] == 3
    # The consumer ran while the generator's zone was open on this thread.
    assert s["gen.consume"]["parent"] == "gen.produce"
    assert s["gen.produce"]["total_ms"] >= 15.0
    assert clean_state()


def test_abandoned_generator_ends_zone_when_closed():
    def produce():
        with prof.zone("gen.abandoned"):
            yield 1
            yield 2

    g = produce()
    next(g)
    assert _prof._debug_state()["open"] == 1
    g.close()                             # GeneratorExit runs __exit__
    assert clean_state()
    assert prof.stats("gen.abandoned")["count"] == 1


def test_interleaved_generators_out_of_order():
    def gen(name):
        with prof.zone(name):
            yield
            yield

    a, b = gen("gen.a"), gen("gen.b")
    next(a)                               # open a
    next(b)                               # open b inside a
    with pytest.raises(StopIteration):
        next(a); next(a)                  # noqa: E702  close a first (out of order)
    st = _prof._debug_state()             # the thread goes on inside b
    assert st["open"] == 1 and st["depth"] == 2 and st["dead"] == 0
    with prof.zone("gen.mid"):            # still nested under b
        pass
    with pytest.raises(StopIteration):
        next(b); next(b)                  # noqa: E702
    assert clean_state()                  # depth fell through a's freed slot
    with prof.zone("gen.top"):
        pass
    s = prof.stats()
    assert s["gen.a"]["count"] == s["gen.b"]["count"] == 1
    assert s["gen.top"]["parent"] is None and s["gen.top"]["depth"] == 0


def test_asyncio_interleaved_tasks():
    async def task(name, d):
        with prof.zone(name):
            await asyncio.sleep(d)

    async def main():
        await asyncio.gather(task("aio.short", 0.02), task("aio.long", 0.04),
                             task("aio.mid", 0.03))

    t0 = time.monotonic()
    asyncio.run(main())
    spans_ms = (time.monotonic() - t0) * 1e3
    assert clean_state()
    s = prof.stats()
    assert s["aio.short"]["total_ms"] >= 20.0
    assert s["aio.mid"]["total_ms"] >= 30.0
    assert s["aio.long"]["total_ms"] >= 40.0
    # Inside the test's own reads around the run (1% and 0.1 ms: two clocks).
    assert s["aio.long"]["total_ms"] <= spans_ms * 1.01 + 0.1
    with prof.zone("aio.after"):
        pass
    assert prof.stats("aio.after")["parent"] is None


def test_self_time_after_interleaved_tasks():
    # Zones of interleaved tasks end out of order; their time must not be
    # taken from the next zone at the same depth as if they were its children.
    async def task(name, d):
        with prof.zone(name):
            await asyncio.sleep(d)

    async def main():
        await asyncio.gather(task("il.a", 0.02), task("il.b", 0.04))

    asyncio.run(main())
    for _ in range(3):
        with prof.zone("il.later"):      # no children at all
            time.sleep(0.005)
    st = prof.stats("il.later")
    assert st["self_ms"] == pytest.approx(st["total_ms"])


def test_decorated_coroutine_spans_await():
    @prof.zone("aio.deco")
    async def fetch(x):
        await asyncio.sleep(0.01)
        return x * 2

    assert asyncio.run(fetch(21)) == 42
    assert fetch.__name__ == "fetch"
    st = prof.stats("aio.deco")
    assert st["count"] == 1 and st["total_ms"] >= 10.0
    assert clean_state()


def test_decorated_generator_spans_iteration():
    @prof.zone("gen.deco")
    def numbers(n):
        for i in range(n):
            time.sleep(0.002)
            yield i
        return "done"

    assert list(numbers(5)) == [0, 1, 2, 3, 4]
    st = prof.stats("gen.deco")
    assert st["count"] == 1 and st["total_ms"] >= 10.0
    assert clean_state()


def test_decorated_async_generator():
    @prof.zone("agen.deco")
    async def ticks(n):
        for i in range(n):
            await asyncio.sleep(0.002)
            yield i

    async def main():
        return [i async for i in ticks(3)]

    assert asyncio.run(main()) == [0, 1, 2]
    assert prof.stats("agen.deco")["count"] == 1
    assert clean_state()


def test_thread_exit_with_open_zone_does_not_leak_state():
    def leaves_open():
        prof.zone("left.open").__enter__()

    run_threads(leaves_open, [()])
    assert clean_state()                  # this thread is unaffected
