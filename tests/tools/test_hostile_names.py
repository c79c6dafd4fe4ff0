"""Stage names are user data: every output of every tool shows them safely.
Terminal text: no control character of a name reaches the terminal (ESC,
OSC, CSI, newlines, \\x01 are shown as \\xNN, as the library's own table
does); JSON outputs parse; SVG parses as XML; HTML keeps them inert."""

import gzip
import json
import xml.etree.ElementTree as ET

import pytest

import synth
import trace_check

NAMES = [
    'clear\x1b[2J\x1b[H',                    # clear the screen
    'title\x1b]0;pwned\x07',                 # OSC: set the window title
    'csi\u009b31m',                          # C1 CSI
    'two\nlines',
    'ctl\x01\x7f',
    '<script>alert("x")</script>',
    'quote"\'\\',
]
# The same names as the library's text table shows them.
SHOWN = ['clear\\x1b[2J\\x1b[H', 'title\\x1b]0;pwned\\x07', 'csi\\xc2\\x9b31m', 'two\\x0alines',
         'ctl\\x01\\x7f', '<script>alert("x")</script>', 'quote"\'\\']
INVALID = b'bad\xff\xfeutf8'


def tree():
    t = [('step', None, 1_000_000)]
    t += [(n, 'step', 200_000) for n in NAMES]
    return t


def inputs(write, seed=1):
    zones = synth.simulate(seed, steps=15, tree=tree())
    trace = synth.trace(zones).encode()
    # a name that is not UTF-8 at all (a foreign or hand-edited file)
    trace = trace.replace(b'"name":"ctl\\u0001\\u007f"', b'"name":"' + INVALID + b'"', 1) \
        if b'"name":"ctl\\u0001\\u007f"' in trace else trace
    return (write(f'run{seed}.json', synth.summary_text(synth.summary(zones, tree=tree()))),
            write(f'trace{seed}.json', trace))


def assert_terminal_safe(text):
    bad = [c for c in text if (ord(c) < 0x20 and c != '\n') or 0x7f <= ord(c) <= 0x9f]
    assert not bad, bad
    for line in text.splitlines():                 # no name split over lines
        assert not line.startswith('lines'), line


def test_report_table(tool, write):
    summ, trace = inputs(write)
    for f in (summ, trace):
        p = tool('report', f, check=0)
        assert_terminal_safe(p.stdout + p.stderr)
        for s in SHOWN[:6]:
            assert s in p.stdout or s.startswith('ctl'), s
    p = tool('report', trace, check=0)
    assert 'bad\\xff\\xfeutf8' in p.stdout        # invalid bytes shown as \xNN


def test_diff_table_gate_and_json(tool, write):
    a, ta = inputs(write, 1)
    b, tb = inputs(write, 2)
    for x, y in ((a, b), (ta, tb)):
        p = tool('diff', x, y, '--fail-if-slower', '0.01%')
        assert p.returncode in (0, 1)
        assert_terminal_safe(p.stdout + p.stderr)
        assert 'two\\x0alines' in p.stdout
        j = tool('diff', x, y, '--json')
        assert_terminal_safe(j.stdout)
        names = {r['name'] for r in json.loads(j.stdout)['stages']}
        assert set(NAMES[:6]) <= names
    j = json.loads(tool('diff', ta, tb, '--json').stdout)
    assert 'bad\ufffd\ufffdutf8' in {r['name'] for r in j['stages']}


def test_merge_table_and_trace(tool, write, tmp_path):
    _, t1 = inputs(write, 1)
    _, t2 = inputs(write, 2)
    t2 = write('r2.json', open(t2, 'rb').read().replace(b'"rank": 0', b'"rank": 1')
               .replace(b'(rank 0)', b'(rank 1)'))
    out = tmp_path / 'm.json.gz'
    p = tool('merge', '-o', out, t1, t2, '--straggler', '0.001', check=0)
    assert_terminal_safe(p.stdout + p.stderr)
    assert 'clear\\x1b[2J' in p.stdout
    plain = tmp_path / 'm.json'
    plain.write_bytes(gzip.decompress(out.read_bytes()))
    plain.read_bytes().decode('utf-8')              # strict UTF-8
    events = trace_check.check_trace(str(plain))
    names = {e['name'] for e in events if e['ph'] == 'X'}
    assert set(NAMES[:6]) <= names and 'bad\ufffd\ufffdutf8' in names


def test_svg_and_folded(tool, write):
    _, trace = inputs(write)
    svg, folded = write('f.svg', ''), write('f.folded', '')
    tool('report', trace, '--flamegraph', svg, '--folded', folded, check=0)
    root = ET.parse(svg).getroot()
    texts = [t.text for t in root.iter('{http://www.w3.org/2000/svg}title')]
    assert any('title\\x1b]0;pwned\\x07' in t for t in texts)
    assert any('<script>alert' in t for t in texts)   # text, not an element
    assert not list(root.iter('{http://www.w3.org/2000/svg}script'))
    lines = open(folded, encoding='utf-8').read().splitlines()
    assert len(lines) == len(NAMES) + 2          # + step, + the one zone renamed to bad bytes
    assert_terminal_safe('\n'.join(lines))


@pytest.mark.parametrize('name', NAMES)
def test_html_flamegraph_keeps_names_inert(tool, write, name):
    zones = synth.simulate(1, steps=5, tree=[(name, None, 100_000)])
    html = write('f.html', '')
    tool('report', write('t.json', synth.trace(zones)), '--flamegraph', html, check=0)
    text = open(html, encoding='utf-8').read()
    assert text.isascii() and '<script>alert' not in text
    assert text.lower().count('</script') == 2
    assert_terminal_safe(text.replace('\n', ''))
