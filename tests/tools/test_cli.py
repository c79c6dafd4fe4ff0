"""What every tool shares: --version, whole help texts, thresholds that mean
one thing, and .json.gz inputs (a killed run's cut gzip stream included)."""

import ast
import gzip
import re
import zlib

import pytest

import synth
from conftest import ROOT

TOOLS = ['merge', 'diff', 'report']


def header_version():
    text = open(f'{ROOT}/include/prof_version.h', encoding='utf-8').read()
    return re.search(r'PROF_VERSION_STRING "([^"]+)"', text).group(1)


@pytest.mark.parametrize('name', TOOLS)
def test_version_is_the_library_version(tool, name):
    p = tool(name, '--version', check=0)
    assert p.stdout.strip() == f'prof-{name} (prof) {header_version()}'


@pytest.mark.parametrize('name', TOOLS)
def test_help_is_whole(tool, name):
    """Every paragraph of the tool's docstring is in --help, uncut."""
    text = tool(name, '--help', check=0).stdout
    src = open(f'{ROOT}/tools/prof-{name}', encoding='utf-8').read()
    doc = ast.get_docstring(ast.parse(src), clean=False)
    flat = ' '.join(text.split())
    for para in doc.split('\n\n'):
        assert ' '.join(para.split()) in flat, para
    assert '--version' in text


def test_thresholds_one_meaning(tool, write):
    a = write('a.json', synth.summary_text(synth.summary(synth.simulate(10))))
    b = write('b.json', synth.summary_text(synth.summary(synth.simulate(12, slow={'backward': 1.12}))))
    # 12% slower: a 5% gate fails whichever way 5% is written, a 20% gate passes
    for gate in ('5%', '0.05', '5 %', '0.05%'):
        assert tool('diff', a, b, '--fail-if-slower', gate).returncode == 1, gate
    for gate in ('20%', '0.2'):
        assert tool('diff', a, b, '--fail-if-slower', gate).returncode == 0, gate
    # a bare 5 could be 5% or 500%: refused, saying how to write either
    for opt in ('--fail-if-slower', '--threshold'):
        p = tool('diff', a, b, opt, '5')
        assert p.returncode == 2 and 'ambiguous' in p.stderr and '5%' in p.stderr \
            and '0.05' in p.stderr, p.stderr
    p = tool('merge', '-o', write('m.json', ''), '--force', a, a, '--straggler', '10')
    assert p.returncode == 2 and 'ambiguous' in p.stderr
    j = tool('diff', a, b, '--fail-if-slower', '0.05', '--threshold', '0.02', '--json')
    assert '"fail_if_slower_pct": 5.0' in j.stdout and '"threshold_pct": 2.0' in j.stdout


def gz_sync(data, chunk=3000):
    """A gzip stream written as prof does: a sync flush after each batch."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return b''.join(c.compress(data[i:i + chunk]) + c.flush(zlib.Z_SYNC_FLUSH)
                    for i in range(0, len(data), chunk)) + c.flush()


def rows(stdout):
    lines = stdout.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith('stage '))
    return {l.split()[0]: l.split() for l in lines[i + 1:] if l.strip() and not l.startswith('(')}


def test_report_and_diff_read_gz(tool, write, tmp_path):
    zones = synth.simulate(4, steps=30)
    plain_s = synth.summary_text(synth.summary(zones)).encode()
    plain_t = synth.trace(zones).encode()
    gs, gt = tmp_path / 's.json.gz', tmp_path / 't.json.gz'
    gs.write_bytes(gzip.compress(plain_s))
    gt.write_bytes(gzip.compress(plain_t))
    ref = rows(tool('report', write('t.json', plain_t), check=0).stdout)
    assert rows(tool('report', gt, check=0).stdout) == ref
    assert rows(tool('report', gs, check=0).stdout)['train_step'][1] == '30'
    p = tool('diff', gs, gt, '--fail-if-slower', '5%', check=0)
    assert '0 of 6 stages changed' in p.stdout and '(gzip)' in p.stdout
    # two gzip members one after the other (a file appended to) read as one
    (tmp_path / 'two.json.gz').write_bytes(gzip.compress(plain_t[:5000]) + gzip.compress(plain_t[5000:]))
    assert rows(tool('report', tmp_path / 'two.json.gz', check=0).stdout) == ref


def test_killed_run_cut_gz_is_read_as_far_as_it_goes(tool, write, tmp_path):
    zones = synth.simulate(5, steps=40)
    text = synth.trace(zones, terminated=False).encode()
    g = gz_sync(text)
    cut = tmp_path / 'killed.json.gz'
    cut.write_bytes(g[:len(g) * 3 // 4])           # no gzip trailer, no ']', a half event
    p = tool('report', cut, check=0)
    assert 'ends early' in p.stderr
    n = int(rows(p.stdout)['train_step'][1])
    assert 20 <= n < 40
    # a cut inside the gzip header is not data at all: a clear error
    (tmp_path / 'hdr.json.gz').write_bytes(g[:5])
    p = tool('report', tmp_path / 'hdr.json.gz')
    assert p.returncode == 2 and 'Traceback' not in p.stderr


def test_gz_outputs(tool, write, tmp_path):
    f = write('t.json', synth.trace(synth.simulate(6, steps=10)))
    tool('report', f, '--flamegraph', tmp_path / 'f.html.gz', '--folded', tmp_path / 'f.folded.gz',
         check=0)
    assert gzip.decompress((tmp_path / 'f.html.gz').read_bytes()).startswith(b'<!DOCTYPE html>')
    folded = gzip.decompress((tmp_path / 'f.folded.gz').read_bytes()).decode()
    assert folded.startswith('train_step') and len(folded.splitlines()) == 6
