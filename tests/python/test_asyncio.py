"""Zones across awaits (docs/PYTHON.md, "Zones across awaits"): many
asyncio tasks interleave on one thread, each with its own stages.

- A zone is identified by itself, not by its name: two tasks in the same
  stage each end their own zone, so per-zone numbers (min, p50, p95, max)
  are the truth, measured here with perf_counter around each zone.
- Nesting follows the task: the thread's nesting never ratchets up, a zone
  after gather() is top level, nothing is refused.
- Self time is the task's own: time other tasks spent in their zones
  meanwhile is not taken from it.
- A server of our own (asyncio streams on 127.0.0.1, 50 clients): every
  request's stages in the table with the right counts and percentiles, and
  the trace valid in the strict validator, each task's zones on a track
  of their own.
"""
import asyncio
import json
import os
import sys
import time

from prof import _prof
import prof

from conftest import SOURCE_ROOT, run_py

sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests"))
from trace_check import check_trace  # noqa: E402


def _dropped():
    with prof.zone("aio.started"):   # recording has started: the summary exists
        pass
    return json.loads(prof.summary("json"))["dropped"]


def _quantile(values, q):
    """Nearest rank, as the library's percentiles are defined."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(q * len(v) + 0.999999) - 1))
    return v[k]


def test_same_stage_in_many_tasks_times_each_zone():
    truth = []

    @prof.zone("aio.fetch")
    async def fetch(d):
        await asyncio.sleep(d)

    async def caller(i):
        for k in range(10):
            d = 0.010 if (i + k) % 10 < 3 else 0.100   # 30% short, 70% long
            t0 = time.perf_counter()
            await fetch(d)
            truth.append(time.perf_counter() - t0)

    async def main():
        await asyncio.gather(*(caller(i) for i in range(20)))

    d0 = _dropped()
    asyncio.run(main())
    st = prof.stats("aio.fetch")
    assert st["count"] == 200 == len(truth)
    assert _dropped() == d0
    # Each zone holds its scripted sleep and lies inside the caller's clock
    # reads: its quantiles lie between theirs (within the histogram's 1%),
    # whatever the scheduler adds after the zone's end.
    sleeps = [0.010 if (i + k) % 10 < 3 else 0.100 for i in range(20) for k in range(10)]
    for key, q in (("p50_ms", 0.50), ("p95_ms", 0.95)):
        lo, hi = _quantile(sleeps, q) * 1000.0, _quantile(truth, q) * 1000.0
        assert lo * 0.99 <= st[key] <= hi * 1.01, (key, lo, st[key], hi)
    assert min(sleeps) * 1000.0 * 0.99 <= st["min_ms"] <= min(truth) * 1000.0 * 1.01
    assert max(sleeps) * 1000.0 * 0.99 <= st["max_ms"] <= max(truth) * 1000.0 * 1.01
    assert _prof._debug_state()["depth"] == 0


def test_polling_tasks_do_not_ratchet_the_thread():
    rounds = 3200

    async def poll(i):
        for _ in range(rounds):
            with prof.zone(f"aio.poll{i}"):
                await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*(poll(i) for i in range(5)))
        with prof.zone("aio.after_gather"):
            pass

    d0 = _dropped()
    asyncio.run(main())
    s = prof.stats()
    for i in range(5):
        assert s[f"aio.poll{i}"]["count"] == rounds
        assert s[f"aio.poll{i}"]["parent"] is None
    assert s["aio.after_gather"]["parent"] is None and s["aio.after_gather"]["depth"] == 0
    assert _dropped() == d0                       # nothing refused
    st = _prof._debug_state()
    assert st["depth"] == 0 and st["dead"] == 0


def test_self_time_is_the_tasks_own():
    # B's request has no child; A's does, and runs while B's is open. B's
    # self time must not lose A's child.
    async def a():
        with prof.zone("aio.req_a"):
            await asyncio.sleep(0.005)
            with prof.zone("aio.infer_a"):
                time.sleep(0.030)              # holds the thread: inside B's span
            await asyncio.sleep(0.060)

    async def b():
        with prof.zone("aio.req_b"):
            await asyncio.sleep(0.050)

    async def main():
        # a opens first, then b (a sleeps), then a's child runs in b's span.
        await asyncio.gather(a(), b())

    asyncio.run(main())
    s = prof.stats()
    assert s["aio.req_b"]["self_ms"] == s["aio.req_b"]["total_ms"]
    assert abs(s["aio.req_a"]["self_ms"] -
               (s["aio.req_a"]["total_ms"] - s["aio.infer_a"]["total_ms"])) < 0.01
    assert s["aio.infer_a"]["parent"] == "aio.req_a"


def test_task_zones_nest_under_the_creators_zone():
    async def child():
        with prof.zone("aio.child"):
            await asyncio.sleep(0.001)

    async def main():
        with prof.zone("aio.batch"):
            await asyncio.gather(child(), child())
        with prof.zone("aio.next"):
            pass

    asyncio.run(main())
    s = prof.stats()
    assert s["aio.child"]["count"] == 2 and s["aio.child"]["parent"] == "aio.batch"
    assert s["aio.next"]["parent"] is None


SERVER = r"""
import asyncio, json, random, time, prof

