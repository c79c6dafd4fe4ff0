"""PROF_TRACE_MAX_MB=1: the file ends no larger than 1 MiB (the limit is a
promise for plain JSON: docs/TRACE.md) and not far below it, stays strictly
valid with its closing ']', ends with the limit note event, and stderr says
so once; the statistics still count every zone."""
import os
from common import check, main, run, clean_env, load_trace, json_lines, stage

N = 100000


def test(tmp):
    path = os.path.join(tmp, 'capped.json')
    summ = os.path.join(tmp, 'capped.jsonl')
    r = run(['many', N], clean_env(PROF=1, PROF_TRACE=path, PROF_TRACE_MAX_MB=1,
                                   PROF_SUMMARY=summ, PROF_SUMMARY_FORMAT='json'))
    size = os.path.getsize(path)
    check(size <= 1024 * 1024, f'trace of {size} bytes with a 1 MB cap')
    # What the code may leave unused: one look's 4 KB of events taken
    # back, the room kept for the note, its padding and the ']'.
    check(size >= 1024 * 1024 - 16384, f'trace of {size} bytes: stopped well before the cap')
    ev = load_trace(path)
    last = ev[-1]
    check(last['ph'] == 'i' and last['name'].startswith('prof: trace size limit reached')
          and last.get('cat') == 'prof', f'last event is not the limit note: {last}')
    notes = [l for l in r.prof_lines if 'limit' in l]
    check(len(notes) == 1 and 'PROF_TRACE_MAX_MB' in notes[0], f'stderr notes: {r.prof_lines}')
    check(len(r.prof_lines) == 1, f'other messages: {r.prof_lines}')
    total = json_lines(summ)[-1]['total']
    check(stage(total, 'many')['count'] == N, 'stats stopped with the trace')

    # Without the cap the same run is much larger (the cap did something).
    path2 = os.path.join(tmp, 'uncapped.json')
    run(['many', N], clean_env(PROF=1, PROF_TRACE=path2, PROF_SUMMARY='off'))
    check(os.path.getsize(path2) > 3 * 1024 * 1024, 'uncapped trace not larger than 3 MB')
    load_trace(path2, min_events=N)


main(test)
