"""Every PROF_* variable with good and bad values, through a real process
(tests/integration/prog env). A bad value gives exactly one "prof:" line on
stderr naming the variable and showing the value (escaped, cut when huge),
and the program goes on with the default; an empty value is unset; PROF=0
wins over prof_enable(1)."""
import os
import re
import subprocess
import common
from common import check, main, run, clean_env, load_trace

EPERM, ESRCH = 1, 3


def prog_env(enable=False, **env):
    return run(['env'] + (['enable'] if enable else []), clean_env(**env))


def no_messages(r, what):
    check(r.prof_lines == [], f'{what}: unexpected messages {r.prof_lines}')


def one_message(r, var, shown, what):
    lines = r.prof_lines
    check(len(lines) == 1, f'{what}: {len(lines)} messages, expected one: {lines}')
    check(var + '=' in lines[0], f'{what}: message does not name {var}: {lines[0]}')
    check(shown in lines[0], f'{what}: message does not show {shown!r}: {lines[0]}')
    check(len(lines[0]) < 400, f'{what}: message of {len(lines[0])} characters')
    check(all(0x20 <= ord(c) < 0x7f for c in lines[0]), f'{what}: raw bytes in {lines[0]!r}')


def recording(r, what):
    v = r.values
    check(v.get('enabled') == '1' and v.get('flush') == '0', f'{what}: not recording: {v}')
    check(int(v['burst']) + int(v['dropped']) == 20000, f'{what}: burst + dropped != 20000: {v}')


def not_recording(r, what):
    v = r.values
    check(v.get('enabled') == '0' and v.get('flush') == str(-ESRCH), f'{what}: recording: {v}')
    check(r.summaries == [], f'{what}: a summary was printed')


