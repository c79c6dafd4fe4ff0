"""Bad arguments, ProfilingContext, disabled mode, the logging route,
cuda_zone without a GPU."""
import json

import sys

import pytest

import prof
from prof import _prof

from conftest import run_py


# ---------------------------------------------------------------------------
# Bad arguments: clear Python errors, nothing recorded, nothing crashes

@pytest.mark.parametrize("bad", [1, 2.5, None, b"bytes", bytearray(b"x"), ["x"], object()])
def test_non_string_names_raise_typeerror(bad):
    with pytest.raises(TypeError, match="must be a str"):
        prof.zone(bad)
    with pytest.raises(TypeError, match="must be a str"):
        prof.counter(bad, 1.0)
    with pytest.raises(TypeError, match="must be a str"):
        prof.mark(bad)
    with pytest.raises(TypeError, match="must be a str"):
        prof.thread_name(bad)
    with pytest.raises(TypeError, match="must be a str"):
        prof.cuda_zone(bad)


def test_lone_surrogate_is_a_unicode_error_naming_prof():
    with pytest.raises(UnicodeEncodeError) as info:
        prof.zone("bad\udc80name")
    assert isinstance(info.value, ValueError)          # catchable as ValueError
    assert "prof" in " ".join(getattr(info.value, "__notes__", []))
    with pytest.raises(ValueError):
        prof.counter("\ud800", 1.0)
    with pytest.raises(ValueError):
        prof.thread_name("\ud800")


def test_nul_in_name():
    with pytest.raises(ValueError, match="NUL"):
        prof.zone("a\0b")
    with pytest.raises(ValueError, match="NUL"):
        prof.thread_name("a\0b")


def test_huge_names_rejected_with_the_limit():
    with pytest.raises(ValueError, match=r"1048576 bytes .* limit is 1024"):
        prof.zone("x" * (1 << 20))
    # Counted in UTF-8 bytes: 400 three-byte characters are over the limit.
    with pytest.raises(ValueError, match="1200 bytes"):
        prof.zone("\u20ac" * 400)
    at_limit = "y" * _prof.NAME_MAX_BYTES
    with prof.zone(at_limit):
        pass
    assert prof.stats(at_limit)["count"] == 1


def test_non_ascii_names_round_trip():
    name = "前向 forward ✓"
    with prof.zone(name):
        pass
    assert prof.stats()[name]["count"] == 1
    assert name in prof.summary()


def test_str_subclass_name():
    class S(str):
        def __hash__(self):
            raise AssertionError("prof must not hash through the subclass")

    with prof.zone(S("subclassed")):
        pass
    assert prof.stats("subclassed")["count"] == 1


def test_str_subclass_after_plain_name_keeps_the_zone():
    # A subclass of a name already cached must find the cached Zone, not
    # replace it (which freed the Zone that the next prof.zone(name) of the
    # plain str returned: another stage's zone, or freed memory).
    class S(str):
        pass

    name = "subclass_after_" + str(len(sys.argv) + 12344)   # one str object
    first = id(prof.zone(name))
    prof.zone(name)                       # now in the by-address table
    assert prof.zone(S(name)) is prof.zone(name)
    others = [prof.zone("subclass_other_%d" % i) for i in range(1000)]
    z = prof.zone(name)
    assert id(z) == first and repr(z) == repr(prof.zone(S(name))), (repr(z), len(others))
    with z:
        pass
    assert prof.stats(name)["count"] == 1


def test_bad_counter_values_and_arity():
    with pytest.raises(TypeError):
        prof.counter("c", "not a number")
    with pytest.raises(TypeError):
        prof.counter("c")
    with pytest.raises(TypeError):
        prof.counter("c", 1, 2)


def test_decorating_a_non_callable():
    with pytest.raises(TypeError, match="decorates callables"):
        prof.zone("z")(42)
    with pytest.raises(TypeError):
        prof.zone("z")(print, extra=1)


def test_bad_stream():
    with pytest.raises(TypeError, match="torch.cuda.Stream"):
        prof.cuda_zone("k", "stream")


def test_many_distinct_names():
    for i in range(2000):
        with prof.zone(f"dyn.{i}"):
            pass
    s = prof.stats()
    assert all(f"dyn.{i}" in s for i in range(0, 2000, 97))


# ---------------------------------------------------------------------------
# cuda_zone: without a CUDA driver only the CPU side is timed

