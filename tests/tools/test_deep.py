"""The tools on a call chain 1,500 levels deep (issue 21: prof-diff and
prof-merge raised RecursionError past ~990 levels; prof-report raised the
recursion limit instead). The runtime's own order (src/base/order.c) goes past
27,000 levels; the tools' tree order and nesting use a stack, not recursion."""

import json
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = shutil.which('node') or shutil.which('nodejs')
DEPTH = 1500
STEPS = 3
UNIT = 1000                          # ns: each level's own time on either side of its child
T0 = 1_000_000_000_000


def name(k):
    return f'lvl{k:04d}'


def deep_trace(steps=STEPS, depth=DEPTH):
    """A chain lvl0000 > lvl0001 > ... > lvl1499, written as prof writes a
    thread's zones: in the order they end (the innermost first)."""
    lines = [json.dumps({'name': 'process_name', 'ph': 'M', 'pid': 7, 'tid': 7,
                         'args': {'name': 'deep', 'prof': {'format': 1, 'host': 'h', 'rank': None,
                                                           'realtime_minus_monotonic_ns': 5}}})]
    t = T0
    for _ in range(steps):
        span = 2 * depth * UNIT
        for k in reversed(range(depth)):
            ts, dur = t + k * UNIT, span - 2 * k * UNIT
            lines.append(f'{{"name":"{name(k)}","ph":"X","pid":7,"tid":7,'
                         f'"ts":{ts // 1000}.{ts % 1000:03d},"dur":{dur // 1000}.{dur % 1000:03d},'
                         f'"cat":"cpu"}}')
        t += span
        lines.append(f'{{"name":"step","ph":"i","pid":7,"tid":7,"ts":{t // 1000}.{t % 1000:03d},'
                     f'"s":"t","cat":"step"}}')
        t += 10 * UNIT
    return '[' + '\n,'.join(lines) + '\n]\n'


def deep_summary():
    span = 2 * DEPTH * UNIT
    stages = []
    for k in range(DEPTH):
        dur = span - 2 * k * UNIT
        own = 2 * UNIT if k < DEPTH - 1 else dur
        stages.append({'name': name(k), 'parent': name(k - 1) if k else None, 'depth': k,
                       'gpu': False, 'count': STEPS, 'total_ns': STEPS * dur,
                       'self_ns': STEPS * own, 'min_ns': dur, 'max_ns': dur, 'avg_ns': dur,
                       'p50_ns': dur, 'p95_ns': dur, 'p99_ns': dur, 'wall_share': 0.9,
                       'hist': [[dur, dur + 1, STEPS]]})
    obj = {'prof': 'summary', 'format': 1, 'version': '0.1.0', 'kind': 'final',
           'program': 'deep', 'pid': 7, 'host': 'h', 'rank': None, 'step': STEPS,
           'wall_ns': STEPS * span, 'threads': 1, 'dropped': 0,
           'total': {'steps': STEPS, 'wall_ns': STEPS * span, 'stages': stages}}
    return json.dumps(obj) + '\n'


