"""The collector re-fits the clock rate at every drain, so the zones of one
thread are converted to nanoseconds with rates a few parts per million
apart. The trace still nests them exactly as their ticks do: a thread
records back-to-back zones (no gap between one zone's end and the next
one's start) while another thread flushes without pause, and every zone in
the file lies inside its parent and after its predecessor (the strict
validator checks that), with every zone there. (tests/unit/trace_place.c
checks the placement itself on synthetic clocks.)"""
import os
from common import check, main, run, clean_env, load_trace

N = 25000  # 225,000 records: they fit the ring asked for below, so none is dropped


def test(tmp):
    path = os.path.join(tmp, 'refit.json')
    r = run(['refit', N], clean_env(PROF=1, PROF_TRACE=path, PROF_SUMMARY='off',
                                         PROF_BUFFER='262144'), timeout=120)
    check(int(r.values['flushes']) >= 25, f'only {r.values["flushes"]} flushes')
    ev = load_trace(path, expect_stages=['outer', 'inner'])
    xs = [e for e in ev if e['ph'] == 'X']
    outer = sum(e['name'] == 'outer' for e in xs)
    inner = sum(e['name'] == 'inner' for e in xs)
    check(outer == N and inner == 8 * N, f'{outer} outer and {inner} inner zones, expected '
          f'{N} and {8 * N}')


if __name__ == '__main__':
    main(test)
