"""prof-report: the stage table, folded stacks and the flame graph SVG."""

import json
import xml.etree.ElementTree as ET

import pytest

import synth

SVG = '{http://www.w3.org/2000/svg}'


def inputs(write, zones, **kw):
    return {'summary': write('run.json', synth.summary_text(synth.summary(zones, **kw))),
            'trace': write('run.trace.json', synth.trace(zones))}


def table_rows(text):
    """The table's rows: [(indent, name, count, ...)] after the header line."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('stage '))
    rows = []
    for l in lines[start + 1:]:
        if not l.strip() or l.startswith('('):
            break
        cols = l.split()
        rows.append(((len(l) - len(l.lstrip())) // 2, cols[0], *cols[1:]))
    return rows


@pytest.mark.parametrize('kind', ['summary', 'trace'])
def test_table_in_tree_order(tool, write, kind):
    zones = synth.simulate(1, steps=30)
    p = tool('report', inputs(write, zones)[kind], check=0)
    rows = table_rows(p.stdout)
    assert [(r[0], r[1]) for r in rows] == [(0, 'train_step'), (1, 'backward'), (1, 'forward'),
                                            (2, 'attention'), (1, 'data'), (1, 'optimizer')]
    assert all(r[2] == '30' for r in rows)
    header = p.stdout.splitlines()[1].split()
    assert header == ['stage', 'count', 'total', 'self', 'avg', 'p50', 'p95', 'p99', 'max',
                      'wall%']   # the library's own columns
    assert '30 steps' in p.stdout


def test_top_n(tool, write):
    f = inputs(write, synth.simulate(1, steps=10))['summary']
    rows = table_rows(tool('report', f, '--top', '3', check=0).stdout)
    assert [r[1] for r in rows] == ['train_step', 'backward', 'forward']
    assert 'not shown' in tool('report', f, '--top', '3', check=0).stdout


def expected_paths(zones):
    """{path: [total, self]} from the simulation itself."""
    out = {}
    for z in zones:
        v = out.setdefault(z.path, [0, 0])
        v[0] += z.dur
        v[1] += z.self_ns
    return out


def parse_folded(text):
    out = {}
    for line in text.splitlines():
        stack, _, n = line.rpartition(' ')
        out[tuple(stack.split(';'))] = int(n)
    return out


@pytest.mark.parametrize('kind', ['summary', 'trace'])
def test_folded_matches_nesting(tool, write, kind):
    zones = synth.simulate(2, steps=40)
    f = inputs(write, zones)[kind]
    out = write('out.folded', '')
    p = tool('report', f, '--folded', out, check=0)
    assert 'train_step' in p.stdout                 # the table still printed
    folded = parse_folded(open(out).read())
    assert folded == {path: v[1] for path, v in expected_paths(zones).items()}
    # '-' writes the stacks alone to stdout, for a pipe into flamegraph.pl
    p = tool('report', f, '--folded', '-', check=0)
    assert parse_folded(p.stdout) == folded


def frames(svg_path):
    """{stack tuple: (x, width, title)} of the SVG's frames; checks XML."""
    root = ET.parse(svg_path).getroot()
    assert root.tag == SVG + 'svg'
    out = {}
    for g in root.iter(SVG + 'g'):
        if g.get('class') != 'frame':
            continue
        rect, title = g.find(SVG + 'rect'), g.find(SVG + 'title')
        assert rect is not None and title is not None and title.text
        stack = tuple(g.get('data-stack').split(';')) if g.get('data-stack') else ()
        out[stack] = (float(rect.get('x')), float(rect.get('width')), title.text)
    return out


