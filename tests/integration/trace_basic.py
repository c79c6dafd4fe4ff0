"""A traced run of a small training loop: the file passes the strict
validator (tests/trace_check.py) with the closing ']'; every zone, counter,
mark and step is there with the right nesting, thread names and pid; '%p'
and '%%' in PROF_TRACE expand; the final summary is printed at exit."""
import json
import os
from common import check, main, run, clean_env, load_trace

STEPS = 20


def test(tmp):
    path = os.path.join(tmp, 'trace.json')
    r = run(['basic', STEPS], clean_env(PROF=1, PROF_TRACE=path))
    pid = int(r.values['pid'])
    ev = load_trace(path, expect_stages=['train_step', 'forward', 'attention', 'backward',
                                         'load_batch', 'read'],
                    min_events=6 * STEPS)
    check(open(path, 'rb').read().endswith(b'\n]\n'), 'the file does not end with "\\n]\\n"')
    check(r.prof_lines == [], f'unexpected messages: {r.prof_lines}')

    xs = [e for e in ev if e['ph'] == 'X']
    by = {}
    for e in xs:
        by.setdefault(e['name'], []).append(e)
    for name in ('train_step', 'forward', 'attention', 'backward', 'load_batch', 'read'):
        check(len(by[name]) == STEPS, f'{len(by[name])} {name} events, expected {STEPS}')
    check(all(e['pid'] == pid for e in ev), 'an event with another pid')
    # speedscope names a frame by name and args: one frame per call site,
    # never one per depth or per event.
    frames = {(e['name'], json.dumps(e.get('args'), sort_keys=True)) for e in xs}
    check(len(frames) == len(by), f'a stage split into frames by its args: {sorted(frames)}')
    # Each forward lies inside a train_step of the same thread.
    steps = sorted((e['ts'], e['ts'] + e['dur']) for e in by['train_step'])
    for f in by['forward']:
        check(any(a <= f['ts'] and f['ts'] + f['dur'] <= b + 0.001 for a, b in steps),
              f'forward at {f["ts"]} is not inside a train_step')
    main_tid = by['train_step'][0]['tid']
    worker_tid = by['load_batch'][0]['tid']
    check(main_tid != worker_tid, 'both threads on one track')
    check(main_tid == pid, f'the main thread\'s tid {main_tid} is not the pid {pid}')
    names = {e['tid']: e['args']['name'] for e in ev
             if e['ph'] == 'M' and e['name'] == 'thread_name'}
    check(names.get(main_tid) == 'main-loop', f'thread names {names}')
    check(names.get(worker_tid) == 'worker', f'thread names {names}')

    counters = [e for e in ev if e['ph'] == 'C' and e['name'] == 'loss']
    check(len(counters) == STEPS, f'{len(counters)} loss counter events')
    check(abs(counters[-1]['args']['value'] - 1.0 / STEPS) < 1e-12, 'last loss value')
    marks = [e for e in ev if e['ph'] == 'i' and e.get('cat') == 'mark']
    check([m['name'] for m in marks] == ['epoch'], f'marks {marks}')
    stepev = [e for e in ev if e['ph'] == 'i' and e.get('cat') == 'step']
    check([e['args']['step'] for e in stepev] == list(range(1, STEPS + 1)),
          f'step instants {[e["args"]["step"] for e in stepev]}')
    check(not any(e['name'] == 'prof.dropped' for e in ev), 'drops reported in a run without any')

    # The final summary went to stderr.
    sums = r.summaries
    check(len(sums) == 1 and 'final' in sums[0][0], f'summaries: {[s[0] for s in sums]}')

    # %p and %%.
    pat = os.path.join(tmp, 'run-%p-100%%.json')
    r = run(['basic', 3], clean_env(PROF=1, PROF_TRACE=pat, PROF_SUMMARY='off'))
    want = os.path.join(tmp, f'run-{r.values["pid"]}-100%.json')
    check(os.path.exists(want), f'{want} not written; directory: {os.listdir(tmp)}')
    load_trace(want, expect_stages=['train_step'])


main(test)
