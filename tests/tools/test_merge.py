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
    p = tool('merge', '-o', out, '--force', r0, r1, check=0)
    events = trace_check.check_trace(out)
    procs = processes(events)
    assert sorted(procs.values()) == ['train_loop (rank 0)', 'train_loop (rank 1)']
    assert len({e['pid'] for e in events}) == 2
    assert sum(e['ph'] == 'X' for e in events) == len(z0) + len(z1)
    rows = table(p.stdout)
    assert rows['backward'].endswith('<- straggler') and 'rank 1' in rows['backward']
    assert 1.5 < spread(rows['backward']) < 1.7      # rank 1's backward is 1.6x rank 0's
    for name in ('data', 'forward', 'attention', 'optimizer'):
        assert 'straggler' not in rows[name] and spread(rows[name]) < 1.05, rows[name]
    assert 'straggler: rank 1' in p.stdout
    assert 'shared monotonic clock' in p.stdout


def test_same_host_keeps_timestamps(tool, write):
    r0, z0 = rank_trace(write, 0, 1, pid=100)
    r1, z1 = rank_trace(write, 1, 2, pid=200, t0=synth.T0_NS + 777_777, rmm=5)
    out = write('merged.json', '')
    tool('merge', '-o', out, '--force', r0, r1, '--align', 'auto', check=0)
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
    p = tool('merge', '-o', out, '--force', r0, r1, check=0)
    assert 'wall clock' in p.stdout
    events = trace_check.check_trace(out)
    pids = sorted(processes(events))
    first = [min(e['ts'] for e in events if e['ph'] == 'X' and e['pid'] == pid) for pid in pids]
    assert first[0] == first[1] == synth.T0_NS / 1000
    refs = {e['args']['prof']['realtime_minus_monotonic_ns'] for e in events
            if e['name'] == 'process_name'}
    assert refs == {rmm0}                  # wall = ts + this, for both processes now
    # Forced monotonic: left as they were.
    tool('merge', '-o', out, '--force', r0, r1, '--align', 'monotonic', check=0)
    events = trace_check.check_trace(out)
    assert min(e['ts'] for e in events if e['ph'] == 'X' and e['pid'] == pids[1]) \
        == (synth.T0_NS + 3_000_000_000) / 1000


def test_wall_alignment_needs_the_reference(tool, write):
    r0, _ = rank_trace(write, 0, 1, host='a', rmm=None)
    r1, _ = rank_trace(write, 1, 2, host='b')
    p = tool('merge', '-o', write('m.json', ''), '--force', r0, r1, '--align', 'wall')
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
    p = tool('merge', '-o', out, '--force', *files, check=0)
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
    tool('merge', '-o', out, '--force', r0, r1, check=0)
    lines = open(out).read().splitlines()
    assert lines[0].startswith('[{"name":"process_name"') and lines[-1] == ']'
    assert all(l.startswith(',{') for l in lines[1:-1])
    # the same bytes for ts as the inputs: three decimals, exact
    assert all(json.loads(l[1:])['ts'] * 1000 % 1 == 0 for l in lines[1:-1] if '"ts"' in l)


def test_merge_rejects_summaries_and_self_overwrite(tool, write):
    s = write('s.json', synth.summary_text(synth.summary(synth.simulate(1, steps=3))))
    r0, _ = rank_trace(write, 0, 1)
    p = tool('merge', '-o', write('m.json', ''), '--force', r0, s)
    assert p.returncode == 2 and 'not a Chrome trace' in p.stderr


def test_output_is_never_an_input(tool, write, tmp_path):
    """`prof-merge r0.json r1.json m.json` (output last, as with cp) used to
    replace rank 0's trace: with -o required, every form that names an input
    as the output is refused and leaves the inputs as they were."""
    r0, _ = rank_trace(write, 0, 1)
    r1, _ = rank_trace(write, 1, 2)
    before = [open(f, 'rb').read() for f in (r0, r1)]
    link = tmp_path / 'link.json'
    link.symlink_to(r0)
    for args in (('-o', r0, r0, r1), ('-o', r1, r0, r1, '--force'), ('-o', str(link), r0, r1),
                 ('-o', str(link), r0, r1, '--force')):
        p = tool('merge', *args)
        assert p.returncode == 2 and 'also an input' in p.stderr, (args, p.stderr)
    p = tool('merge', r0, r1, str(tmp_path / 'm.json'))        # no -o: refused, nothing written
    assert p.returncode == 2 and '-o' in p.stderr
    assert not (tmp_path / 'm.json').exists()
    assert [open(f, 'rb').read() for f in (r0, r1)] == before


