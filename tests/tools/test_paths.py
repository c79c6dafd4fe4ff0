"""Rows are call paths (issue 37): a stage run under two parents is a row
under each, as the runtime's summary has it. prof-report's table from a
trace shows `a` under `x` and under `y` with their own counts, and prof-diff
compares each row with the row of the same path on the other side, from
summaries and from traces: `a` slower under `y` only is reported there, and
`a` under `x` is unchanged."""

import json
import random

import pytest

import synth
from test_report import table_rows


def zones_two_parents(seed, a_under_y_ns=10_000, under_x=50, under_y=40):
    """`x` runs `a` (10 us) under_x times, then `y` runs `a` under_y times."""
    rng = random.Random(seed)
    zones, t = [], synth.T0_NS

    def calls(parent, n, a_ns):
        nonlocal t
        for _ in range(n):
            a = synth.Zone('a', 1000, t + 1_000, 1, (parent, 'a'))
            a.dur = a.self_ns = int(a_ns * rng.lognormvariate(0, 0.02))
            p = synth.Zone(parent, 1000, t, 0, (parent,))
            p.dur, p.self_ns = a.dur + 2_000, 2_000
            zones.extend((a, p))     # end order: the child first
            t += p.dur + 5_000

    calls('x', under_x, 10_000)
    calls('y', under_y, a_under_y_ns)
    return zones


def path_summary(zones):
    """A summary whose rows are paths (docs/FORMATS.md), in tree order."""
    by_path = {}
    for z in zones:
        by_path.setdefault(z.path, []).append(z)
    total = {p: sum(z.dur for z in zs) for p, zs in by_path.items()}
    order = []

    def visit(prefix):
        kids = [p for p in by_path if len(p) == len(prefix) + 1 and p[:-1] == prefix]
        for p in sorted(kids, key=lambda p: (-total[p], p[-1])):
            order.append(p)
            visit(p)
    visit(())
    wall = max(z.ts + z.dur for z in zones) - min(z.ts for z in zones)
    stages = []
    for p in order:
        durs = sorted(z.dur for z in by_path[p])
        stages.append({
            'name': p[-1], 'parent': p[-2] if len(p) > 1 else None, 'depth': len(p) - 1,
            'parent_row': order.index(p[:-1]) if len(p) > 1 else None, 'gpu': False,
            'lossy': False, 'count': len(durs), 'total_ns': sum(durs),
            'self_ns': sum(z.self_ns for z in by_path[p]), 'min_ns': durs[0],
            'max_ns': durs[-1], 'avg_ns': sum(durs) / len(durs),
            'p50_ns': float(synth.percentile(durs, .5)),
            'p95_ns': float(synth.percentile(durs, .95)),
            'p99_ns': float(synth.percentile(durs, .99)), 'wall_share': sum(durs) / wall,
            'hist': synth.geometric_hist(durs)})
    section = {'steps': 0, 'wall_ns': wall, 'stages': stages, 'folded_stages': 0,
               'folded_total_ns': 0, 'counters': [], 'marks': []}
    return {'prof': 'summary', 'format': 1, 'version': '0.1.0', 'kind': 'final',
            'program': 'reload', 'pid': 4242, 'host': 'node1', 'rank': 0,
            'unix_time': 1795000000.123, 'step': 0, 'wall_ns': wall, 'threads': 1,
            'dropped': 0, 'total': section}


def save(write, name, zones, kind):
    if kind == 'summary':
        return write(name, synth.summary_text(path_summary(zones)))
    return write(name, synth.trace(zones))


def test_report_from_a_trace_shows_a_under_both_parents(tool, write):
    path = save(write, 'run.trace.json', zones_two_parents(1), 'trace')
    rows = table_rows(tool('report', path, check=0).stdout)
    assert [r[:3] for r in rows] == [(0, 'x', '50'), (1, 'a', '50'), (0, 'y', '40'),
                                     (1, 'a', '40')], rows


@pytest.mark.parametrize('kind', ['summary', 'trace'])
def test_diff_matches_rows_by_path(tool, write, kind):
    before = save(write, 'a.json', zones_two_parents(1), kind)
    after = save(write, 'b.json', zones_two_parents(2, a_under_y_ns=20_000), kind)
    p = tool('diff', before, after, '--json', check=0)
    stages = json.loads(p.stdout)['stages']
    assert [r['name'] for r in stages].count('a') == 2, stages
    rows = {tuple(r['path']): r for r in stages}
    assert set(rows) == {('x',), ('x', 'a'), ('y',), ('y', 'a')}, rows
    assert rows[('y', 'a')]['verdict'] == 'slower', rows[('y', 'a')]
    assert 90 < rows[('y', 'a')]['change_pct'] < 110
    assert rows[('x', 'a')]['verdict'] == 'unchanged', rows[('x', 'a')]
    assert rows[('y', 'a')]['before']['count'] == 40
    assert rows[('x', 'a')]['before']['count'] == 50
