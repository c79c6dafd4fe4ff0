"""Disk trouble with PROF_TRACE (and PROF_SUMMARY): a path in a missing
directory, an unwritable directory, a directory, a dangling symlink, a
symlink to a file, /dev/full. Each gives exactly one "prof:" line naming
the path, tracing is off, nothing is written through a link, the program
exits 0 and its summary is still printed. A summary written to a pipe whose
reader has gone (PROF_SUMMARY=stdout | a closed reader) gives one line, not
death by SIGPIPE."""
import os
import subprocess
import common
from common import check, main, run, clean_env


def bad_trace(tmp, tag, path, reason_words=()):
    r = run(['basic', 5], clean_env(PROF=1, PROF_TRACE=path))
    lines = r.prof_lines
    check(len(lines) == 1, f'{tag}: {len(lines)} messages, expected one: {lines}')
    check(path in lines[0] and 'trace' in lines[0], f'{tag}: message lacks the path: {lines[0]}')
    for w in reason_words:
        check(w in lines[0], f'{tag}: message lacks "{w}": {lines[0]}')
    sums = r.summaries
    check(len(sums) == 1 and 'final' in sums[0][0], f'{tag}: no final summary\n{r.describe()}')
    check(any(l.startswith('train_step ') for l in sums[0]), f'{tag}: summary lacks stages')
    return r


def test(tmp):
    bad_trace(tmp, 'missing directory', os.path.join(tmp, 'no', 'such', 'dir', 't.json'),
              ['No such file'])

    d = os.path.join(tmp, 'a-directory')
    os.mkdir(d)
    bad_trace(tmp, 'directory', d)

    link = os.path.join(tmp, 'dangling.json')
    target = os.path.join(tmp, 'target-never-created.json')
    os.symlink(target, link)
    bad_trace(tmp, 'dangling symlink', link, ['symbolic link'])
    check(not os.path.exists(target), 'the dangling link\'s target was created')

    link2 = os.path.join(tmp, 'link-to-file.json')
    target2 = os.path.join(tmp, 'existing.txt')
    with open(target2, 'w') as f:
        f.write('keep me')
    os.symlink(target2, link2)
    bad_trace(tmp, 'symlink to a file', link2, ['symbolic link'])
    check(open(target2).read() == 'keep me', 'a file was overwritten through a symlink')

    if os.path.exists('/dev/full'):
        bad_trace(tmp, '/dev/full', '/dev/full', ['No space'])

    if os.geteuid() != 0:
        ro = os.path.join(tmp, 'read-only')
        os.mkdir(ro, 0o555)
        bad_trace(tmp, 'unwritable directory', os.path.join(ro, 't.json'), ['Permission'])
        check(os.listdir(ro) == [], 'a file appeared in the read-only directory')

    # The summary's own file: one message, the summary goes to stderr.
    for tag, path in (('summary in a missing directory', os.path.join(tmp, 'no', 's.txt')),
                      ('summary to a directory', d)):
        r = run(['basic', 5], clean_env(PROF=1, PROF_SUMMARY=path))
        check(len(r.prof_lines) == 1 and path in r.prof_lines[0],
              f'{tag}: messages {r.prof_lines}')
        check(len(r.summaries) == 1, f'{tag}: summary not on stderr\n{r.describe()}')
    if os.path.exists('/dev/full'):
        r = run(['basic', 5], clean_env(PROF=1, PROF_SUMMARY='/dev/full'))
        check(len(r.prof_lines) == 1 and 'summary' in r.prof_lines[0],
              f'summary to /dev/full: messages {r.prof_lines}')

    # A reader that has gone. "steps" prints nothing of its own on stdout.
    rfd, wfd = os.pipe()
    os.close(rfd)
    p = subprocess.run([common.PROG, 'steps', '5'], env=clean_env(PROF=1, PROF_SUMMARY='stdout'),
                       stdout=wfd, stderr=subprocess.PIPE, timeout=60)
    os.close(wfd)
    lines = [l for l in p.stderr.decode('utf-8', 'replace').splitlines() if l.startswith('prof: ')]
    check(p.returncode == 0, f'summary to a closed pipe: exit status {p.returncode} (SIGPIPE is '
          f'{-13}); stderr: {p.stderr.decode("utf-8", "replace")[-1000:]}')
    check(len(lines) == 1 and 'summary' in lines[0], f'summary to a closed pipe: messages {lines}')


main(test)
