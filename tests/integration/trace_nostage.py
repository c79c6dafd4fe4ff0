"""Time outside every stage, end to end (trace_prog.c's nostage mode).

The main thread steps: N steps of a 2 ms zone "a" and 1 ms outside every
zone. Its uncovered time is the stage "(no stage)": a row of the JSON
summary, Prometheus series, and X slices on the main thread's own track
that never overlap its zones. The worker thread, which never steps, has
3 ms between its zones and none of its time is counted: no "(no stage)"
slice on its track. Nothing here compares timings.
"""
import os
import sys
import common
from common import check, main, run, clean_env, load_trace, json_lines

TPROG = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
N = 30


def test(tmp):
    trace = os.path.join(tmp, 't.json')
    summ = os.path.join(tmp, 's.json')
    prom = os.path.join(tmp, 'm.prom')
    common.PROG = TPROG
    r = run(['nostage', N], clean_env(PROF=1, PROF_TRACE=trace, PROF_SUMMARY=summ,
                                      PROF_SUMMARY_FORMAT='json', PROF_METRICS=prom))
    check(r.prof_lines == [], f'messages {r.prof_lines}')
    total = json_lines(summ)[-1]['total']
    rows = {s['name']: s for s in total['stages']}
    check('(no stage)' in rows, f'no (no stage) row in the JSON summary: {sorted(rows)}')
    ns = rows['(no stage)']
    # At least the N - 1 gaps between a's (each cut in two by its step).
    check(ns['count'] >= N - 1 and ns['total_ns'] > 0, f'(no stage): {ns}')
    check(ns.get('depth', 0) == 0, f'(no stage) is not a top-level row: {ns}')
    ev = load_trace(trace)
    x = [e for e in ev if e['ph'] == 'X']
    main_tid = next(e['tid'] for e in x if e['name'] == 'a')
    worker_tid = next(e['tid'] for e in x if e['name'] == 'w')
    gaps = [e for e in x if e['name'] == '(no stage)']
    check(len(gaps) >= N - 1, f'{len(gaps)} (no stage) slices, expected at least {N - 1}')
    check(all(e['tid'] == main_tid for e in gaps),
          'a (no stage) slice on a thread that does not step (the worker)')
    a = sorted((e['ts'], e['ts'] + e['dur']) for e in x if e['name'] == 'a')
    for g in gaps:
        b, e = g['ts'], g['ts'] + g['dur']
        check(all(e <= s0 + 0.0015 or b >= e0 - 0.0015 for s0, e0 in a),
              f'(no stage) slice {g} overlaps a zone of its thread')
    check(worker_tid != main_tid, 'one track for both threads')
    with open(prom, encoding='utf-8') as f:
        text = f.read()
    check('prof_stage_seconds_total{stage="(no stage)"' in text,
          f'no (no stage) series in the metrics:\n{text[:2000]}')


main(test)