def test_existing_output_needs_force(tool, write, tmp_path):
    r0, _ = rank_trace(write, 0, 1)
    r1, _ = rank_trace(write, 1, 2)
    out = write('old.json', 'precious')
    p = tool('merge', '-o', out, r0, r1)
    assert p.returncode == 2 and 'exists' in p.stderr and '--force' in p.stderr
    assert open(out).read() == 'precious'
    tool('merge', '-o', out, r0, r1, '--force', check=0)
    trace_check.check_trace(out)
    fresh = str(tmp_path / 'new.json')
    tool('merge', '-o', fresh, r0, r1, check=0)
    trace_check.check_trace(fresh)
    assert not [f for f in tmp_path.iterdir() if f.name.endswith('.tmp')]


def test_two_ranks_spread_against_the_other_rank(tool, write, tmp_path):
    """With two ranks the median of all inputs is their mean, so a rank 30%
    slower showed as 1.13x (1.3 / 1.15); it is 1.3x the other rank."""
    r0, _ = rank_trace(write, 0, 1, pid=10)
    r1, _ = rank_trace(write, 1, 2, pid=11, slow={name: 1.3 for name in synth.stage_names()})
    p = tool('merge', '-o', tmp_path / 'm.json', r0, r1, check=0)
    rows = table(p.stdout)
    for name in ('backward', 'data', 'attention', 'optimizer'):
        cols = rows[name].split()
        ratios = [float(c[:-1]) for c in cols if c.endswith('x')]
        assert len(ratios) == 2 and all(1.25 < r < 1.35 for r in ratios), rows[name]
        assert 'rank 1' in rows[name]
    # One straggler: the stage where rank 1 spends the most self time per
    # step above the other rank (backward: 0.3 x 8 ms), not every stage.
    assert [n for n, r in rows.items() if r.endswith('<- straggler')] == ['backward']
    assert 'straggler: rank 1' in p.stdout and ' in backward, +' in p.stdout


def test_straggler_among_four_is_named_with_both_ratios(tool, write, tmp_path):
    files = []
    for rank, f in enumerate((1.0, 1.1, 0.5, 2.0)):
        path, _ = rank_trace(write, rank, 10 + rank, pid=20 + rank, slow={'backward': f})
        files.append(path)
    p = tool('merge', '-o', tmp_path / 'm.json', *files, check=0)
    row = table(p.stdout)['backward']
    vs_fastest, vs_median = [float(c[:-1]) for c in row.split() if c.endswith('x')]
    assert 'rank 3' in row and row.endswith('<- straggler')
    assert 3.7 < vs_fastest < 4.3          # 2.0 / 0.5
    assert 1.8 < vs_median < 2.2           # 2.0 / median(1.0, 1.1, 0.5)


def test_gz_inputs_and_output(tool, write, tmp_path):
    import gzip
    r0, z0 = rank_trace(write, 0, 1, pid=30)
    r1, z1 = rank_trace(write, 1, 2, pid=31)
    g0 = tmp_path / 'r0.json.gz'
    g0.write_bytes(gzip.compress(open(r0, 'rb').read()))
    # rank 1 killed: a gzip stream cut short, without its closing ']'
    g1 = tmp_path / 'r1.json.gz'
    text = synth.trace(z1, rank=1, pid=31, terminated=False).encode()
    c = zlib_sync(text)
    g1.write_bytes(c[:len(c) - 40])
    out = tmp_path / 'm.json.gz'
    p = tool('merge', '-o', out, g0, g1, check=0)
    assert 'ends early' in p.stderr
    data = gzip.decompress(out.read_bytes())
    plain = tmp_path / 'm.json'
    plain.write_bytes(data)
    events = trace_check.check_trace(str(plain))
    n1 = sum(e['ph'] == 'X' and e['pid'] == 31 for e in events)
    assert sum(e['ph'] == 'X' and e['pid'] == 30 for e in events) == len(z0)
    assert len(z1) * 0.8 < n1 <= len(z1)  # all but the last few events of the killed rank


