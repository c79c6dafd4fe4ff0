"""prof.zone as a context manager and a decorator; nesting, self time,
exceptions, stats contents."""
import json
import time

import pytest

import prof
from prof import _prof

from conftest import busy

# Lower bounds are exact (a sleep never returns early); upper bounds are the
# test's own clock reads around the zones, which a stall lengthens as much
# as the zones (1% and 0.1 ms for two clocks: prof's counter and Python's).


def around_ms(seconds):
    return seconds * 1e3 * 1.01 + 0.1


def state():
    return _prof._debug_state()


def test_context_manager_counts_and_returns_zone():
    z = prof.zone("cm")
    assert isinstance(z, prof.Zone)
    assert z.name == "cm"
    assert repr(z) == "prof.zone('cm')"
    for _ in range(10):
        with prof.zone("cm") as got:
            assert got is z
    st = prof.stats("cm")
    assert st["count"] == 10
    assert st["depth"] == 0 and st["parent"] is None and st["gpu"] is False


def test_same_name_same_object():
    assert prof.zone("same") is prof.zone("same")
    assert prof.zone("same") is prof.zone("".join(["sa", "me"]))


def test_durations_match_sleeps():
    spans = []
    for ms in (10, 20, 30):
        t0 = time.monotonic()
        with prof.zone("sleep"):
            time.sleep(ms / 1000)
        spans.append(time.monotonic() - t0)
    st = prof.stats("sleep")
    assert st["count"] == 3
    assert st["min_ms"] >= 10.0
    assert st["max_ms"] >= 30.0
    assert st["min_ms"] <= around_ms(spans[0])
    assert st["max_ms"] <= around_ms(max(spans))
    assert st["total_ms"] >= 60.0
    assert st["total_ms"] <= around_ms(sum(spans))
    assert abs(st["avg_ms"] - st["total_ms"] / 3) < 1e-6 * st["total_ms"] + 1e-9
    # Percentiles: within 1% of real values, ordered, inside [min, max].
    assert st["min_ms"] * 0.99 <= st["p50_ms"] <= st["p95_ms"] <= st["p99_ms"] <= st["max_ms"] * 1.01
    assert st["p50_ms"] >= 20.0 * 0.99
    assert 0.0 < st["wall_share"] <= 1.0
    assert st["self_ms"] == pytest.approx(st["total_ms"])


def test_stats_dict_keys_and_types():
    with prof.zone("keys"):
        pass
    all_stats = prof.stats()
    assert "keys" in all_stats
    row = all_stats["keys"]
    assert set(row) == {"count", "total_ms", "self_ms", "avg_ms", "min_ms", "max_ms",
                        "p50_ms", "p95_ms", "p99_ms", "wall_share", "parent", "depth", "gpu",
                        "lossy", "cpu_ms", "peak_rise_bytes"}
    assert row["lossy"] is False
    # Sampled on-CPU time of its self time: a float, or None where not measured.
    assert row["cpu_ms"] is None or isinstance(row["cpu_ms"], float)
    assert row["peak_rise_bytes"] is None or isinstance(row["peak_rise_bytes"], int)
    for k in ("total_ms", "self_ms", "avg_ms", "min_ms", "max_ms", "p50_ms", "p95_ms",
              "p99_ms", "wall_share"):
        assert isinstance(row[k], float), k
    assert isinstance(row["count"], int) and isinstance(row["depth"], int)
    with pytest.raises(KeyError):
        prof.stats("never-recorded-stage")


def test_nesting_and_self_time():
    t0 = time.monotonic()
    for _ in range(3):
        with prof.zone("outer"):
            busy(0.010)                    # outer's own work
            with prof.zone("inner"):
                time.sleep(0.020)
    spans = time.monotonic() - t0
    s = prof.stats()
    outer, inner = s["outer"], s["inner"]
    assert inner["parent"] == "outer" and inner["depth"] == 1
    assert outer["parent"] is None and outer["depth"] == 0
    assert list(s).index("outer") < list(s).index("inner")   # tree order
    assert outer["total_ms"] >= inner["total_ms"] + 30.0
    assert outer["self_ms"] == pytest.approx(outer["total_ms"] - inner["total_ms"], rel=1e-6,
                                             abs=1e-3)
    assert 30.0 <= outer["self_ms"] <= around_ms(spans) - inner["total_ms"]
    assert inner["self_ms"] == pytest.approx(inner["total_ms"])


def test_exception_ends_zone_and_propagates():
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with prof.zone("raises"):
            time.sleep(0.005)
            raise Boom()
    assert state()["open"] == 0 and state()["depth"] == 0
    st = prof.stats("raises")
    assert st["count"] == 1 and st["total_ms"] >= 5.0
    # The next zone is top level again, not a child of the one that raised.
    with prof.zone("after_raise"):
        pass
    assert prof.stats("after_raise")["parent"] is None


def test_exit_is_not_swallowing():
    z = prof.zone("noswallow")
    z.__enter__()
    assert z.__exit__(ValueError, ValueError("x"), None) is None


def test_exit_without_enter_raises():
    with pytest.raises(RuntimeError, match="without a matching __enter__"):
        prof.zone("lonely").__exit__(None, None, None)