def table_names(stdout, first='stage '):
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(first))
    out = []
    for l in lines[start + 1:]:
        if not l.startswith(' ') and not l.startswith('lvl'):
            break
        out.append(((len(l) - len(l.lstrip())) // 2, l.split()[0]))
    return out


CHAIN = [(k, name(k)) for k in range(DEPTH)]


@pytest.mark.parametrize('kind', ['trace', 'summary'])
def test_report_on_a_deep_chain(tool, write, tmp_path, kind):
    f = write('deep.json', deep_trace() if kind == 'trace' else deep_summary())
    html, svg, fold = tmp_path / 'f.html', tmp_path / 'f.svg', tmp_path / 'f.folded'
    p = tool('report', f, '--flamegraph', html, '--folded', fold, check=0)
    assert table_names(p.stdout) == CHAIN
    rows = {l.split()[0]: l.split() for l in p.stdout.splitlines() if l.strip().startswith('lvl')}
    # self: 2 us a call per level (1 us either side of the child), 3 calls
    assert rows[name(0)][1] == str(STEPS) and rows[name(0)][4:6] == ['6.00', 'us']
    assert rows[name(DEPTH - 1)][4:6] == ['6.00', 'us']
    stacks = open(fold).read().splitlines()
    assert len(stacks) == DEPTH
    deepest = max(stacks, key=len)
    assert deepest.split(' ')[0].split(';') == [name(k) for k in range(DEPTH)]
    tool('report', f, '--flamegraph', svg, check=0)
    assert open(svg).read().count('<g class="frame"') == DEPTH + 1
    if NODE:
        q = subprocess.run([NODE, os.path.join(HERE, 'flame_dom.js'), str(html), name(DEPTH - 1)],
                           capture_output=True, text=True, timeout=60)
        assert q.returncode == 0, q.stderr[-2000:]
        out = json.loads(q.stdout)
        assert len(out['initial']) == DEPTH + 1
        assert out['tip'].startswith(name(DEPTH - 1) + '\n') and 'p50' in out['tip']


@pytest.mark.parametrize('kind', ['trace', 'summary'])
def test_diff_on_a_deep_chain(tool, write, kind):
    text = deep_trace() if kind == 'trace' else deep_summary()
    a, b = write('a.json', text), write('b.json', text)
    p = tool('diff', a, b, '--json', check=0)
    rows = json.loads(p.stdout)['stages']
    assert [(r['depth'], r['name']) for r in rows] == CHAIN
    assert all(r['verdict'] == 'unchanged' for r in rows)
    assert rows[0]['before']['self_ns'] == STEPS * 2 * UNIT
    p = tool('diff', a, b, check=0)
    assert table_names(p.stdout) == CHAIN


def test_merge_on_a_deep_chain(tool, write, tmp_path):
    a, b = write('a.json', deep_trace()), write('b.json', deep_trace())
    out = tmp_path / 'm.json'
    p = tool('merge', '-o', out, a, b, check=0)
    assert table_names(p.stdout) == CHAIN
    n = sum(1 for l in open(out) if '"ph":"X"' in l)
    assert n == 2 * STEPS * DEPTH
    # the merged file is a deep trace too: read back, the same tree
    p = tool('report', out, check=0)
    assert table_names(p.stdout) == CHAIN


@pytest.mark.skipif(not NODE, reason='node not installed')
def test_flame_graph_page_of_a_chain_8000_deep(tool, write, tmp_path):
    """The page's own script walks the tree with a stack too (its recursion
    overflowed node's stack at 8,000 levels)."""
    f = write('deep.json', deep_trace(steps=1, depth=8000))
    html = tmp_path / 'f.html'
    p = tool('report', f, '--flamegraph', html, '--top', '1', check=0)   # the whole table: 64 M spaces
    assert 'lvl0000' in p.stdout
    q = subprocess.run([NODE, os.path.join(HERE, 'flame_dom.js'), str(html), name(5000)],
                       capture_output=True, text=True, timeout=60)
    assert q.returncode == 0, q.stderr[-2000:]
    out = json.loads(q.stdout)
    # Frames narrower than 0.05% of the width are not drawn: the chain's
    # last few levels (16 ms less 2 us a level) appear once zoomed in.
    drawn = [f['name'] for f in out['initial']]
    assert drawn[:2] == ['all', name(0)] and len(drawn) > 7990
    assert drawn[1:] == [name(k) for k in range(len(drawn) - 1)]
    zoomed = [f['name'] for f in out['zoomed']]
    assert name(7998) in zoomed and name(7998) not in drawn
    assert out['tip'].startswith(name(5000) + '\n')


def test_no_recursion_limit_is_raised():
    root = os.path.dirname(os.path.dirname(HERE))
    for f in ('prof_tools.py', 'prof-merge', 'prof-diff', 'prof-report'):
        assert 'setrecursionlimit' not in open(os.path.join(root, 'tools', f)).read(), f