def test_cuda_zone_cpu_side_without_gpu():
    class FakeTorchStream:
        cuda_stream = 0

    for stream in (None, 0, FakeTorchStream()):
        with prof.cuda_zone("cz", stream) as cz:
            assert isinstance(cz, prof.CudaZone)
    assert prof.stats("cz")["count"] == 3
    z = prof.cuda_zone("cz.once")
    with z:
        with pytest.raises(RuntimeError, match="already open"):
            z.__enter__()
    with pytest.raises(RuntimeError):
        z.__exit__(None, None, None)
    assert _prof._debug_state()["depth"] == 0


# ---------------------------------------------------------------------------
# ProfilingContext

def test_profiling_context_enabled():
    ctx = prof.ProfilingContext(enabled=True)
    assert prof.enabled()
    assert ctx.track("pc.forward") is prof.zone("pc.forward")
    for _ in range(4):
        with ctx.track("pc.forward"):
            with ctx.track("pc.inner"):
                pass
        ctx.counter("pc.loss", 0.5)
        ctx.step()

    @ctx.track("pc.decorated")
    def f():
        return 7

    assert f() == 7
    table = ctx.summary()
    for col in ("p50", "p95", "p99", "self", "pc.forward", "pc.inner"):
        assert col in table
    s = ctx.stats()
    assert s["pc.forward"]["count"] == 4 and s["pc.inner"]["parent"] == "pc.forward"
    assert ctx.stats("pc.decorated")["count"] == 1
    assert json.loads(ctx.summary("json"))["total"]["stages"]
    ctx.reset()
    assert "pc.forward" not in prof.stats()


def test_profiling_context_disabled_is_a_shared_noop():
    ctx = prof.ProfilingContext(enabled=False)
    t = ctx.track("pc.off")
    assert t is _prof._NULL and ctx.track("other") is t
    with t as got:
        assert got is t
    with pytest.raises(ZeroDivisionError):
        with ctx.track("pc.off"):
            1 / 0

    def g():
        return 1

    assert ctx.track("pc.off")(g) is g          # decorator returns the function
    with pytest.raises(TypeError):
        ctx.track(5)                            # same checks as when enabled
    assert ctx.summary() == "" and ctx.stats() == {} and ctx.step() == 0
    with pytest.raises(KeyError):
        ctx.stats("pc.off")
    assert "pc.off" not in prof.stats()


# ---------------------------------------------------------------------------
# Disabled mode and PROF=0 (the environment is read once: child processes)

def test_prof_0_wins_over_enable():
    out = run_py("""
        import prof
        assert prof.enable(True) is False
        assert prof.enabled() is False
        ctx = prof.ProfilingContext(enabled=True)
        with ctx.track("x"):
            pass
        with prof.zone("y"):
            pass
        prof.counter("c", 1)
        prof.step()
        assert prof.stats() == {}
        assert prof.counters() == {}
        assert prof.flush() is False
        print(prof.summary(), end="")
        print(prof.summary("json"))
    """, PROF="0")
    assert "nothing recorded" in out.stdout
    assert out.stdout.rstrip().endswith("{}")


def test_off_by_default_and_summary_note():
    out = run_py("""
        import prof
        assert prof.enabled() is False
        with prof.zone("x"):
            pass
        print(prof.summary(), end="")
    """, PROF=None)
    assert "nothing recorded" in out.stdout


def test_prof_1_records_without_enable():
    out = run_py("""
        import prof
        assert prof.enabled()
        with prof.zone("env_on"):
            pass
        print(prof.stats("env_on")["count"])
    """, PROF="1")
    assert out.stdout.strip() == "1"


def test_final_summary_at_exit_to_stderr():
    out = run_py("""
        import prof
        with prof.zone("at_exit_stage"):
            pass
    """, PROF="1", PROF_SUMMARY="stderr")
    assert "at_exit_stage" in out.stderr


# ---------------------------------------------------------------------------
# Summaries routed to logging

# Steps are spaced out so that the collector (which wakes every few tens of
# ms and coalesces periodic summaries whose step marks piled up meanwhile)
# emits one summary per 5 steps.
LOGGING_CHILD = """
    import logging, sys, time
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="%(name)s|%(levelname)s|%(prof_kind)s|%(message)s")
    import prof
    {setup}
    for i in range(12):
        with prof.zone("logged_stage"):
            time.sleep(0.03)
        prof.step()
    prof.flush()
    print("LOOP-DONE", flush=True)
"""


def _records(stdout):
    recs, cur = [], None
    for line in stdout.splitlines():
        if line.startswith("prof|"):
            _, level, kind, first = line.split("|", 3)
            cur = {"level": level, "kind": kind, "text": first}
            recs.append(cur)
        elif line == "LOOP-DONE":
            recs.append({"kind": "LOOP-DONE"})
            cur = None
        elif cur is not None:
            cur["text"] += "\n" + line
    return recs