def zlib_sync(data, chunk=4096):
    """gzip as prof writes it: a sync flush after each batch."""
    import zlib
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    out = b''.join(c.compress(data[i:i + chunk]) + c.flush(zlib.Z_SYNC_FLUSH)
                   for i in range(0, len(data), chunk))
    return out + c.flush()


def straggler_rows(stdout):
    return [n for n, r in table(stdout).items() if '<- straggler' in r]


def test_only_the_straggler_row_is_marked(tool, write, tmp_path):
    """Issue 19: every stage of a rank that is a bit slower everywhere was
    marked. The runtime's definition (src/output/ranks_table.c) names one (input, stage):
    the most self time per step above the median input's."""
    files = []
    for rank in range(4):
        slow = {n: 1.5 for n in synth.stage_names()} if rank == 2 else None
        if rank == 1:
            slow = {'data': 3.0}             # +4 ms per step in data: the straggler
        files.append(rank_trace(write, rank, 40 + rank, slow=slow, pid=50 + rank)[0])
    p = tool('merge', '-o', tmp_path / 'm.json', *files, check=0)
    # rank 2 is 1.5x everywhere (+4 ms in backward, +1 ms in data...), rank 1
    # 3x in data alone (+4 ms, less the median's share): compute the answer
    # from the definition, independently of the tool.
    import statistics
    per = []
    for f in files:
        zones = [json.loads(l.lstrip('[,')) for l in open(f) if '"ph":"X"' in l]
        steps = sum(1 for l in open(f) if '"cat":"step"' in l)
        own = {}
        by_tid = sorted(zones, key=lambda z: (z['ts'], -z['dur']))
        stack = []
        for z in by_tid:
            while stack and stack[-1]['ts'] + stack[-1]['dur'] <= z['ts']:
                stack.pop()
            if stack:
                own[stack[-1]['name']] = own.get(stack[-1]['name'], 0) - z['dur'] * 1000
            own[z['name']] = own.get(z['name'], 0) + z['dur'] * 1000
            stack.append(z)
        per.append({n: v / steps for n, v in own.items()})
    best = max(((per[k][n] - statistics.median(p[n] for p in per), k, n)
                for k in range(4) for n in per[k]))
    assert straggler_rows(p.stdout) == [best[2]]
    assert f'straggler: rank {best[1]} ' in p.stdout and f' in {best[2]}, +' in p.stdout


def test_equal_inputs_name_no_straggler(tool, write, tmp_path):
    r0, _ = rank_trace(write, 0, 1, pid=60)
    r1, _ = rank_trace(write, 1, 2, pid=61)
    p = tool('merge', '-o', tmp_path / 'm.json', r0, r1, check=0)
    assert straggler_rows(p.stdout) == []
    assert 'no straggler: the largest excess' in p.stdout


def test_help_gives_the_definition(tool):
    p = tool('merge', '--help', check=0)
    assert 'median across all inputs' in ' '.join(p.stdout.split())


def test_straggler_outside_stages(tool, write, tmp_path):
    # Rank 1's extra time is the runtime's "(no stage)" slices (the time no
    # zone of its stepping thread covers): the straggler line says where it
    # is, "outside stages", not a stage it is "in".
    tree = synth.TREE + [('(no stage)', None, 2_000_000)]
    files = []
    for rank in (0, 1):
        zones = synth.simulate(40 + rank, steps=40, tree=tree,
                               slow={'(no stage)': 4.0} if rank else None)
        files.append(write(f'ns{rank}.json', synth.trace(zones, rank=rank, pid=60 + rank)))
    p = tool('merge', '-o', tmp_path / 'm.json', *files, check=0)
    line = next(l for l in p.stdout.splitlines() if l.startswith('straggler:'))
    assert line.startswith('straggler: rank 1 ') and ' outside stages, +' in line, line
    assert ' in (no stage)' not in p.stdout