@pytest.mark.parametrize('kind', ['summary', 'trace'])
def test_flamegraph_widths_are_totals(tool, write, kind):
    zones = synth.simulate(3, steps=40)
    f = inputs(write, zones)[kind]
    svg = write('flame.svg', '')
    tool('report', f, '--flamegraph', svg, check=0)
    fr = frames(svg)
    exp = expected_paths(zones)
    assert set(fr) == set(exp) | {()}               # () is the 'all' frame
    all_total = sum(v[0] for p, v in exp.items() if len(p) == 1)
    all_w = fr[()][1]
    for path, (total, _) in exp.items():
        x, w, title = fr[path]
        assert w / all_w == pytest.approx(total / all_total, rel=1e-4), path
        assert title.startswith(path[-1] + ':')
        assert all(f' {w} ' in title for w in ('avg', 'p50', 'p95')), title
        px, pw, _ = fr[path[:-1]]                   # inside its parent
        assert px - 1e-3 <= x and x + w <= px + pw + 1e-3
    # siblings side by side, never overlapping
    kids = sorted((fr[p][0], fr[p][1]) for p in exp if len(p) == 2)
    for (x1, w1), (x2, _) in zip(kids, kids[1:]):
        assert x1 + w1 <= x2 + 1e-3


def test_flamegraph_names_that_break_xml_and_folded(tool, write):
    tree = [('step <&> "q"', None, 1_000_000), ('a;b\x01\n', 'step <&> "q"', 500_000)]
    zones = synth.simulate(4, steps=5, tree=tree)
    f = write('t.json', synth.trace(zones))
    svg = write('f.svg', '')
    folded = write('f.folded', '')
    tool('report', f, '--flamegraph', svg, '--folded', folded, check=0)
    fr = frames(svg)
    assert ('step <&> "q"', 'a:b\\x01\\x0a') in fr      # shown escaped, as the library does
    lines = open(folded, encoding='utf-8').read().splitlines()
    assert len(lines) == 2 and all(l.count(';') <= 1 for l in lines)


def test_gpu_zones_go_under_their_cpu_stage(tool, write):
    zones = synth.simulate(5, steps=10)
    gpu = []
    for z in zones:
        if z.name == 'forward':
            g = synth.Zone('forward', 1_000_000_001, z.ts + 5_000, 0, ('forward',))
            g.dur, g.cat = z.dur // 2, 'gpu'
            gpu.append(g)
    lines = synth.trace_events(zones + gpu)
    f = write('t.json', synth.trace_text(lines))
    rows = table_rows(tool('report', f, check=0).stdout)
    names = [(r[0], r[1]) for r in rows]
    i = names.index((1, 'forward'))
    assert names[i + 1:i + 3] == [(2, 'attention'), (2, 'forward')] or \
        names[i + 1:i + 3] == [(2, 'forward'), (2, 'attention')]
    assert any(r[1] == 'forward' and r[2] == '[gpu]' for r in rows)   # 'forward [gpu]'


def test_killed_process_trace_is_read(tool, write):
    zones = synth.simulate(6, steps=20)
    text = synth.trace(zones, terminated=False)
    f = write('killed.json', text)
    rows = table_rows(tool('report', f, check=0).stdout)
    assert rows[0][1] == 'train_step' and rows[0][2] == '20'
    # cut inside the last event as well: that event is ignored, with a warning
    f = write('killed2.json', text[:-40])
    p = tool('report', f, check=0)
    assert 'half-written' in p.stderr
    assert table_rows(p.stdout)[0][1] == 'train_step'


def test_object_form_trace(tool, write):
    events = [json.loads(l) for l in synth.trace_events(synth.simulate(1, steps=3))]
    f = write('obj.json', json.dumps({'traceEvents': events, 'displayTimeUnit': 'ns'}))
    assert table_rows(tool('report', f, check=0).stdout)[0][2] == '3'


def test_unwritable_output(tool, write):
    f = inputs(write, synth.simulate(1, steps=3))['summary']
    p = tool('report', f, '--flamegraph', '/nonexistent/dir/x.svg')
    assert p.returncode == 2 and 'cannot write' in p.stderr
