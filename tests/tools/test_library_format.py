"""The tools share the library's definitions (issues 19 and 21): the
histogram of tools/prof_tools.py gives the buckets and quantiles of
src/base/hist.c, and prof-report's table prints a run's numbers as the
runtime's own table does (src/base/units.c: prof_fmt_dur;
src/output/summary_text.c: wall%).
The library's side comes from two small programs built with the tests
(tests/tools/meson.build); run outside meson, they are looked for in the
source tree's build directories, and the tests are skipped without them."""

import glob
import json
import os
import random
import re
import subprocess
import sys

import pytest

from conftest import ROOT, SCRIPTS

sys.path.insert(0, os.path.dirname(os.path.realpath(SCRIPTS['report'])))
import prof_tools as pt  # noqa: E402


def program(env, name):
    path = os.environ.get(env)
    if path and os.path.exists(path):
        return path
    found = sorted(glob.glob(os.path.join(ROOT, 'build*', 'tests', 'tools', name)),
                   key=os.path.getmtime)
    if not found:
        pytest.skip(f'{name} not built (meson builds it with the tests)')
    return found[-1]


QS = ['0', '0.01', '0.25', '0.5', '0.9', '0.95', '0.99', '0.999', '1']


def library_hist(values):
    """-> ([(lo, hi, count)], {q: value}) from src/base/hist.c."""
    p = subprocess.run([program('PROF_HIST_REF', 'hist_ref'), *QS],
                       input=''.join(f'{v}\n' for v in values), capture_output=True,
                       text=True, timeout=60, check=True)
    buckets, qs = [], {}
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == 'b':
            buckets.append(tuple(int(x) for x in f[1:]))
        else:
            qs[f[1]] = float(f[2])
    return buckets, qs


def sample(seed):
    rng = random.Random(seed)
    vals = list(range(0, 70)) + [rng.randrange(1 << 40) for _ in range(50)]
    for k in range(6, 45):            # both sides of every power of two
        vals += [(1 << k) - 1, 1 << k, (1 << k) + 1]
    vals += [int(rng.lognormvariate(12, 1.5)) for _ in range(2000)]
    rng.shuffle(vals)
    return vals


@pytest.mark.parametrize('values', [sample(1), sample(2), [5] * 10, [1234567],
                                    list(range(64)), [63, 64, 65, 127, 128, 129] * 7,
                                    [3, 3, 3, 10 ** 9]],
                         ids=['mixed1', 'mixed2', 'equal', 'one', 'exact', 'edges', 'skew'])
def test_histogram_matches_the_library(values):
    buckets, qs = library_hist(values)
    h = pt.Hist()
    for v in values:
        h.add(v)
    assert h.items() == buckets
    lo, hi = min(values), max(values)
    for q in QS:
        assert h.quantile(float(q), lo, hi) == qs[q], q
    # a summary's "hist" read back gives the same quantiles
    back = pt.Hist.from_list([list(b) for b in buckets], 'test')
    assert [back.quantile(float(q), lo, hi) for q in QS] == [qs[q] for q in QS]


# wall%, then cpu% (a share, or '-' where too little was sampled) and
# peak+ (0, '-' or bytes) where the library sampled.
ROW = re.compile(r'^( *)(\S+) +(\d+)' + r' +(\S+ (?:ns|us|ms|s))' * 7 +
                 r' +(\S+)%(?: +(?:\S+%|-)(?: +(?:0|-|\S+ (?:B|KiB|MiB|GiB|TiB)))?)?$')


def rows(text):
    """{name: (depth, count, [7 durations], wall%)} of a stage table."""
    out = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            out[m.group(2)] = (len(m.group(1)) // 2, m.group(3), list(m.groups()[3:10]),
                               float(m.group(11)))
    return out


def test_report_prints_the_librarys_table(tool, tmp_path):
    env = dict(os.environ, PROF='1', PROF_SUMMARY='off', PROF_TRACE='')
    p = subprocess.run([program('PROF_SUMMARY_PAIR', 'summary_pair')], capture_output=True,
                       text=True, timeout=120, env=env)
    if p.returncode == 77:
        pytest.skip('the runtime is off here')
    assert p.returncode == 0, p.stderr
    text, js = p.stdout.split('----\n')
    (tmp_path / 's.json').write_text(js)
    lib = rows(text)
    assert set(lib) == {'step', 'slow', 'mid', 'inner', 'tiny'}, text
    ours = rows(tool('report', tmp_path / 's.json', check=0).stdout)
    assert set(ours) == set(lib)
    # The two summaries are taken a moment apart: the run's wall time (and
    # so wall%) grew in between, nothing else. wall% x wall is the stage's
    # time either way.
    m = re.search(r'wall ([0-9.]+) (ns|us|ms|s),', text)
    wall_text = float(m.group(1)) * {'ns': 1, 'us': 1e3, 'ms': 1e6, 's': 1e9}[m.group(2)]
    wall_json = json.loads(js)['total']['wall_ns']
    for name, (depth, count, durs, wall) in lib.items():
        o = ours[name]
        assert (o[0], o[1], o[2]) == (depth, count, durs), name
        assert abs(o[3] - wall * wall_text / wall_json) <= 0.1 + wall * 1e-3, name


@pytest.mark.parametrize('ns,text', [(0, '0 ns'), (999, '999 ns'), (999.5, '1000 ns'),
                                     (1000, '1.00 us'), (12345, '12.35 us'),
                                     (12355, '12.36 us'), (999994, '999.99 us'),
                                     (999995, '1000.00 us'), (1e6, '1.00 ms'),
                                     (1.5e9, '1.500 s'), (1234567890123, '1234.568 s')])
def test_duration_format_cases(ns, text):
    """src/output/summary.c's units and decimals, rounding half to even on the
    double's exact value (12345 ns / 1e3 is 12.34500000000000064 in binary,
    above the half: 12.35)."""
    assert pt.fmt_dur(ns) == text
