"""prof-merge: one process per input, clock alignment, the straggler table."""

import json

import synth
import trace_check


def rank_trace(write, rank, seed, slow=None, **kw):
    zones = synth.simulate(seed, steps=40, slow=slow, t0=kw.pop('t0', synth.T0_NS))
    return write(f'rank{rank}.json', synth.trace(zones, rank=rank, **kw)), zones


def table(stdout):
    """{stage: row columns} of the cross-rank table."""
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('stage '))
    return {l.split()[0]: l for l in lines[start + 1:] if l.split()[0] in synth.stage_names()}


def spread(row):
    return float(next(c for c in row.split() if c.endswith('x'))[:-1])


def processes(events):
    return {e['pid']: e['args']['name'] for e in events
            if e['ph'] == 'M' and e['name'] == 'process_name'}


def test_two_ranks_with_a_straggler(tool, write):
    # Same pid in both files (two containers): the merge must still keep two processes.
    r0, z0 = rank_trace(write, 0, 1, pid=7)
    r1, z1 = rank_trace(write, 1, 2, slow={'backward': 1.6}, pid=7)
    out = write('merged.json', '')
    p = tool('merge', out, r0, r1, check=0)
    events = trace_check.check_trace(out)
    procs = processes(events)
    assert sorted(procs.values()) == ['train_loop (rank 0)', 'train_loop (rank 1)']
    assert len({e['pid'] for e in events}) == 2
    assert sum(e['ph'] == 'X' for e in events) == len(z0) + len(z1)
    rows = table(p.stdout)
    assert rows['backward'].endswith('rank 1  <- straggler')
    assert 1.2 < spread(rows['backward']) < 1.35     # one of two ranks 1.6x: 1.6 / 1.3
    for name in ('data', 'forward', 'attention', 'optimizer'):
        assert 'straggler' not in rows[name] and spread(rows[name]) < 1.05, rows[name]
    assert 'straggler: rank 1' in p.stdout
    assert 'shared monotonic clock' in p.stdout


def test_same_host_keeps_timestamps(tool, write):
    r0, z0 = rank_trace(write, 0, 1, pid=100)
    r1, z1 = rank_trace(write, 1, 2, pid=200, t0=synth.T0_NS + 777_777, rmm=5)
    out = write('merged.json', '')
    tool('merge', out, r0, r1, '--align', 'auto', check=0)
    events = trace_check.check_trace(out)
    first = {pid: min(e['ts'] for e in events if e['ph'] == 'X' and e['pid'] == pid)
             for pid in (100, 200)}
    assert first == {100: synth.T0_NS / 1000, 200: (synth.T0_NS + 777_777) / 1000}


def test_hosts_apart_align_on_wall_clock(tool, write):
    """Two machines booted at different times: rank 1's monotonic clock is 3 s
    ahead, its realtime - monotonic 3 s behind: the same wall-clock instant."""
    rmm0 = 1_794_000_000_000_000_000
    r0, _ = rank_trace(write, 0, 1, host='a', rmm=rmm0)
    r1, _ = rank_trace(write, 1, 2, host='b', rmm=rmm0 - 3_000_000_000,
                       t0=synth.T0_NS + 3_000_000_000)
    out = write('merged.json', '')
    p = tool('merge', out, r0, r1, check=0)
    assert 'wall clock' in p.stdout
    events = trace_check.check_trace(out)
    pids = sorted(processes(events))
    first = [min(e['ts'] for e in events if e['ph'] == 'X' and e['pid'] == pid) for pid in pids]
    assert first[0] == first[1] == synth.T0_NS / 1000
    refs = {e['args']['prof']['realtime_minus_monotonic_ns'] for e in events
            if e['name'] == 'process_name'}
    assert refs == {rmm0}                  # wall = ts + this, for both processes now
    # Forced monotonic: left as they were.
    tool('merge', out, r0, r1, '--align', 'monotonic', check=0)
    events = trace_check.check_trace(out)
    assert min(e['ts'] for e in events if e['ph'] == 'X' and e['pid'] == pids[1]) \
        == (synth.T0_NS + 3_000_000_000) / 1000


def test_wall_alignment_needs_the_reference(tool, write):
    r0, _ = rank_trace(write, 0, 1, host='a', rmm=None)
    r1, _ = rank_trace(write, 1, 2, host='b')
    p = tool('merge', write('m.json', ''), r0, r1, '--align', 'wall')
    assert p.returncode == 2 and 'realtime_minus_monotonic_ns' in p.stderr


def test_unterminated_inputs_and_forked_workers(tool, write):
    """Workers of one program without ranks, one of them killed: names
    stay apart, the output is terminated and valid."""
    files = []
    for k in range(3):
        zones = synth.simulate(k, steps=10, tid=300 + k)
        files.append(write(f'w{k}.json', synth.trace(zones, rank=None, pid=300 + k,
                                                       terminated=(k != 1))))
    out = write('merged.json', '')
    p = tool('merge', out, *files, check=0)
    assert 'no closing' in p.stderr
    assert open(out).read().endswith('\n]\n')
    events = trace_check.check_trace(out, min_events=3 * 60)
    names = sorted(processes(events).values())
    assert len(set(names)) == 3 and all(n.startswith('train_loop') for n in names)
    assert 'pid 301' in p.stdout           # inputs without a rank are labelled by pid


def test_output_follows_the_line_layout(tool, write):
    r0, _ = rank_trace(write, 0, 1)
    r1, _ = rank_trace(write, 1, 2)
    out = write('merged.json', '')
    tool('merge', out, r0, r1, check=0)
    lines = open(out).read().splitlines()
    assert lines[0].startswith('[{"name":"process_name"') and lines[-1] == ']'
    assert all(l.startswith(',{') for l in lines[1:-1])
    # the same bytes for ts as the inputs: three decimals, exact
    assert all(json.loads(l[1:])['ts'] * 1000 % 1 == 0 for l in lines[1:-1] if '"ts"' in l)


def test_merge_rejects_summaries_and_self_overwrite(tool, write):
    s = write('s.json', synth.summary_text(synth.summary(synth.simulate(1, steps=3))))
    r0, _ = rank_trace(write, 0, 1)
    p = tool('merge', write('m.json', ''), r0, s)
    assert p.returncode == 2 and 'not a Chrome trace' in p.stderr
    p = tool('merge', r0, r0)
    assert p.returncode == 2 and 'also an input' in p.stderr