def test(tmp):
    # PROF
    r = prog_env()
    no_messages(r, 'PROF unset')
    not_recording(r, 'PROF unset')
    r = prog_env(enable=True)
    check(r.values['enable'] == '0', 'prof_enable(1) with PROF unset')
    recording(r, 'PROF unset + prof_enable(1)')
    for v in ('1', 'on', 'true', 'yes', 'ON', 'Yes'):
        r = prog_env(PROF=v)
        no_messages(r, f'PROF={v}')
        recording(r, f'PROF={v}')
        check(int(r.values['dropped']) == 0, f'PROF={v}: drops with the default ring')
        check(len(r.summaries) == 1, f'PROF={v}: {len(r.summaries)} summaries at exit')
    for v in ('0', 'off', 'false', 'no', 'OFF'):
        r = prog_env(enable=True, PROF=v)
        no_messages(r, f'PROF={v}')
        check(r.values['enable'] == str(-EPERM), f'PROF={v}: prof_enable(1) = {r.values}')
        not_recording(r, f'PROF={v} + prof_enable(1)')
    r = prog_env(PROF='')
    no_messages(r, 'PROF=""')
    not_recording(r, 'PROF=""')
    huge = 'x' * 100000
    for v, shown in (('2', '"2"'), ('maybe', '"maybe"'), ('-1', '"-1"'), (' 1', '" 1"'),
                     ('1;rm -rf', '1;rm -rf'), ('\x1b[31mred', '\\x1b[31mred'),
                     ('%s%n', '%s%n'), (huge, 'xxxxxxxxxx...')):
        r = prog_env(PROF=v)
        one_message(r, 'PROF', shown, f'PROF={v[:20]!r}')
        not_recording(r, f'PROF={v[:20]!r}')
        r = prog_env(enable=True, PROF=v)
        recording(r, f'PROF={v[:20]!r} + prof_enable(1)')   # bad is not "0"

    # PROF_SUMMARY_EVERY: accepted values and bad ones (that periodic
    # summaries come at the right steps is summary_periodic.py's test).
    for v in ('10steps', '5steps', '1h', '250ms', 'off', '0'):
        r = prog_env(PROF=1, PROF_SUMMARY_EVERY=v)
        no_messages(r, f'PROF_SUMMARY_EVERY={v}')
        recording(r, f'PROF_SUMMARY_EVERY={v}')
        if v in ('off', '0', '1h'):
            check([s[0] for s in r.summaries if 'final' not in s[0]] == [],
                  f'PROF_SUMMARY_EVERY={v}: periodic summaries')
    for v in ('10', '-5s', '0steps', 'abc', '5 steps', '99999999999999999999s', '1.5s',
              '18446744073709551615h', '5124095h', '18446744073709551615ns'):
        r = prog_env(PROF=1, PROF_SUMMARY_EVERY=v)
        one_message(r, 'PROF_SUMMARY_EVERY', v, f'PROF_SUMMARY_EVERY={v}')
        check([s[0] for s in r.summaries if 'final' not in s[0]] == [],
              f'PROF_SUMMARY_EVERY={v}: periodic summaries')
        recording(r, f'PROF_SUMMARY_EVERY={v}')

    # PROF_SUMMARY_FORMAT
    r = prog_env(PROF=1, PROF_SUMMARY_FORMAT='json')
    no_messages(r, 'PROF_SUMMARY_FORMAT=json')
    err = r.err.decode()
    check(err.startswith('{"prof":"summary"') and err.count('\n') == 1,
          f'PROF_SUMMARY_FORMAT=json: stderr {err[:200]!r}')
    for v in ('text', ''):
        r = prog_env(PROF=1, PROF_SUMMARY_FORMAT=v)
        no_messages(r, f'PROF_SUMMARY_FORMAT={v}')
        check(len(r.summaries) == 1, f'PROF_SUMMARY_FORMAT={v}: no table')
    for v in ('xml', 'JSON', 'json '):
        r = prog_env(PROF=1, PROF_SUMMARY_FORMAT=v)
        one_message(r, 'PROF_SUMMARY_FORMAT', f'"{v}"', f'PROF_SUMMARY_FORMAT={v}')
        check(len(r.summaries) == 1, f'PROF_SUMMARY_FORMAT={v}: no table (the default)')

    # PROF_BUFFER: a 20000-zone burst overflows a small ring, never the default.
    for v in ('16', '100'):
        r = prog_env(PROF=1, PROF_BUFFER=v)
        # The loss is said once, with its remedy (issue 20), and nothing else.
        check(len(r.prof_lines) == 1 and 'lost' in r.prof_lines[0] and
              'PROF_BUFFER=' in r.prof_lines[0], f'PROF_BUFFER={v}: messages {r.prof_lines}')
        recording(r, f'PROF_BUFFER={v}')
        check(int(r.values['dropped']) > 0, f'PROF_BUFFER={v}: no drops from a 20000 burst')
        m = re.search(r', (\d+) dropped', r.summaries[0][0])
        check(m and int(m.group(1)) >= int(r.values['dropped']),
              f'drops not in the header: {r.summaries[0][0]}')
    for v in ('64k', '1M', ''):
        r = prog_env(PROF=1, PROF_BUFFER=v)
        no_messages(r, f'PROF_BUFFER={v}')
        check(r.values['dropped'] == '0', f'PROF_BUFFER={v}: drops {r.values}')
    for v in ('0', '15', '-1', '64q', '17M', '99999999999999999999999', '1k1', '0x100'):
        r = prog_env(PROF=1, PROF_BUFFER=v)
        one_message(r, 'PROF_BUFFER', v, f'PROF_BUFFER={v}')
        recording(r, f'PROF_BUFFER={v}')
        check(r.values['dropped'] == '0', f'PROF_BUFFER={v}: not the default ring: {r.values}')

    # PROF_TRACE_STEPS and PROF_TRACE_MAX_MB: a bad value traces everything.
    trace = os.path.join(tmp, 't.json')
    r = prog_env(PROF=1, PROF_TRACE=trace, PROF_TRACE_STEPS='3-5')
    no_messages(r, 'PROF_TRACE_STEPS=3-5')
    steps = [e['args']['step'] for e in load_trace(trace) if e['ph'] == 'i' and e['cat'] == 'step']
    check(steps == [3, 4, 5], f'PROF_TRACE_STEPS=3-5: steps {steps}')
    for v in ('-1', '-9', '9-5', 'five', '5-9x', '1..3', '99999999999999999999999-'):
        r = prog_env(PROF=1, PROF_TRACE=trace, PROF_TRACE_STEPS=v)
        one_message(r, 'PROF_TRACE_STEPS', v, f'PROF_TRACE_STEPS={v}')
        steps = [e['args']['step'] for e in load_trace(trace)
                 if e['ph'] == 'i' and e['cat'] == 'step']
        check(steps == list(range(1, 31)), f'PROF_TRACE_STEPS={v}: steps {steps}')
    for v in ('0', '100', '1k'):
        r = prog_env(PROF=1, PROF_TRACE=trace, PROF_TRACE_MAX_MB=v)
        no_messages(r, f'PROF_TRACE_MAX_MB={v}')
        load_trace(trace, min_events=20000)
    for v in ('-1', '1.5', 'lots', '17592186044416', '1 MB'):
        r = prog_env(PROF=1, PROF_TRACE=trace, PROF_TRACE_MAX_MB=v)
        one_message(r, 'PROF_TRACE_MAX_MB', v, f'PROF_TRACE_MAX_MB={v}')
        ev = load_trace(trace, min_events=20000)
        check(not any(e['name'].startswith('prof: trace size limit') for e in ev),
              f'PROF_TRACE_MAX_MB={v}: capped')

    # PROF_CUDA and PROF_NVTX: no GPU here; a good value may give one notice
    # that the backend is unavailable, never a complaint about the value.
    for var, goods, bads in (('PROF_CUDA', ('auto', '0', '1', 'off'), ('2', 'gpu', 'auto ')),
                             ('PROF_NVTX', ('0', '1', 'no'), ('2', 'nvtx'))):
        for v in goods:
            r = prog_env(PROF=1, **{var: v})
            check(len(r.prof_lines) <= 1 and not any('not valid' in l for l in r.prof_lines),
                  f'{var}={v}: messages {r.prof_lines}')
            recording(r, f'{var}={v}')
        for v in bads:
            r = prog_env(PROF=1, **{var: v})
            one_message(r, var, f'"{v}"', f'{var}={v}')
            recording(r, f'{var}={v}')

    # PROF_NVTX=1 without PROF=1 at load: NVTX is set up at load or never,
    # and the user is told once, whether or not the program enables.
    for enable, extra in ((False, {}), (True, {}), (False, {'PROF': '0'})):
        r = prog_env(enable=enable, PROF_NVTX='1', **extra)
        one_message(r, 'PROF_NVTX', 'PROF=1', f'PROF_NVTX=1 {extra} enable={enable}')
        if enable:
            recording(r, 'PROF_NVTX=1 + prof_enable(1)')

    # A write that fails (a full disk): the summary that failed and every
    # later one go to stderr, said once; none is lost.
    if os.path.exists('/dev/full'):
        r = prog_env(PROF=1, PROF_SUMMARY='/dev/full', PROF_SUMMARY_EVERY='10steps')
        lines = r.prof_lines
        check(len(lines) == 1 and '/dev/full' in lines[0] and 'stderr' in lines[0],
              f'PROF_SUMMARY=/dev/full: messages {lines}')
        heads = [s[0] for s in r.summaries]
        check(len(heads) == 4 and 'final' in heads[-1] and
              [h.split('step ')[1].split(':')[0] for h in heads[:3]] == ['10', '20', '30'],
              f'PROF_SUMMARY=/dev/full: summaries on stderr: {heads}')
        with open('/dev/full', 'wb') as full:
            p = subprocess.run([common.PROG, 'env'], stdout=full, stderr=subprocess.PIPE,
                               env=clean_env(PROF=1, PROF_SUMMARY='stdout',
                                             PROF_SUMMARY_EVERY='10steps'), timeout=120)
        r = common.Result(['env'], p.returncode, b'', p.stderr)
        check(p.returncode == 0, f'PROF_SUMMARY=stdout > /dev/full: exit status {p.returncode}')
        check(len(r.prof_lines) == 1 and 'stdout' in r.prof_lines[0],
              f'PROF_SUMMARY=stdout > /dev/full: messages {r.prof_lines}')
        check(len(r.summaries) == 4, f'PROF_SUMMARY=stdout > /dev/full: {len(r.summaries)} '
              'summaries on stderr, want 3 periodic + final')

    # PROF_TRACE and PROF_SUMMARY naming one file: the trace keeps it, the
    # summary goes to stderr, one message. The same string, another
    # spelling, the same %p expansion, a hard link to the trace.
    same = os.path.join(tmp, 'same.json')
    link = os.path.join(tmp, 'link.json')
    open(same, 'w').close()
    os.link(same, link)
    for t, sm in ((same, same), (same, os.path.join(tmp, '.', 'same.json')),
                  (os.path.join(tmp, 'p%p.json'), os.path.join(tmp, 'p%p.json')), (same, link)):
        r = prog_env(PROF=1, PROF_TRACE=t, PROF_SUMMARY=sm)
        what = f'PROF_TRACE={t} PROF_SUMMARY={sm}'
        lines = r.prof_lines
        check(len(lines) == 1 and 'PROF_SUMMARY' in lines[0] and 'PROF_TRACE' in lines[0],
              f'{what}: messages {lines}')
        check(len(r.summaries) == 1, f'{what}: the summary is not on stderr')
        paths = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith('p')] \
            if '%p' in t else [t]
        check(len(paths) == 1, f'{what}: trace files {paths}')
        load_trace(paths[0], min_events=20000)
        if '%p' in t:
            os.unlink(paths[0])

    # Rank variables that are not ranks: said once, then the next one is
    # tried; %r is 0 when none is good.
    rpat = os.path.join(tmp, 'r%r.json')
    for extra, var, shown, rank in ((dict(RANK='abc'), 'RANK', 'abc', 0),
                                    (dict(RANK='-1'), 'RANK', '-1', 0),
                                    (dict(LOCAL_RANK='1000000'), 'LOCAL_RANK', '1000000', 0),
                                    (dict(RANK='99999999999999999999'), 'RANK', '9999999', 0),
                                    (dict(RANK='3x', LOCAL_RANK='2'), 'RANK', '3x', 2),
                                    (dict(RANK='', LOCAL_RANK='x', PMI_RANK='y'), 'LOCAL_RANK',
                                     'x', 0)):
        for f in os.listdir(tmp):
            if f.startswith('r') and f.endswith('.json'):
                os.unlink(os.path.join(tmp, f))
        r = prog_env(PROF=1, PROF_TRACE=rpat, **extra)
        one_message(r, var, shown, f'{extra}')
        check(os.path.exists(os.path.join(tmp, f'r{rank}.json')),
              f'{extra}: trace not at r{rank}.json: {sorted(os.listdir(tmp))}')
    r = prog_env(PROF=1, PROF_TRACE=rpat, RANK='7', LOCAL_RANK='junk')
    no_messages(r, 'RANK=7 LOCAL_RANK=junk (LOCAL_RANK is not read)')
    check(os.path.exists(os.path.join(tmp, 'r7.json')), 'RANK=7: trace not at r7.json')

    # Several at once: one line each, in any order.
    r = prog_env(PROF=1, PROF_BUFFER='7', PROF_SUMMARY_EVERY='x', PROF_SUMMARY_FORMAT='y',
                 PROF_TRACE_STEPS='z', PROF_TRACE_MAX_MB='w', PROF_CUDA='v', PROF_NVTX='u')
    check(len(r.prof_lines) == 7, f'7 bad values: {r.prof_lines}')
    recording(r, 'several bad values')


main(test)
