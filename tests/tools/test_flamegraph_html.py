"""prof-report --flamegraph FILE.html: one self-contained page that zooms,
searches and shows each frame's numbers. Checked three ways: its structure
(no external resource, data as inert JSON), its script run under node
against a stand-in DOM (clicks, search, hover), and, when the machine has
Chromium, in a headless browser."""

import json
import os
import re
import shutil
import subprocess

import pytest

import synth

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = shutil.which('node') or shutil.which('nodejs')
CHROMIUM = next((p for p in ('/usr/bin/chromium', '/usr/bin/chromium-browser') if os.path.exists(p)),
                None)
HOSTILE = 'evil</script><script>alert(1)</script>\x1b]0;pwned\x07\n"\'&'


def page(tool, write, tree=synth.TREE, kind='trace', out='f.html'):
    zones = synth.simulate(3, steps=20, tree=tree)
    f = write('run.json', synth.trace(zones) if kind == 'trace'
              else synth.summary_text(synth.summary(zones, tree=tree)))
    html = write(out, '')
    tool('report', f, '--flamegraph', html, check=0)
    return html, zones


def data_of(text):
    m = re.search(r'<script type="application/json" id="prof-data">(.*?)</script>', text, re.S)
    assert m
    return json.loads(m.group(1))


@pytest.mark.parametrize('kind', ['trace', 'summary'])
def test_self_contained_page_with_the_tree(tool, write, kind):
    html, zones = page(tool, write, kind=kind)
    text = open(html, encoding='utf-8').read()
    assert text.startswith('<!DOCTYPE html>')
    # offline: nothing fetched from anywhere
    assert not re.search(r'(src|href)\s*=|https?://|@import|url\(', text.replace(
        'http://www.w3.org', ''))
    assert text.count('<script') == 2 and text.isascii()
    root = data_of(text)['root']
    assert root['name'] == 'all'
    names = {k['name']: k for k in root['kids']}
    assert set(names) == {'train_step'}
    step = names['train_step']
    exp = [z for z in zones if z.name == 'train_step']
    assert step['count'] == len(exp) and step['total'] == sum(z.dur for z in exp)
    assert step['self'] == sum(z.self_ns for z in exp) and step['p95'] > 0
    kids = {k['name'] for k in step['kids']}
    assert kids == {'data', 'forward', 'backward', 'optimizer'}


def test_names_are_inert(tool, write):
    tree = [(HOSTILE, None, 1_000_000), ('ok', HOSTILE, 100_000)]
    html, _ = page(tool, write, tree=tree)
    text = open(html, encoding='utf-8').read()
    assert '<script>alert' not in text and '\x1b' not in text and '\x07' not in text
    assert text.lower().count('</script') == 2   # only the page's own two elements end
    assert '<!--' not in text
    title = re.search(r'<title>(.*?)</title>', text, re.S).group(1)
    assert '<' not in title
    name = data_of(text)['root']['kids'][0]['name']
    assert name == 'evil</script><script>alert(1)</script>\\x1b]0;pwned\\x07\\x0a"\'&'


@pytest.mark.skipif(not NODE, reason='node not installed')
def test_script_draws_zooms_searches_and_hovers(tool, write):
    html, zones = page(tool, write)
    p = subprocess.run([NODE, os.path.join(HERE, 'flame_dom.js'), html, 'forward', 'att'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    init = {f['name']: f for f in out['initial']}
    assert set(init) == {'all', 'train_step', 'data', 'forward', 'attention', 'backward',
                         'optimizer'}
    assert init['all']['width'] == 100 and init['train_step']['width'] > 99
    total = {n: sum(z.dur for z in zones if z.name == n) for n in init if n != 'all'}
    assert init['forward']['width'] == pytest.approx(
        100 * total['forward'] / total['train_step'], rel=1e-3)
    # hover: count, total, self, avg, p50 (beside avg and p95, issue 19), p95
    tip = out['tip']
    fw = [z for z in zones if z.name == 'forward']
    assert tip.startswith('forward\n') and f'count {len(fw)}' in tip
    for word in ('total', 'self', 'avg', 'p50', 'p95'):
        assert re.search(word + r'\s+[0-9.]+ (ns|us|ms|s)', tip), tip
    assert tip.index('avg') < tip.index('p50') < tip.index('p95')
    # click on forward: it fills the width, its child attention too
    # (forward's only child), siblings are gone, ancestors stay as context
    z = {f['name']: f for f in out['zoomed']}
    assert z['forward']['left'] == 0 and z['forward']['width'] == 100
    assert 'backward' not in z and 'data' not in z
    assert z['attention']['width'] == pytest.approx(
        100 * total['attention'] / total['forward'], rel=1e-3)
    assert 'dim' in z['train_step']['cls']
    # search 'att': attention is marked, nothing else
    marked = {f['name'] for f in out['searched'] if 'match' in f['cls'].split()}
    assert marked == {'attention'} and out['status'].startswith('matched ')
    assert len(out['reset']) == len(out['initial'])


@pytest.mark.skipif(not CHROMIUM, reason='chromium not installed')
def test_headless_chromium_builds_the_frames(tool, write, tmp_path):
    html, _ = page(tool, write)
    p = subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu',
                        f'--user-data-dir={tmp_path / "profile"}', '--dump-dom',
                        'file://' + html], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    frames = re.findall(r'<div class="frame[^"]*"[^>]*>([^<]*)</div>', p.stdout)
    assert {'all', 'train_step', 'forward', 'attention', 'backward'} <= set(frames)
