"""prof-diff on real runs of examples/train_loop, recorded on the shared
2-core development VM while other builds ran (tests/tools/data/demo):
aNN.json plain runs, bNN.json with --slow attention (its own work x1.2),
recorded interleaved a01 b01 a02 b02 ... so both sides saw the same load.
Several runs per side: the verdict rests on the run-to-run spread."""

import json
import os

import pytest

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'demo')
A = [os.path.join(DEMO, f'a{i:02d}.json') for i in range(1, 21)]
B = [os.path.join(DEMO, f'b{i:02d}.json') for i in range(1, 21)]


def diff(tool, before, after, *extra, check=0):
    p = tool('diff', *before, '--', *after, '--json', '--fail-if-slower', '5%', *extra,
             check=check)
    rows = {r['name']: r for r in json.loads(p.stdout)['stages']}
    return {n: r['verdict'] for n, r in rows.items() if r['verdict'] != 'unchanged'}, rows, p


@pytest.mark.parametrize('i', range(10))
def test_aa_of_interleaved_runs_gives_no_verdict(tool, i):
    """Five runs against the five runs recorded between them, ten times: no
    verdict, and the 5% gate passes (exit 0)."""
    changed, _, _ = diff(tool, A[i:i + 10:2], A[i + 1:i + 10:2], check=0)
    assert changed == {}


@pytest.mark.parametrize('i', range(10))
def test_one_stage_20pct_slower_is_reported_on_that_stage_alone(tool, i):
    """attention's own work x1.2: attention slower by ~20%, nothing else,
    forward's rise put down to attention, and the gate fails on attention."""
    changed, rows, p = diff(tool, A[i:i + 5], B[i:i + 5], check=1)
    assert changed == {'attention': 'slower'}
    assert 15 < rows['attention']['own_median_change_pct'] < 25
    # forward's own time (its ~0.3 us of bookkeeping) did not move
    assert abs(rows['forward']['own_change_pct']) < 1
    if rows['forward']['change_pct'] > 5:
        assert rows['forward']['note'].endswith('from attention')
    assert json.loads(p.stdout)['failed'] == ['attention']
    assert 'FAIL: 1 stage(s)' in p.stderr and 'attention' in p.stderr


def test_directories_as_sides(tool, tmp_path):
    for side, files in (('before', A[0:10:2]), ('after', B[0:5])):
        d = tmp_path / side
        d.mkdir()
        for f in files:
            (d / os.path.basename(f)).write_bytes(open(f, 'rb').read())
    p = tool('diff', tmp_path / 'before', tmp_path / 'after', '--fail-if-slower', '0.15', check=1)
    assert 'attention slower' in p.stdout and '5 vs 5 runs' in p.stdout
    assert 'FAIL' in p.stderr and 'attention' in p.stderr


def test_gate_at_25pct_passes_a_20pct_slowdown(tool):
    changed, _, _ = diff(tool, A[:5], B[:5], '--fail-if-slower', '25%', check=0)
    assert changed == {'attention': 'slower'}
