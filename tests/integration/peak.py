"""Which stage raised the process's peak resident memory, against ground
truth the programs build (peak_prog.c, memory_prog.c):

- Two threads: the worker's "load" maps and touches 200 MB once, while
  the main thread computes ("compute", no page faulted); the main thread's
  "churn" maps, touches and unmaps 1 MB every step. The table's peak+ says
  load about 200 MiB (within 10%), churn under 4 MiB (its first step's
  megabyte and what it faulted while load ran), compute under 2 MiB; the
  line under the table names load; the JSON agrees, in bytes; the windows
  after load's give churn under 2 MiB together.
- A burst (8 MiB touched in a stage shorter than about one sampling
  period) is counted to the burst or to the next stage its thread samples
  ("after"), never to the stage before: the two together within 10% of
  8 MiB, "spin" before it under 1 MiB.
- A forked child's 300 MB is its own stage's, in its own summary: the
  parent's stages show no rise.
- PROF_CPU=0: no column, and null in the JSON.

    python3 peak.py PEAK_PROG TRACE_CHECK_PY MEMORY_PROG
"""
import os
import re
import sys

import common
from common import check

MB = 1024 * 1024
UNITS = {'B': 1, 'KiB': 1024, 'MiB': MB, 'GiB': 1024 * MB, 'TiB': 1024 ** 4}
MEMORY_PROG = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None


def size(text):
    if text == '0':
        return 0
    num, unit = text.split()
    return float(num) * UNITS[unit]


def table(block):
    """{stage: peak+ bytes} of a text summary's rows, and its lines."""
    head = [i for i, l in enumerate(block) if l.startswith('stage ')]
    check(head, 'no table in the summary:\n' + '\n'.join(block))
    check(block[head[0]].rstrip().endswith('peak+'),
          'no peak+ column: %r' % block[head[0]])
    rows = {}
    for line in block[head[0] + 1:]:
        m = re.match(r'\s*(\S+)\s.*\s(\d+(?:\.\d+)? (?:B|KiB|MiB|GiB)|0|-)\s*$', line)
        if m and m.group(2) != '-':
            rows[m.group(1)] = rows.get(m.group(1), 0) + size(m.group(2))
    return rows


def final_json(path):
    final = [s for s in common.json_lines(path) if s['kind'] == 'final']
    check(len(final) == 1, 'one final summary, got %d' % len(final))
    return final[0]


def rise(section, name):
    v = common.stage(section, name)['peak_rise_bytes']
    check(isinstance(v, int), '%s: peak_rise_bytes is %r' % (name, v))
    return v


def near_200(got, what):
    check(abs(got - 200 * MB) <= 0.1 * 200 * MB,
          '%s: load raised the peak by %.1f MiB, it touched 200 MiB' % (what, got / MB))


def test_text(tmp):
    r = common.run(['two'], env=common.clean_env(PROF=1))
    block = r.summaries[-1]
    rows = table(block)
    text = '\n'.join(block)
    near_200(rows.get('load', 0), 'the table')
    check(rows.get('churn', 0) < 4 * MB, 'churn: peak+ %.2f MiB\n%s' % (rows.get('churn', 0) / MB, text))
    check(rows.get('compute', 0) < 2 * MB,
          'compute (no page faulted): peak+ %.2f MiB\n%s' % (rows.get('compute', 0) / MB, text))
    line = [l for l in block if ' raised the peak by ' in l]
    check(len(line) == 1, 'no line naming the stage that raised the peak:\n' + text)
    m = re.match(r'(\S+) raised the peak by (\S+ \S+) \(to (\S+ \S+)\)$', line[0])
    check(m is not None and m.group(1) == 'load', 'the line: %r' % line[0])
    near_200(size(m.group(2)), 'the line')
    check(size(m.group(3)) >= 200 * MB, 'the line\'s peak: %r' % line[0])


