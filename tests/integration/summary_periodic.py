"""PROF_SUMMARY_EVERY=10steps over 35 steps: exactly three periodic
summaries, at steps 10, 20 and 30, each covering the last 10 steps (window
counts), then the final one at step 35 covering all of them; in JSON (one
object per line, docs/FORMATS.md) and in text ("step 10: last 10 steps").
Steps of 1 ms and steps of 20 us (a loop faster than the collector wakes:
the summaries must still be the ones asked for). A timed period
(PROF_SUMMARY_EVERY=200ms) fires too."""
import os
from common import check, main, run, clean_env, json_lines

STEPS = 35


def count_of(section, name):
    """A stage's count over its rows: rows are call paths, and each step's
    "inner" runs under that step's own "iter <i>"."""
    return sum(st['count'] for st in section['stages'] if st['name'] == name)


def test(tmp):
    for us in (20, 1000):
        by_steps(tmp, us)
    # By time.
    r = run(['periodic_time'], clean_env(PROF=1, PROF_SUMMARY_EVERY='200ms'), timeout=60)
    check(r.values.get('periodic') == '2', f'timed periodic summaries: {r.values}')


def by_steps(tmp, us):
    path = os.path.join(tmp, f'periodic-{us}.jsonl')
    run(['steps', STEPS, us], clean_env(PROF=1, PROF_SUMMARY=path, PROF_SUMMARY_FORMAT='json',
                                        PROF_SUMMARY_EVERY='10steps'))
    lines = json_lines(path)
    kinds = [l['kind'] for l in lines]
    what = f'steps of {us} us'
    check(kinds == ['periodic'] * 3 + ['final'], f'{what}: summary kinds {kinds}')
    check([l['step'] for l in lines] == [10, 20, 30, 35],
          f'{what}: summary steps {[l["step"] for l in lines]}')
    for i, l in enumerate(lines[:3]):
        w = l['window']
        check(w['steps'] == 10, f'periodic {i}: window of {w["steps"]} steps')
        check(count_of(w, 'inner') == 10, f'periodic {i}: window inner count '
              f'{count_of(w, "inner")}')
        check('total' not in l, f'periodic {i}: a whole-run section (PROF_SUMMARY_JSON=full)')
        for st in w['stages']:
            check(st['wall_share'] <= 1.0, f'periodic {i}: window share of {st["name"]} is '
                  f'{st["wall_share"]} (> 100% of the window\'s wall time)')
    final = lines[3]
    check('window' not in final, 'a window in the final summary')
    check(final['total']['steps'] == STEPS, 'final steps')
    check(count_of(final['total'], 'inner') == STEPS, 'final inner count')

    # The same as text, on stderr.
    r = run(['steps', STEPS, us], clean_env(PROF=1, PROF_SUMMARY_EVERY='10steps'))
    heads = [s[0] for s in r.summaries]
    check(len(heads) == 4, f'{len(heads)} text summaries: {heads}')
    for h, n in zip(heads, (10, 20, 30)):
        check(f'step {n}: last 10 steps' in h, f'header {h!r}, expected "step {n}: last 10 steps"')
    check('final: 35 steps' in heads[3], f'final header {heads[3]!r}')
    for s in r.summaries[:3]:
        # (the earlier windows' paths are rows too, none ended in this one)
        inner = [l for l in s if l.strip().startswith('inner ') and l.split()[1].isdigit()
                 and l.split()[1] != '0']
        check(len(inner) == 10 and all(l.split()[1] == '1' for l in inner),
              f'window rows {inner}')


main(test)
