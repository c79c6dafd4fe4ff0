"""Issue 39, the on-CPU sampler beyond the table: each sampled thread has
a "prof.on_cpu TID" counter track in the trace, in [0, 1], low while it
sleeps and near its own CPU clock's share while it spins; a forked child's
thread is sampled (timers are not inherited: it starts its own); threads
that exit take their timers with them."""
from common import check, main, run, clean_env, load_trace, sanitizer


def value_at(points, t):
    """The step counter's value at time t (the last point at or before it)."""
    v = None
    for ts, val in points:
        if ts <= t:
            v = val
    return v


def mean_over(points, a, b):
    """The counter's time-weighted mean over [a, b]."""
    total = 0.0
    edges = sorted(points)
    for i, (ts, val) in enumerate(edges):
        end = edges[i + 1][0] if i + 1 < len(edges) else b
        lo, hi = max(ts, a), min(end, b)
        if hi > lo:
            total += (hi - lo) * val
    return total / (b - a)


def test(tmp):
    path = f'{tmp}/trace.json'
    r = run(['cpu'], clean_env(PROF=1, PROF_TRACE=path))
    tid = int(r.values['cpu_tid'])
    truth = float(r.values['spin_truth'])
    ev = load_trace(path, expect_stages=['spin', 'sleep'])
    zones = {e['name']: e for e in ev if e['ph'] == 'X' and e['tid'] == tid}
    points = sorted((e['ts'], e['args']['value']) for e in ev
                    if e['ph'] == 'C' and e['name'] == f'prof.on_cpu {tid}')
    check(points, f'no prof.on_cpu {tid} counter in the trace')
    check(all(0.0 <= v <= 1.0 for _, v in points), f'a share outside [0, 1]: {points}')
    sleep = zones['sleep']
    mid = sleep['ts'] + sleep['dur'] / 2
    check(value_at(points, mid) is not None and value_at(points, mid) <= 0.1,
          f'on CPU {value_at(points, mid)} in the middle of the sleep: {points}')
    spin = zones['spin']
    # Its first and last 25 ms left out: a point may straddle each edge.
    got = mean_over(points, spin['ts'] + 25000, spin['ts'] + spin['dur'] - 25000)
    check(abs(got - truth) <= 0.2, f'spin: the counter says {got:.3f}, its clock {truth:.3f}')

    # ThreadSanitizer cannot run a forked child that starts a thread (its collector).
    if sanitizer() != 'thread':
        r = run(['cpu_fork'], clean_env(PROF=1, PROF_SUMMARY='off'))
        check(r.values.get('child_cpu') == '1', f'the forked child was not sampled: {r.values}')

    r = run(['cpu_threads'], clean_env(PROF=1, PROF_SUMMARY='off'))
    check(r.values.get('short_cpu') == '1', f'the threads were not sampled: {r.values}')
    if r.values.get('timers') != 'unknown':
        # The main thread's timer, and none of the 40 that exited.
        check(int(r.values['timers']) <= 1, f'{r.values["timers"]} POSIX timers left')


if __name__ == '__main__':
    main(test)