def test_json(tmp):
    out = os.path.join(tmp, 'two.jsonl')
    common.run(['two'], env=common.clean_env(
        PROF=1, PROF_SUMMARY=out, PROF_SUMMARY_FORMAT='json', PROF_SUMMARY_EVERY='1steps'))
    f = final_json(out)
    near_200(rise(f['total'], 'load'), 'the JSON')
    check(rise(f['total'], 'churn') < 4 * MB, 'churn in the JSON: %d' % rise(f['total'], 'churn'))
    check(rise(f['total'], 'compute') < 2 * MB,
          'compute in the JSON: %d' % rise(f['total'], 'compute'))
    # The windows after load's (step 2): churn's megabyte is below the
    # peak every step, so it raises nothing.
    later = [s for s in common.json_lines(out) if s['kind'] == 'periodic' and s['step'] >= 4]
    check(len(later) >= 5, 'periodic windows after load: %d' % len(later))
    churn = sum(st.get('peak_rise_bytes') or 0 for s in later for st in s['window']['stages']
                if st['name'] == 'churn')
    check(churn < 2 * MB, 'churn raised the peak by %d bytes in the windows after load' % churn)


def test_burst(tmp):
    out = os.path.join(tmp, 'burst.jsonl')
    common.run(['burst', 30], env=common.clean_env(
        PROF=1, PROF_SUMMARY=out, PROF_SUMMARY_FORMAT='json'))
    t = final_json(out)['total']
    spin, burst, after = rise(t, 'spin'), rise(t, 'burst'), rise(t, 'after')
    check(spin < MB, 'spin, before the burst, raised the peak by %d' % spin)
    check(abs(burst + after - 8 * MB) <= 0.1 * 8 * MB,
          'burst %d + after %d bytes: 8 MiB were touched' % (burst, after))


def test_fork(tmp):
    if os.environ.get('PROF_TEST_SANITIZER', 'none') == 'thread':
        print('fork part left out: ThreadSanitizer cannot run a forked child that starts a thread')
        return
    if MEMORY_PROG is None:
        common.skip('no memory_prog')
    common.PROG, prog = MEMORY_PROG, common.PROG
    try:
        out = os.path.join(tmp, 'fork-%p.jsonl')
        common.run(['fork'], env=common.clean_env(
            PROF=1, PROF_SUMMARY=out, PROF_SUMMARY_FORMAT='json'))
    finally:
        common.PROG = prog
    finals = [s for name in os.listdir(tmp) if name.startswith('fork-')
              for s in common.json_lines(os.path.join(tmp, name)) if s['kind'] == 'final']
    check(len(finals) == 2, 'final summaries of 2 processes, got %d' % len(finals))
    for s in finals:
        names = [st['name'] for st in s['total']['stages']]
        if 'child_load' in names:
            got = rise(s['total'], 'child_load')
            check(abs(got - 300 * MB) <= 0.1 * 300 * MB,
                  'the child\'s child_load raised its peak by %d, it touched 300 MiB' % got)
        else:
            check(rise(s['total'], 'parent') < 2 * MB,
                  'the parent\'s stage raised its peak by %d' % rise(s['total'], 'parent'))


def test_off(tmp):
    out = os.path.join(tmp, 'off.jsonl')
    r = common.run(['burst', 5], env=common.clean_env(PROF=1, PROF_CPU=0))
    head = [l for l in r.summaries[-1] if l.startswith('stage ')]
    check(head and 'peak+' not in head[0], 'PROF_CPU=0 shows peak+: %r' % head)
    common.run(['burst', 5], env=common.clean_env(
        PROF=1, PROF_CPU=0, PROF_SUMMARY=out, PROF_SUMMARY_FORMAT='json'))
    check(common.stage(final_json(out)['total'], 'burst')['peak_rise_bytes'] is None,
          'PROF_CPU=0: peak_rise_bytes is not null')


def main(tmp):
    if os.environ.get('PROF_TEST_SANITIZER', 'none') == 'thread':
        # ThreadSanitizer's shadow memory is resident too: a stage that
        # touches 200 MB raises the peak by three times that.
        common.skip('under ThreadSanitizer the peak counts its shadow memory')
    test_text(tmp)
    test_json(tmp)
    test_burst(tmp)
    test_fork(tmp)
    test_off(tmp)


common.main(main)
