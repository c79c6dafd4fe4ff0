"""Synthetic prof runs for the tools' tests.

A simulated training loop (a tree of stages, per-zone lognormal noise,
optional per-stage slowdowns) whose zones are written out as a JSON summary
and as a Chrome trace following docs/FORMATS.md. Written independently of
tools/prof_tools.py: self times come from the simulation itself, and the
summary's histogram uses 1% geometric buckets, not the runtime's scheme, so
the tools are tested on the format, not on their own assumptions.
"""

import json
import math
import random

# (name, parent, own time in ns per call): a training step.
TREE = [
    ('train_step', None, 200_000),
    ('data', 'train_step', 2_000_000),
    ('forward', 'train_step', 2_000_000),
    ('attention', 'forward', 3_000_000),
    ('backward', 'train_step', 8_000_000),
    ('optimizer', 'train_step', 1_000_000),
]
GAP_NS = 1_000                       # between sibling zones
T0_NS = 1_000_000_000_000            # monotonic time of the first zone (~17 min uptime)


class Zone:
    def __init__(self, name, tid, ts, depth, path):
        self.name, self.tid, self.ts, self.depth, self.path = name, tid, ts, depth, path
        self.dur = self.self_ns = 0
        self.cat = 'cpu'


def simulate(seed, steps=200, noise=0.1, slow=None, tree=TREE, t0=T0_NS, tid=1000):
    """-> list of Zone in end order. slow: {stage: factor on its own time}."""
    rng = random.Random(seed)
    slow = slow or {}
    own = {n: t for n, _, t in tree}
    kids = {}
    for n, p, _ in tree:
        kids.setdefault(p, []).append(n)
    zones = []

    def run(name, start, depth, path):
        z = Zone(name, tid, start, depth, path + (name,))
        mine = int(own[name] * slow.get(name, 1.0) * rng.lognormvariate(0, noise))
        t = start + mine // 2        # half of its own work before the children, half after
        in_kids = 0
        for c in kids.get(name, ()):
            t = run(c, t + GAP_NS, depth + 1, z.path) + GAP_NS
            in_kids += zones[-1].dur  # the child just ended
        z.dur = t + (mine - mine // 2) - start
        z.self_ns = z.dur - in_kids
        zones.append(z)
        return start + z.dur

    t = t0
    for _ in range(steps):
        for root in kids[None]:
            t = run(root, t, 0, ()) + 50_000
    return zones


def stage_names(tree=TREE):
    return [n for n, _, _ in tree]


def runtime_order(zones, tree=TREE):
    """Tree order with siblings by total time, largest first (the runtime's)."""
    total = {}
    for z in zones:
        total[z.name] = total.get(z.name, 0) + z.dur
    out = []

    def visit(parent):
        for n in sorted((n for n, p, _ in tree if p == parent and n in total), key=lambda n: -total[n]):
            out.append(n)
            visit(n)
    visit(None)
    return out


def percentile(sorted_vals, q):
    """Nearest rank."""
    return sorted_vals[max(0, math.ceil(q * len(sorted_vals)) - 1)]


def geometric_hist(vals):
    """[[lo, hi, count]] with 1% wide buckets."""
    def lo(k):
        return math.floor(1.01 ** k)
    counts = {}
    for v in vals:
        k = int(math.log(max(v, 1)) / math.log(1.01))
        while lo(k) > v:
            k -= 1
        while lo(k + 1) <= v:
            k += 1
        counts[k] = counts.get(k, 0) + 1
    return [[lo(k), lo(k + 1), n] for k, n in sorted(counts.items())]


def summary(zones, program='train_loop', pid=4242, rank=0, host='node1', kind='final',
            tree=TREE, steps=None, hist=True):
    """A summary object (FORMATS.md) whose stages are the simulation's."""
    parent = {n: p for n, p, _ in tree}
    depth = {}
    for n, p, _ in tree:
        depth[n] = 0 if p is None else depth[p] + 1
    wall = max(z.ts + z.dur for z in zones) - min(z.ts for z in zones)
    stages = []
    for n in runtime_order(zones, tree):
        durs = sorted(z.dur for z in zones if z.name == n)
        if not durs:
            continue
        outer = sum(z.dur for z in zones if z.name == n and n not in z.path[:-1])
        st = {'name': n, 'parent': parent[n], 'depth': depth[n], 'gpu': False,
              'count': len(durs), 'total_ns': sum(durs),
              'self_ns': sum(z.self_ns for z in zones if z.name == n),
              'avg_ns': sum(durs) / len(durs), 'min_ns': durs[0], 'max_ns': durs[-1],
              'p50_ns': float(percentile(durs, .5)), 'p95_ns': float(percentile(durs, .95)),
              'p99_ns': float(percentile(durs, .99)), 'wall_share': outer / wall}
        if hist:
            st['hist'] = geometric_hist(durs)
        stages.append(st)
    nsteps = steps if steps is not None else sum(1 for z in zones if z.depth == 0)
    section = {'steps': nsteps, 'wall_ns': wall, 'stages': stages,
               'counters': [{'name': 'loss', 'count': nsteps, 'last': 0.25, 'min': 0.2,
                             'max': 2.3, 'avg': 0.61}],
               'marks': [{'name': 'epoch', 'count': 1}]}
    return {'prof': 'summary', 'format': 1, 'version': '0.1.0', 'kind': kind,
            'program': program, 'pid': pid, 'host': host, 'rank': rank,
            'unix_time': 1795000000.123, 'step': nsteps, 'wall_ns': wall, 'threads': 1,
            'dropped': 0, 'total': section}


def summary_text(*objs):
    """A summary file: one object per line."""
    return ''.join(json.dumps(o) + '\n' for o in objs)


def us(ns):
    return f'{ns // 1000}.{ns % 1000:03d}'


def trace_events(zones, program='train_loop', pid=4242, rank=0, host='node1',
                 rmm=1_794_000_000_000_000_000, extra=()):
    """Event lines (JSON text) of a trace, process_name first."""
    name = f'{program} (rank {rank})' if rank is not None else program
    ev = [json.dumps({'name': 'process_name', 'ph': 'M', 'pid': pid, 'tid': pid,
                      'args': {'name': name, 'prof': {'format': 1, 'version': '0.1.0',
                                                      'rank': rank, 'host': host, 'pid': pid,
                                                      'realtime_minus_monotonic_ns': rmm}}}),
          json.dumps({'name': 'process_sort_index', 'ph': 'M', 'pid': pid, 'tid': pid,
                      'args': {'sort_index': rank or 0}})]
    for tid in sorted({z.tid for z in zones}):
        ev.append(json.dumps({'name': 'thread_name', 'ph': 'M', 'pid': pid, 'tid': tid,
                              'args': {'name': f'thread {tid}'}}))
    step = 0
    for z in zones:                  # end order, as the collector writes them
        ev.append(f'{{"name":{json.dumps(z.name)},"ph":"X","pid":{pid},"tid":{z.tid},'
                  f'"ts":{us(z.ts)},"dur":{us(z.dur)},"cat":"{z.cat}","args":{{"depth":{z.depth}}}}}')
        if z.depth == 0:
            step += 1
            ev.append(f'{{"name":"step","ph":"i","pid":{pid},"tid":{z.tid},"ts":{us(z.ts + z.dur)},'
                      f'"s":"t","cat":"step","args":{{"step":{step}}}}}')
    ev.append(f'{{"name":"loss","ph":"C","pid":{pid},"tid":{pid},"ts":{us(zones[-1].ts + 1)},'
              f'"args":{{"value":0.25}}}}')
    return ev + list(extra)


def trace_text(lines, terminated=True):
    """FORMATS.md layout: '[' + first event, ',' + each next one per line, ']'."""
    return '[' + '\n,'.join(lines) + ('\n]\n' if terminated else '\n')


def trace(zones, terminated=True, **kw):
    return trace_text(trace_events(zones, **kw), terminated)
