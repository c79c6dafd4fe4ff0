"""The JSON summary against docs/FORMATS.md: one strictly valid object per
line; the top-level fields and their types; sections whose stages are in
tree order (each after its parent, depth = parent's + 1), with consistent
numbers (min <= p50 <= p95 <= p99 <= max, self <= total, avg = total /
count) and histograms (ascending [lo, hi, count] buckets summing to count,
each percentile inside the bucket its rank falls in); counters and marks;
the rank from RANK. Also PROF_SUMMARY=stdout / off. A periodic line holds
its window and no whole-run "total" (a 1-step summary of 32 stages under
16 KB, docs/FORMATS.md), unless PROF_SUMMARY_JSON=full."""
import math
import os
import shutil
import subprocess
import socket
import time
import common
from common import check, main, run, clean_env, json_lines, stage

STEPS = 300

STAGE_KEYS = {'name': str, 'parent': (str, type(None)), 'depth': int, 'gpu': bool,
              'count': int, 'total_ns': int, 'self_ns': int, 'avg_ns': (int, float),
              'min_ns': int, 'max_ns': int, 'p50_ns': (int, float), 'p95_ns': (int, float),
              'p99_ns': (int, float), 'wall_share': (int, float), 'hist': list}


def typed(v, t):
    return isinstance(v, t) and not (isinstance(v, bool) and t in (int, (int, float)))


def check_section(sec, where, share_max=1.0):
    for k, t in (('steps', int), ('wall_ns', int), ('stages', list), ('counters', list),
                 ('marks', list)):
        check(k in sec and typed(sec[k], t), f'{where}: {k} missing or not {t}')
    seen = {}
    for s in sec['stages']:
        w = f'{where}: stage {s.get("name")!r}'
        for k, t in STAGE_KEYS.items():
            check(k in s and typed(s[k], t), f'{w}: {k} missing or of the wrong type')
        if s['parent'] is None:
            check(s['depth'] == 0, f'{w}: no parent but depth {s["depth"]}')
        else:
            check(s['parent'] in seen, f'{w}: listed before its parent {s["parent"]!r}')
            check(s['depth'] == seen[s['parent']] + 1, f'{w}: depth vs its parent')
        seen[s['name']] = s['depth']
        if s['count'] == 0:
            continue
        check(s['min_ns'] <= s['p50_ns'] <= s['p95_ns'] <= s['p99_ns'] <= s['max_ns'],
              f'{w}: min/p50/p95/p99/max out of order')
        check(s['self_ns'] <= s['total_ns'], f'{w}: self > total')
        check(math.isclose(s['avg_ns'], s['total_ns'] / s['count'], rel_tol=1e-9), f'{w}: avg')
        check(0 <= s['wall_share'] and (share_max is None or s['wall_share'] <= share_max),
              f'{w}: wall_share {s["wall_share"]}')
        h = s['hist']
        check(sum(b[2] for b in h) == s['count'], f'{w}: histogram counts != count')
        for a, b in zip(h, h[1:]):
            check(a[1] <= b[0], f'{w}: buckets out of order {a} {b}')
        for b in h:
            check(len(b) == 3 and b[0] < b[1] and b[2] > 0, f'{w}: bad bucket {b}')
        check(h[0][0] <= s['min_ns'] < h[0][1] and h[-1][0] <= s['max_ns'] < h[-1][1],
              f'{w}: min/max outside the first/last bucket')
        for q, key in ((0.5, 'p50_ns'), (0.95, 'p95_ns'), (0.99, 'p99_ns')):
            rank, acc = max(1, math.ceil(q * s['count'] - 1e-9)), 0
            for lo, hi, c in h:
                acc += c
                if acc >= rank:
                    check(lo <= s[key] < hi or s[key] in (s['min_ns'], s['max_ns']),
                          f'{w}: {key} {s[key]} outside its bucket [{lo}, {hi})')
                    break
    for c in sec['counters']:
        for k in ('name', 'count', 'last', 'min', 'max', 'avg'):
            check(k in c, f'{where}: counter lacks {k}')
        check(c['min'] <= c['avg'] <= c['max'], f'{where}: counter {c["name"]} avg outside range')
    for m in sec['marks']:
        check(isinstance(m.get('name'), str) and isinstance(m.get('count'), int),
              f'{where}: bad mark {m}')