def test_decorator_basics():
    @prof.zone("deco.add")
    def add(a, b=1, *, c=0):
        """Adds."""
        return a + b + c

    assert isinstance(add, prof.ZoneWrapper)
    assert add(1) == 2 and add(1, 2) == 3 and add(1, b=5, c=1) == 7
    assert add.__name__ == "add" and add.__doc__ == "Adds."
    assert add.__wrapped__(1) == 2
    assert add.zone is prof.zone("deco.add")
    assert prof.stats("deco.add")["count"] == 3


def test_decorator_on_methods():
    class C:
        def __init__(self):
            self.v = 3

        @prof.zone("deco.method")
        def get(self, x):
            return self.v + x

        @staticmethod
        @prof.zone("deco.static")
        def st(x):
            return x * 2

    c = C()
    assert c.get(1) == 4
    assert C.get(c, 2) == 5
    assert C.st(4) == 8 and c.st(5) == 10
    assert prof.stats("deco.method")["count"] == 2
    assert prof.stats("deco.static")["count"] == 2


def test_decorator_recursion():
    @prof.zone("fib")
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    assert fib(12) == 144
    st = prof.stats("fib")
    assert st["count"] == 465          # calls of fib(12)
    assert st["depth"] == 0
    assert state()["depth"] == 0


def test_decorator_exception():
    @prof.zone("deco.raise")
    def bad():
        raise KeyError("k")

    with pytest.raises(KeyError):
        bad()
    assert prof.stats("deco.raise")["count"] == 1
    assert state()["depth"] == 0


def test_recursive_with_on_one_object():
    z = prof.zone("rec")

    def walk(n):
        with z:
            if n:
                walk(n - 1)

    walk(20)
    assert prof.stats("rec")["count"] == 21
    assert state() == {"open": 0, "depth": 0, "dead": 0, "dead_pending": 0}


def test_summary_text_and_json():
    with prof.zone("sum.a"):
        with prof.zone("sum.b"):
            pass
    prof.counter("sum.c", 2.5)
    text = prof.summary()
    assert "sum.a" in text and "sum.b" in text and "p95" in text
    doc = json.loads(prof.summary("json"))
    names = [s["name"] for s in doc["total"]["stages"]]
    assert "sum.a" in names and "sum.b" in names
    assert "sum.a" in prof.summary(format="text")
    with pytest.raises(ValueError, match="format"):
        prof.summary("xml")


def test_counters_marks_steps():
    for v in (1.0, 3.0, 2.0):
        prof.counter("loss", v)
    prof.mark("epoch")
    c = prof.counters()["loss"]
    assert c == {"count": 3, "last": 2.0, "min": 1.0, "max": 3.0, "avg": 2.0}
    n = prof.step()
    assert prof.step() == n + 1


def test_counter_accepts_number_likes():
    class F:
        def __float__(self):
            return 4.0

    prof.counter("numlike", F())
    prof.counter("numlike", 7)
    assert prof.counters()["numlike"]["max"] == 7.0


def test_reset_forgets():
    with prof.zone("gone"):
        pass
    prof.reset()
    assert "gone" not in prof.stats()


def test_enable_toggle():
    prof.enable(False)
    assert prof.enabled() is False
    with prof.zone("while_off"):
        pass
    assert prof.enable() is True
    with prof.zone("while_on"):
        pass
    s = prof.stats()
    assert "while_off" not in s and s["while_on"]["count"] == 1


def test_zone_begun_off_ended_on_is_ignored():
    prof.enable(False)
    z = prof.zone("straddle")
    z.__enter__()
    prof.enable(True)
    z.__exit__(None, None, None)
    assert "straddle" not in prof.stats()
    assert state()["open"] == 0


def test_version_and_helpers():
    import os
    assert prof.__version__ == prof.version == prof.runtime_version()
    inc = prof.get_include()
    assert os.path.exists(os.path.join(inc, "prof.h"))
    assert os.path.exists(os.path.join(inc, "prof_impl.h"))
    assert os.path.exists(os.path.join(inc, "prof_version.h"))
    lib = prof.get_library()
    assert lib and os.path.exists(lib) and "libprof" in os.path.basename(lib)
    assert prof.get_lib_dir() == os.path.dirname(lib)
    assert any("-Wl,-rpath," in a for a in prof.get_link_args())
    assert os.path.exists(os.path.join(prof.get_pxd_dir(), "prof", "__init__.pxd"))


def test_zone_through_exit_stack_and_the_type():
    """__enter__ and __exit__ are bound once per zone (no method objects
    per block) and still work as methods: looked up on the type and called
    with the zone first, as contextlib.ExitStack does."""
    import contextlib

    with contextlib.ExitStack() as st:
        st.enter_context(prof.zone("es.outer"))
        with prof.zone("es.inner"):
            pass
    z = prof.zone("es.type")
    assert type(z).__enter__(z) is z
    assert type(z).__exit__(z, None, None, None) is None
    assert z.__enter__ is z.__enter__ and z.__exit__ is prof.zone("es.type").__exit__
    with pytest.raises(TypeError):
        type(z).__enter__(object())
    with pytest.raises(TypeError):
        z.__enter__(1)
    s = prof.stats()
    assert s["es.inner"]["parent"] == "es.outer" and s["es.outer"]["count"] == 1
    assert s["es.type"]["count"] == 1
    assert state()["open"] == 0