CLIENTS, PER = 50, 8
truth = []

async def handle(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            break
        t0 = time.perf_counter()
        with prof.zone("srv.request"):
            with prof.zone("srv.parse"):
                n = int(line)
            with prof.zone("srv.infer"):
                await asyncio.sleep(0.002 + 0.001 * (n % 5))
            with prof.zone("srv.respond"):
                writer.write(b"%d\n" % (n * 2))
                await writer.drain()
        truth.append(time.perf_counter() - t0)
    writer.close()

async def client(port, i):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for k in range(PER):
        writer.write(b"%d\n" % (i * PER + k))
        await writer.drain()
        assert int(await reader.readline()) == 2 * (i * PER + k)
    writer.close()
    await writer.wait_closed()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        await asyncio.gather(*(client(port, i) for i in range(CLIENTS)))

asyncio.run(main())
truth.sort()
print(json.dumps({"stats": prof.stats(), "truth": truth,
                  "dropped": json.loads(prof.summary("json"))["dropped"]}))
"""


def test_asyncio_server_stages_and_trace(tmp_path):
    trace = tmp_path / "srv.json"
    out = run_py(SERVER, PROF="1", PROF_TRACE=str(trace), timeout=300)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    s, truth = res["stats"], res["truth"]
    n = 50 * 8
    assert len(truth) == n and res["dropped"] == 0
    for stage in ("srv.request", "srv.parse", "srv.infer", "srv.respond"):
        assert s[stage]["count"] == n, stage
    for stage in ("srv.parse", "srv.infer", "srv.respond"):
        assert s[stage]["parent"] == "srv.request", stage
    # What scheduling cannot move: each request zone lies inside the
    # script's own clock reads around it and holds its scripted sleep, so
    # every quantile of the zones lies between the sleeps' and the clock
    # reads' (within the histogram's 1%). A preemption between the zone's
    # end and the clock read only widens that interval.
    sleeps = sorted(0.002 + 0.001 * (k % 5) for k in range(n))
    for key, q in (("p50_ms", 0.50), ("p95_ms", 0.95)):
        got = s["srv.request"][key]
        lo, hi = _quantile(sleeps, q) * 1000.0, _quantile(truth, q) * 1000.0
        assert lo * 0.99 <= got <= hi * 1.01, (key, lo, got, hi)
    events = check_trace(str(trace), expect_stages=("srv.request", "srv.infer"))
    xs = [e for e in events if e.get("ph") == "X" and e["name"].startswith("srv.request")]
    assert len(xs) == n
    # Each connection's task draws on a track of its own, named after it.
    names = {e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert any(" task " in name for name in names), names


LANES = """
import asyncio, json, prof

async def task(gate, n, started):
    with prof.zone("aio.lane"):
        started.append(1)
        if len(started) == n:
            gate.set()
        await gate.wait()

async def main(n):
    gate, started = asyncio.Event(), []
    await asyncio.gather(*(task(gate, n, started) for _ in range(n)))

n = 4200
asyncio.run(main(n))
s = json.loads(prof.summary("json"))
print(prof.summary("text"))
print(json.dumps({"n": n, "count": prof.stats()["aio.lane"]["count"],
                  "lanes_shared": s["total"]["loss"]["lanes_shared"]}))
"""


def test_tasks_past_the_lanes_are_counted_and_said():
    # 4,200 tasks open at once: past the 4,095 lanes, the others share the
    # thread's nesting; that is said once on the log and in the summary.
    out = run_py(LANES, PROF="1", PROF_SUMMARY="off", timeout=300)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["count"] == res["n"]
    # The thread's first context keeps lane 0; 4,095 more get a lane.
    assert res["lanes_shared"] == res["n"] - 4096, res
    assert out.stderr.count("asyncio tasks (or other contexts) are open at once") == 1, \
        out.stderr
    assert f"* mixed: {res['n'] - 4096} asyncio tasks found all 4095 lanes in use" in out.stdout


def test_decorated_call_in_a_task_is_placed_in_its_task():
    """A decorated call takes the fast path only while its context is the
    one of the last Python zone on the thread: here another task's zone
    is open when it runs, and it must not land inside that zone."""
    @prof.zone("aio.deco_leaf")
    def leaf():
        pass

    async def holder(ev):
        with prof.zone("aio.holder"):
            await ev.wait()

    async def caller(ev):
        await asyncio.sleep(0)      # holder is inside its zone by now
        leaf()
        ev.set()

    async def main():
        ev = asyncio.Event()
        await asyncio.gather(holder(ev), caller(ev))

    asyncio.run(main())
    s = prof.stats()
    assert s["aio.deco_leaf"]["count"] == 1 and s["aio.deco_leaf"]["parent"] is None, s
    assert s["aio.holder"]["parent"] is None
    assert _prof._debug_state()["depth"] == 0


def test_tasks_of_a_loop_run_in_a_decorated_call_nest_in_it():
    """@prof.zone on a function that runs an event loop (def main():
    asyncio.run(...)): the call's zone is a begin and an end around the
    call, on no stack, yet the loop's tasks start inside it, also after a
    `with` block inside the call moved what the last Python zone left."""
    async def child():
        with prof.zone("aio.dr_child"):
            await asyncio.sleep(0.001)

    async def amain():
        with prof.zone("aio.dr_main"):
            await asyncio.gather(child(), child())

    @prof.zone("aio.dr_run")
    def run():
        with prof.zone("aio.dr_before"):
            pass
        asyncio.run(amain())

    run()
    with prof.zone("aio.dr_after"):
        pass
    s = prof.stats()
    assert s["aio.dr_before"]["parent"] == "aio.dr_run", s
    assert s["aio.dr_main"]["parent"] == "aio.dr_run", s
    assert s["aio.dr_child"]["count"] == 2 and s["aio.dr_child"]["parent"] == "aio.dr_main"
    assert s["aio.dr_after"]["parent"] is None
    assert _prof._debug_state()["depth"] == 0


def test_decorated_call_in_a_task_zone_nests_in_it():
    """In a task (its zones go in a lane), a decorated call made while the
    task's own zone is the last one on the thread takes the decorator's
    lane path: its zone nests in the task's zone, in every task, before and
    after the task's awaits, and the thread's nesting ends where it began."""
    @prof.zone("aio.lane_leaf")
    def leaf():
        pass

    async def task():
        for _ in range(3):
            with prof.zone("aio.lane_outer"):
                leaf()
                await asyncio.sleep(0)
                leaf()

    async def main():
        await asyncio.gather(*(task() for _ in range(4)))

    asyncio.run(main())
    s = prof.stats()
    assert s["aio.lane_leaf"]["count"] == 24, s["aio.lane_leaf"]
    assert s["aio.lane_leaf"]["parent"] == "aio.lane_outer", s["aio.lane_leaf"]
    assert s["aio.lane_outer"]["count"] == 12 and s["aio.lane_outer"]["parent"] is None
    assert _prof._debug_state()["depth"] == 0
