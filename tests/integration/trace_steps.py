"""PROF_TRACE_STEPS: only the chosen steps are traced (step s runs between
the s-th and the (s+1)-th prof_step(); the program names each iteration's
zone "iter <s>"), their step instants are there, every traced zone lies
inside the window, and the statistics still cover every step."""
import os
from common import check, main, run, clean_env, load_trace, json_lines

N = 20


def case(tmp, spec, want, instants):
    path = os.path.join(tmp, f'steps-{spec}.json')
    summ = os.path.join(tmp, f'steps-{spec}.jsonl')
    r = run(['steps', N], clean_env(PROF=1, PROF_TRACE=path, PROF_TRACE_STEPS=spec,
                                    PROF_SUMMARY=summ, PROF_SUMMARY_FORMAT='json'))
    check(r.prof_lines == [], f'{spec}: messages {r.prof_lines}')
    ev = load_trace(path)
    iters = sorted(int(e['name'].split()[1]) for e in ev
                   if e['ph'] == 'X' and e['name'].startswith('iter '))
    check(iters == want, f'PROF_TRACE_STEPS={spec}: traced iterations {iters}, expected {want}')
    inner = [e for e in ev if e['ph'] == 'X' and e['name'] == 'inner']
    check(len(inner) == len(want), f'{spec}: {len(inner)} inner events')
    marks = sorted(e['args']['step'] for e in ev if e['ph'] == 'i' and e['cat'] == 'step')
    # The instant of step s is the s-th prof_step(), where step s begins.
    check(marks == instants, f'{spec}: step instants {marks}, expected {instants}')
    if want and want[0] >= 1:
        first = min(e['ts'] for e in ev if e['ph'] == 'i' and e['cat'] == 'step')
        xs = [e for e in ev if e['ph'] == 'X']
        check(all(e['ts'] >= first for e in xs), f'{spec}: a zone before the window opened')
    # Statistics are not windowed.
    total = json_lines(summ)[-1]['total']
    # (rows are call paths: each iteration's "inner" is under its own "iter <i>")
    inner_count = sum(st['count'] for st in total['stages'] if st['name'] == 'inner')
    check(inner_count == N, f'{spec}: stats lost steps outside the window')
    check(total['steps'] == N, f'{spec}: steps {total["steps"]}')


def test(tmp):
    case(tmp, '5-9', list(range(5, 10)), list(range(5, 10)))
    case(tmp, '15-', list(range(15, N)), list(range(15, N + 1)))
    case(tmp, '3', [3], [3])
    case(tmp, '0-2', [0, 1, 2], [1, 2])
    case(tmp, '30-40', [], [])


main(test)
