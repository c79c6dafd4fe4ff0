"""fork: with '%p' in PROF_TRACE a parent and its N children write N+1
valid traces, each holding only its own process's events (children only
their own zones); without '%p' there is one file, the parent's, with none
of the children's events; the children's tables go nowhere by default
(the parent's counts them) and, with PROF_SUMMARY=stderr, to stderr
labelled "forked from <parent pid>". Forking while two threads record, many times
over (children leaving by exit and by _exit), never deadlocks. With a
timed PROF_SUMMARY_EVERY, forked workers that record through two of the
parent's periods print no periodic summary of their own (one table a
period, not one per worker: docs/CONFIG.md)."""
import glob
import os
import subprocess
import sys
from common import QUICK, check, main, run, clean_env, load_trace, sanitizer, skip

N = 3


def merge_workers(tmp, parent, children):
    src = os.environ.get('PROF_TEST_SOURCE_DIR')
    if not src:
        return
    for pid in children:
        first = load_trace(os.path.join(tmp, f'fork-{pid}.json'))[0]
        check(first['args']['prof'].get('forked_from') == parent
              and f'worker of pid {parent}' in first['args']['name'],
              f'worker {pid}: process_name {first}')
    first = load_trace(os.path.join(tmp, f'fork-{parent}.json'))[0]
    check('forked_from' not in first['args']['prof'], f'the parent as a worker: {first}')
    out = os.path.join(tmp, 'merged.json')
    paths = [os.path.join(tmp, f'fork-{pid}.json') for pid in [parent] + children]
    r = subprocess.run([sys.executable, os.path.join(src, 'tools', 'prof-merge'), '-o', out]
                       + paths, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f'prof-merge: {r.returncode}: {r.stderr}')
    check('straggler:' not in r.stdout and 'no straggler named: 3 of the 4 inputs are forked '
          'workers' in r.stdout, f'prof-merge named a straggler among workers:\n{r.stdout}')
    for pid in children:
        check(f'worker {pid} of pid {parent}' in r.stdout, f'worker {pid} unlabelled:\n{r.stdout}')
    load_trace(out)


def test(tmp):
    if sanitizer() == 'thread':
        # The child of a fork starts its own collector thread; ThreadSanitizer
        # does not support threads started after a multithreaded fork (it
        # dies, or with die_after_fork=0 reports "dup thread with used id").
        skip('ThreadSanitizer cannot run a forked child that starts a thread')
    pat = os.path.join(tmp, 'fork-%p.json')
    r = run(['fork', N], clean_env(PROF=1, PROF_TRACE=pat, PROF_SUMMARY='off'), timeout=120)
    parent = int(r.values['pid'])
    children = [int(l.split('=')[1]) for l in r.out.decode().splitlines() if l.startswith('child=')]
    check(len(children) == N, f'children {children}')
    files = sorted(glob.glob(os.path.join(tmp, 'fork-*.json')))
    check(len(files) == N + 1, f'{len(files)} trace files for {N} children: {files}')
    for pid in [parent] + children:
        path = os.path.join(tmp, f'fork-{pid}.json')
        ev = load_trace(path)
        check({e['pid'] for e in ev} == {pid}, f'{path}: pids {({e["pid"] for e in ev})}')
        zones = {e['name'] for e in ev if e['ph'] == 'X'}
        want = 'parent_zone' if pid == parent else 'child_zone'
        check(zones == {want}, f'{path}: zones {zones}, expected only {want}')
        n = sum(e['name'] == want for e in ev if e['ph'] == 'X')
        check(n == (200 if pid == parent else 100), f'{path}: {n} {want} events')

    # prof-merge of the parent and its workers: the workers say whose they
    # are (the trace's forked_from), and no straggler is named between a
    # process and its own workers: they are not ranks.
    merge_workers(tmp, parent, children)

    one = os.path.join(tmp, 'one.json')
    r = run(['fork', N], clean_env(PROF=1, PROF_TRACE=one), timeout=120)
    parent = int(r.values['pid'])
    check(len(glob.glob(os.path.join(tmp, 'one*'))) == 1, 'more than one file without %p')
    ev = load_trace(one)
    check({e['pid'] for e in ev} == {parent}, 'a child wrote into the parent\'s trace')
    check({e['name'] for e in ev if e['ph'] == 'X'} == {'parent_zone'}, 'child zones in the trace')
    # One table a run: the workers' go nowhere by default, the parent's
    # counts them.
    sums = r.summaries
    check([s[0] for s in sums if 'forked from' in s[0]] == [],
          f'workers printed tables with PROF_SUMMARY unset: {[s[0] for s in sums]}')
    check(sum('final' in s[0] and 'forked' not in s[0] for s in sums) == 1,
          'not exactly one final summary of the parent')
    check(f'{N} forked worker processes recorded zones: no summaries of their own'
          in r.err.decode(), 'the parent\'s table does not count its workers')
    # Sent to stderr explicitly, each worker's table is there, labelled.
    r = run(['fork', N], clean_env(PROF=1, PROF_TRACE=one, PROF_SUMMARY='stderr'), timeout=120)
    parent = int(r.values['pid'])
    sums = r.summaries
    labelled = [s for s in sums if f'forked from {parent}' in s[0]]
    check(len(labelled) == N, f'{len(labelled)} child summaries labelled "forked from {parent}"; '
          f'headers: {[s[0] for s in sums]}')
    check(all(any(l.startswith('child_zone ') for l in s) for s in labelled),
          'a child summary without its zones')
    check(sum('final' in s[0] and 'forked' not in s[0] for s in sums) == 1,
          'not exactly one final summary of the parent')

    # Timed periodic summaries: the parent's only. The children record
    # until the parent has made two (an event, not a duration).
    r = run(['fork_periodic', N], clean_env(PROF=1, PROF_SUMMARY_EVERY='100ms'), timeout=120)
    check(int(r.values['periodic']) >= 2,
          f'the parent made {r.values["periodic"]} periodic summaries')
    kids = [int(l.split('=')[1]) for l in r.out.decode().splitlines()
            if l.startswith('child_periodic=')]
    check(len(kids) == N and kids == [0] * N,
          f'timed periodic summaries made by the {N} forked children: {kids}')

    # Fork while threads record, repeatedly.
    forks = 10 if QUICK else 50
    pat = os.path.join(tmp, 'ft-%p.json')
    r = run(['fork_threads', forks], clean_env(PROF=1, PROF_TRACE=pat, PROF_SUMMARY='off'),
            timeout=240)
    parent = int(r.values['pid'])
    files = glob.glob(os.path.join(tmp, 'ft-*.json'))
    check(len(files) == forks + 1, f'{len(files)} files after {forks} forks')
    for path in files:
        # Children that left by _exit() never closed their file.
        ev = load_trace(path, allow_unterminated=True)
        pid = int(os.path.basename(path)[3:-5])
        check({e['pid'] for e in ev} == {pid}, f'{path}: foreign events')
        if pid == parent:
            load_trace(path)
            check(any(e['name'] == 'load_batch' for e in ev), 'parent trace lacks thread zones')
        else:
            names = {e['name'] for e in ev if e['ph'] == 'X'}
            check(names == {'child_zone'}, f'{path}: zones {names}')
    # Without %p and with tracing, the same.
    one = os.path.join(tmp, 'ft-one.json')
    run(['fork_threads', forks], clean_env(PROF=1, PROF_TRACE=one, PROF_SUMMARY='off'),
        timeout=240)
    load_trace(one, expect_stages=['parent_zone', 'load_batch'])


main(test)
