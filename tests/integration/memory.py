"""The process's memory figures against ground truth the program builds
(memory_prog.c): a "load" stage maps and touches 200 MB, a later stage
unmaps it; a forked child maps 300 MB.

- The run's peak (text header and JSON, bytes) is the kernel's VmHWM read
  by the program at its end, within 1%; the header says it as
  "rss X, peak Y".
- The window that ran "load" has a peak of 200 MB or more; a window after
  the unmap has a peak under 100 MB while the run's stays over 200 MB.
- The trace has the RSS counter track, its largest sample over 200 MiB.
- The metrics (.prom) parse strictly and carry
  process_resident_memory_bytes and prof_process_resident_memory_peak_bytes.
- A forked child's 300 MB is not the parent's: the parent's peak is under
  100 MB (and its VmHWM within 1%), the child's own summary over 300 MB.

    python3 memory.py MEMORY_PROG TRACE_CHECK_PY
"""
import json
import os
import re
import sys

import common
from common import check

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'cuda'))
import labels  # noqa: E402  (the strict Prometheus text checker)

MB = 1024 * 1024
UNITS = {'B': 1, 'KiB': 1024, 'MiB': MB, 'GiB': 1024 * MB, 'TiB': 1024 ** 4}


def hwm(r, prefix='VmHWM '):
    for line in r.out.decode().splitlines():
        if line.startswith(prefix):
            return int(line[len(prefix):])
    raise common.Failure('no %r line on stdout\n%s' % (prefix, r.describe()))


def size(text):
    num, unit = text.split()
    return float(num) * UNITS[unit]


def near(got, want, rel, what, slack=0):
    """got within rel of want, or within slack bytes: the summary is made
    after the program's own read, and its formatting allocates (a few
    hundred KB, which is more than 1% of a 7 MB process)."""
    check(abs(got - want) <= max(rel * want, slack),
          '%s: %d bytes, the kernel says %d (%.2f%% off, %.1f%% allowed)'
          % (what, got, want, 100.0 * abs(got - want) / want, 100 * rel))


def json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_text(tmp):
    r = common.run(['load', 300], env=common.clean_env(PROF=1))
    want = hwm(r)
    head = r.summaries[-1][0]
    m = re.search(r', rss (\S+ \S+), peak (\S+ \S+), clock ', head)
    check(m is not None, 'no "rss X, peak Y" in the header: %r' % head)
    # Three significant figures (0.5%) beside the 1%.
    near(size(m.group(2)), want, 0.015, 'the header\'s peak')
    check(size(m.group(1)) < 100 * MB, 'rss %s after the unmap' % m.group(1))


def test_json(tmp):
    out = os.path.join(tmp, 'summary.jsonl')
    trace = os.path.join(tmp, 'trace.json')
    prom = os.path.join(tmp, 'm.prom')
    r = common.run(['load', 1300], env=common.clean_env(
        PROF=1, PROF_SUMMARY=out, PROF_SUMMARY_FORMAT='json', PROF_SUMMARY_EVERY='1steps',
        PROF_TRACE=trace, PROF_METRICS=prom))
    want = hwm(r)
    lines = json_lines(out)
    final = [s for s in lines if s['kind'] == 'final']
    check(len(final) == 1, 'one final summary, got %d' % len(final))
    f = final[0]
    check(isinstance(f.get('memory'), dict), 'no memory in the final JSON: %r' % f.get('memory'))
    near(f['memory']['rss_peak_bytes'], want, 0.01, 'the JSON run peak')
    near(f['total']['memory']['rss_peak_bytes'], want, 0.01, 'the total section\'s peak')
    check(f['memory']['rss_bytes'] < 100 * MB, 'rss %d after the unmap' % f['memory']['rss_bytes'])
    windows = {s['step']: s for s in lines if s['kind'] == 'periodic'}
    check(1 in windows and 3 in windows, 'windows at steps 1 and 3: %r' % sorted(windows))
    load = windows[1]['window']['memory']['rss_peak_bytes']
    check(load >= 200 * MB, 'the load window\'s peak is %d bytes, under 200 MB' % load)
    after = windows[3]
    check(after['window']['memory']['rss_peak_bytes'] < 100 * MB,
          'the window after the unmap has peak %d' % after['window']['memory']['rss_peak_bytes'])
    check(after['memory']['rss_peak_bytes'] >= 200 * MB,
          'the run peak at step 3 is %d' % after['memory']['rss_peak_bytes'])

    with open(trace, 'rb') as fh:
        events = common.trace_check.parse(fh.read())
    rss = [e['args'] for e in events if e.get('ph') == 'C' and e.get('name') == 'RSS MiB']
    check(rss, 'no "RSS MiB" counter in the trace')
    top = max(max(a.values()) for a in rss)
    check(top >= 200, 'the RSS track\'s largest sample is %.1f MiB' % top)

    with open(prom, 'rb') as fh:
        samples = labels.check_exposition(fh.read())
    for name in ('process_resident_memory_bytes', 'prof_process_resident_memory_peak_bytes'):
        check(name in samples, '%s not in the metrics' % name)
    with open(prom) as fh:
        peak = [float(line.split()[-1]) for line in fh
                if line.startswith('prof_process_resident_memory_peak_bytes')]
    check(peak and peak[0] >= 200 * MB, 'the metrics\' peak: %r' % peak)


def test_fork(tmp):
    if os.environ.get('PROF_TEST_SANITIZER', 'none') == 'thread':
        print('fork part left out: ThreadSanitizer cannot run a forked child that starts a thread')
        return
    out = os.path.join(tmp, 'summary-%p.jsonl')
    r = common.run(['fork'], env=common.clean_env(
        PROF=1, PROF_SUMMARY=out, PROF_SUMMARY_FORMAT='json'))
    parent, child = hwm(r), hwm(r, 'child VmHWM ')
    check(child >= 300 * MB, 'the child\'s VmHWM is %d' % child)
    by_pid = {}
    for name in os.listdir(tmp):
        if name.startswith('summary-'):
            for s in json_lines(os.path.join(tmp, name)):
                if s['kind'] == 'final':
                    by_pid[s['pid']] = s
    check(len(by_pid) == 2, 'final summaries of 2 processes, got %r' % sorted(by_pid))
    roots = sorted(by_pid.values(), key=lambda s: any(st['name'] == 'child_load'
                                                      for st in s['total']['stages']))
    p, c = roots[0], roots[1]
    check(any(st['name'] == 'child_load' for st in c['total']['stages']), 'no child summary')
    check(p['memory']['rss_peak_bytes'] < 100 * MB,
          'the parent\'s peak %d counts the child\'s 300 MB' % p['memory']['rss_peak_bytes'])
    near(p['memory']['rss_peak_bytes'], parent, 0.01, 'the parent\'s peak', slack=MB)
    check(c['memory']['rss_peak_bytes'] >= 300 * MB,
          'the child\'s peak is %d' % c['memory']['rss_peak_bytes'])


def main(tmp):
    test_text(tmp)
    test_json(tmp)
    test_fork(tmp)


common.main(main)