def check_top(o, kind, where):
    for k, t in (('prof', str), ('format', int), ('version', str), ('kind', str),
                 ('program', str), ('pid', int), ('host', str), ('unix_time', (int, float)),
                 ('step', int), ('wall_ns', int), ('threads', int), ('dropped', int),
                 ('window' if kind == 'periodic' else 'total', dict)):
        check(k in o and typed(o[k], t), f'{where}: {k} missing or not {t}: {o.get(k)!r}')
    check(o['prof'] == 'summary' and o['format'] == 1, f'{where}: prof/format')
    check(o['kind'] == kind, f'{where}: kind {o["kind"]}')
    check('rank' in o, f'{where}: rank missing (null when there is none)')
    check(abs(o['unix_time'] - time.time()) < 600, f'{where}: unix_time {o["unix_time"]}')
    check(o['host'] == socket.gethostname()[:len(o['host'])], f'{where}: host {o["host"]}')
    if 'total' in o:
        check_section(o['total'], where + ' total')
    if 'window' in o:
        # (Whether a window's numbers match its wall time and steps is
        # summary_periodic.py's subject.)
        check_section(o['window'], where + ' window', share_max=None)


def window_sized(tmp):
    """1-step periodic summaries of 32 stages whose whole-run histograms are
    full: each line holds its window (32 stages) and is under 16 KB; the
    final one has the total; PROF_SUMMARY_JSON=full adds the total to each."""
    steps = 60
    for form in ('window', 'full'):
        path = os.path.join(tmp, f'stages-{form}.jsonl')
        env = dict(PROF=1, PROF_SUMMARY=path, PROF_SUMMARY_FORMAT='json',
                   PROF_SUMMARY_EVERY='1steps')
        if form == 'full':
            env['PROF_SUMMARY_JSON'] = 'full'
        r = run(['stages', steps], clean_env(**env), timeout=300)
        check(r.prof_lines == [], f'{form}: messages {r.prof_lines}')
        with open(path, 'rb') as f:
            raw = f.read().splitlines()
        lines = json_lines(path)
        periodic = [(len(b), l) for b, l in zip(raw, lines) if l['kind'] == 'periodic']
        check(len(periodic) >= steps // 2, f'{form}: {len(periodic)} periodic summaries')
        # The program's 32 stages; its time between them is "(no stage)".
        def named(sec):
            return [st for st in sec['stages'] if st['name'] != '(no stage)']
        check(lines[-1]['kind'] == 'final' and len(named(lines[-1]['total'])) == 32,
              f'{form}: final summary without the 32 stages')
        for size, l in periodic:
            where = f'{form}: periodic summary at step {l["step"]}'
            check_top(l, 'periodic', where)
            check(len(named(l['window'])) == 32, f'{where}: {len(l["window"]["stages"])} stages')
            if form == 'window':
                check('total' not in l, f'{where}: a whole-run section in a periodic line')
                check(size < 16384, f'{where}: {size} bytes (the limit is 16 KB)')
            else:
                check(len(named(l['total'])) == 32, f'{where}: no whole-run section')
    r = run(['basic', 3], clean_env(PROF=1, PROF_SUMMARY_JSON='some'))
    check(len(r.prof_lines) == 1 and 'PROF_SUMMARY_JSON="some"' in r.prof_lines[0],
          f'PROF_SUMMARY_JSON=some: {r.prof_lines}')


def starved_writer(tmp):
    """A writer thread the scheduler leaves off the CPU while summaries
    come every millisecond costs none of them: valgrind runs one thread at
    a time, the extreme of a busy machine (CI's gcc-suites failed this way
    with a queue of 8: the run said its reader was stopped and merged 22
    of 30 summaries)."""
    valgrind = shutil.which('valgrind')
    if valgrind is None or common.sanitizer() != 'none':
        # A sanitizer's runtime and valgrind's cannot share a process.
        print('starved writer: skipped (no valgrind, or a sanitizer build)')
        return
    path = os.path.join(tmp, 'starved.jsonl')
    env = clean_env(PROF=1, PROF_SUMMARY=path, PROF_SUMMARY_FORMAT='json',
                    PROF_SUMMARY_EVERY='10steps')
    p = subprocess.run([valgrind, '-q', '--tool=none', common.PROG, 'basic', str(STEPS)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    err = p.stderr.decode('utf-8', 'replace')
    check(p.returncode == 0, f'starved writer: rc {p.returncode}\n{err[-2000:]}')
    check('prof: ' not in err, f'starved writer: messages\n{err[-2000:]}')
    lines = json_lines(path)
    merged = [l['merged_windows'] for l in lines if l['kind'] == 'periodic' and l['merged_windows'] != 1]
    check(len(lines) == STEPS // 10 + 1 and merged == [],
          f'starved writer: {len(lines)} summaries, merged windows {merged}')


def test(tmp):
    path = os.path.join(tmp, 'sum.jsonl')
    # 300 steps of ~0.1 ms: longer than the collector's 20 ms period, so at
    # least one periodic summary is certain.
    r = run(['basic', STEPS], clean_env(PROF=1, PROF_SUMMARY=path, PROF_SUMMARY_FORMAT='json',
                                        PROF_SUMMARY_EVERY='10steps'))
    pid = int(r.values['pid'])
    check(r.summaries == [] and r.prof_lines == [], f'output on stderr besides the file: {r.prof_lines} {r.summaries}')
    lines = json_lines(path)
    kinds = [l['kind'] for l in lines]
    check(len(kinds) >= 2 and kinds[:-1] == ['periodic'] * (len(kinds) - 1) and kinds[-1] == 'final',
          f'kinds {kinds}')
    for i, l in enumerate(lines):
        check_top(l, l['kind'], f'line {i + 1}')
        check(l['pid'] == pid and l['program'] == 'prog' and l['rank'] is None, 'pid/program/rank')
        check(('window' in l) == (l['kind'] == 'periodic'), 'window only in periodic summaries')
    final = lines[-1]
    t = final['total']
    check(final['threads'] == 2 and final['dropped'] == 0, 'threads / dropped')
    check(t['steps'] == STEPS and final['step'] == STEPS, 'steps')
    order = [s['name'] for s in t['stages']]
    check(order.index('train_step') < order.index('forward') < order.index('attention'),
          f'tree order {order}')
    check(stage(t, 'attention')['parent'] == 'forward', 'attention parent')
    check(stage(t, 'read')['parent'] == 'load_batch', 'read parent')
    ts = stage(t, 'train_step')
    children = sum(stage(t, n)['total_ns'] for n in ('forward', 'backward'))
    check(ts['self_ns'] == ts['total_ns'] - children, 'train_step self != total - children')
    loss = [c for c in t['counters'] if c['name'] == 'loss'][0]
    check(loss['count'] == STEPS and loss['max'] == 1.0 and abs(loss['last'] - 1 / STEPS) < 1e-12,
          f'loss counter {loss}')
    check(t['marks'] == [{'name': 'epoch', 'count': 1}], f'marks {t["marks"]}')

    window_sized(tmp)
    starved_writer(tmp)

    # Rank, in JSON and in the text header.
    path = os.path.join(tmp, 'rank-%r.jsonl')
    run(['basic', 3], clean_env(PROF=1, PROF_SUMMARY=path, PROF_SUMMARY_FORMAT='json', RANK=3))
    lines = json_lines(os.path.join(tmp, 'rank-3.jsonl'))
    check(lines[-1]['rank'] == 3, f'rank {lines[-1]["rank"]}')
    r = run(['basic', 3], clean_env(PROF=1, LOCAL_RANK=5))
    check(', rank 5' in r.summaries[0][0], f'header {r.summaries[0][0]!r}')

    # stdout / off.
    r = run(['basic', 3], clean_env(PROF=1, PROF_SUMMARY='stdout'))
    check(r.summaries == [] and b'prof summary: ' in r.out, 'PROF_SUMMARY=stdout')
    r = run(['basic', 3], clean_env(PROF=1, PROF_SUMMARY='off'))
    check(r.summaries == [] and b'prof summary' not in r.out, 'PROF_SUMMARY=off')


main(test)