def test_logging_route_periodic_and_final():
    out = run_py(LOGGING_CHILD.format(setup="prof.log_to_logging(True)"),
                 PROF="1", PROF_SUMMARY_EVERY="5steps")
    recs = _records(out.stdout)
    kinds = [r["kind"] for r in recs]
    # Periodic summaries (steps 5 and 10) arrive before the loop ends; the
    # final one at interpreter exit, after it.
    assert kinds.count("periodic") >= 2, out.stdout
    assert kinds[-1] == "final", out.stdout
    assert kinds.index("LOOP-DONE") < kinds.index("final")
    for r in recs:
        if r["kind"] in ("periodic", "final"):
            assert r["level"] == "INFO"
            assert "logged_stage" in r["text"]
    assert "logged_stage" not in out.stderr      # not printed to stderr too


def test_logging_route_from_environment():
    out = run_py(LOGGING_CHILD.format(setup=""), PROF="1", PROF_SUMMARY="logging",
                 PROF_SUMMARY_EVERY="5steps")
    kinds = [r["kind"] for r in _records(out.stdout)]
    assert kinds.count("periodic") >= 2 and kinds[-1] == "final", out.stdout


def test_logging_route_json_and_custom_logger():
    out = run_py("""
        import json, logging, sys, time
        records = []
        class H(logging.Handler):
            def emit(self, record):
                records.append(record.getMessage())
        lg = logging.getLogger("train.prof")
        lg.addHandler(H()); lg.setLevel(logging.DEBUG); lg.propagate = False
        import prof
        prof.log_to_logging(True, logger=lg, level=logging.DEBUG)
        for i in range(4):
            with prof.zone("js"):
                time.sleep(0.03)
            prof.step()
        # The collector emits a periodic summary on its next wake, which may
        # come after flush() returns: poll, bounded.
        deadline = time.monotonic() + 10
        while not records and time.monotonic() < deadline:
            prof.flush()
            time.sleep(0.01)
        prof.log_to_logging(False)
        assert records, "no periodic summary"
        doc = json.loads(records[0])
        assert doc["kind"] == "periodic", doc
        print("OK", len(records))
    """, PROF="1", PROF_SUMMARY_EVERY="2steps", PROF_SUMMARY_FORMAT="json")
    assert out.stdout.startswith("OK")


def test_logging_sink_errors_do_not_break_steps():
    out = run_py("""
        import time
        import prof
        from prof import _prof
        calls = []
        def sink(text, kind):
            calls.append(kind)
            raise RuntimeError("sink failed")
        _prof._set_log_sink(sink)
        for i in range(4):
            prof.step()
        deadline = time.monotonic() + 10
        while not calls and time.monotonic() < deadline:
            prof.step()          # drains queued summaries, like flush()
            time.sleep(0.01)
        _prof._set_log_sink(None)
        print("calls", len(calls))
    """, PROF="1", PROF_SUMMARY_EVERY="2steps")
    assert out.stdout.startswith("calls")
    assert int(out.stdout.split()[1]) >= 1
    assert "sink failed" in out.stderr           # reported as unraisable, not raised


def test_logging_route_without_logging_setup_falls_back_to_stderr():
    # Nothing configures logging: Python's last-resort handler would drop
    # INFO records, so the summary goes to stderr, with one note saying why.
    out = run_py("""
        import prof
        with prof.zone("unlogged_stage"):
            pass
        prof.step()
    """, PROF="1", PROF_SUMMARY="logging")
    err = out.stderr
    assert err.count("logging has no handler") == 1, err
    assert err.count("prof summary:") == 1 and "final" in err
    assert "unlogged_stage" in err
    assert err.index("logging has no handler") < err.index("prof summary:")


def test_logging_route_set_up_after_import_gets_the_records():
    # The fallback is decided per summary: logging configured later (after
    # `import prof`, before the end) receives the final summary.
    out = run_py("""
        import logging, sys
        import prof
        with prof.zone("late_stage"):
            pass
        logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                            format="%(name)s|%(levelname)s|%(prof_kind)s|%(message)s")
    """, PROF="1", PROF_SUMMARY="logging")
    recs = _records(out.stdout)
    assert [r["kind"] for r in recs] == ["final"], out.stdout
    assert "late_stage" in recs[0]["text"]
    assert "late_stage" not in out.stderr and "no handler" not in out.stderr
