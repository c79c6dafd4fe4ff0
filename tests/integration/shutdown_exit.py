"""The process ends while threads are inside zones: exit() called from a
non-main thread, and main returning while three threads spin in zones.
Repeated; every run exits 0 within the timeout, prints one final summary
with the zones that ended, and leaves a complete trace."""
import os
from common import QUICK, check, main, run, clean_env, load_trace


def test(tmp):
    reps = 3 if QUICK else 10
    for mode, stages in (('exit_thread', ['before_exit', 'spinner_inner']),
                         ('main_returns', ['main_work', 'spinner_inner'])):
        for i in range(reps):
            path = os.path.join(tmp, f'{mode}-{i}.json')
            r = run([mode], clean_env(PROF=1, PROF_TRACE=path), timeout=60)
            sums = r.summaries
            check(len(sums) == 1 and 'final' in sums[0][0],
                  f'{mode}: {len(sums)} summaries\n{r.describe()}')
            for s in stages:
                check(any(l.strip().startswith(s + ' ') for l in sums[0]),
                      f'{mode}: {s} not in the summary\n{r.describe()}')
            load_trace(path, expect_stages=stages)


main(test)
