"""Output that is always valid, whatever the program does around prof.

  locale      a program that calls setlocale(LC_ALL, "") under a
              comma-decimal locale (de_DE.UTF-8, generated here when the
              system lacks it) still writes 0.25, never 0,25: in the trace,
              the JSON summary and the text summary.
  NaN/Inf     counter samples that are NaN or Inf are left out of the trace
              (JSON has no such numbers), the others stay.
  nesting     zones that end at their parent's nanosecond nest as viewers
              compute them (ts + dur in doubles; trace_check checks every
              trace that way), and X events carry no args but their
              call site's src.
  main        the thread named "main" is the process's main thread (tid ==
              pid) although another thread recorded first.
  close race  a second signal (SIGTERM) during the final close that the
              first (SIGINT) started: the file has exactly one end and is
              complete, plain and gzip (the handler waits for a batch
              being written; before, a third of the plain files and three
              quarters of the gzip ones lost their end).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import common
from common import Failure, check, main, run, clean_env, load_trace, json_lines

TPROG = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
LOCALE = 'de_DE.UTF-8'


def trun(args, env, **kw):
    """Run trace_prog.c instead of prog.c."""
    saved, common.PROG = common.PROG, TPROG
    try:
        return run(args, env, **kw)
    finally:
        common.PROG = saved


def comma_locale(tmp):
    """Environment additions that select a comma-decimal locale, or None.
    First the system's; then one compiled into tmp with localedef (LOCPATH,
    no root needed); then, as root, /etc/locale.gen + locale-gen."""
    def have():
        out = subprocess.run(['locale', '-a'], capture_output=True, text=True).stdout
        return any(l.lower().replace('-', '') == 'de_de.utf8' for l in out.split())
    if shutil.which('locale') and have():
        return {}
    if shutil.which('localedef'):
        d = os.path.join(tmp, 'locales')
        os.makedirs(d, exist_ok=True)
        r = subprocess.run(['localedef', '-i', 'de_DE', '-f', 'UTF-8', os.path.join(d, LOCALE)],
                           capture_output=True)
        if os.path.isdir(os.path.join(d, LOCALE)):
            return {'LOCPATH': d}
    if os.geteuid() == 0 and os.path.exists('/etc/locale.gen') and shutil.which('locale-gen'):
        subprocess.run(['sed', '-i', 's/^# *de_DE.UTF-8/de_DE.UTF-8/', '/etc/locale.gen'])
        subprocess.run(['locale-gen'], capture_output=True)
        if have():
            return {}
    return None


def test_locale(tmp):
    extra = comma_locale(tmp)
    if extra is None:
        print(f'SKIP part: no {LOCALE} locale and none could be generated (Debian: apt-get '
              f'install locales; then localedef, or locale-gen as root)')
        return False
    env_loc = dict(extra, LANG=LOCALE, LC_ALL=LOCALE)
    path = os.path.join(tmp, 'locale.json')
    summ = os.path.join(tmp, 'locale.jsonl')
    r = trun(['locale'], clean_env(PROF=1, PROF_TRACE=path, PROF_SUMMARY=summ,
                                   PROF_SUMMARY_FORMAT='json', **env_loc))
    if r.values.get('decimal_point') != ',':
        print(f'SKIP part: setlocale gave {r.values.get("locale")!r} with decimal point '
              f'{r.values.get("decimal_point")!r}, not a comma')
        return False
    text = open(path, 'rb').read().decode()
    ev = load_trace(path, expect_stages=['outer', 'inner'])
    loss = [e['args']['value'] for e in ev if e['ph'] == 'C' and e['name'] == 'loss']
    check(loss == [0.25] * 20 + [0.75], f'loss samples in the trace: {loss} (NaN/Inf must be left '
          f'out, the rest kept)')
    check('"value":0.25}' in text, 'the trace does not spell 0.25')
    tiny = [e['args']['value'] for e in ev if e['ph'] == 'C' and e['name'] == 'tiny']
    check(tiny and all(v == 1.5e-7 for v in tiny), f'tiny samples {tiny[:3]}')
    # The JSON summary parses strictly and holds the numbers.
    last = json_lines(summ)[-1]
    check(isinstance(last.get('unix_time'), float), f'unix_time {last.get("unix_time")!r}')
    tiny_c = [c for c in last['total'].get('counters', []) if c.get('name') == 'tiny']
    check(len(tiny_c) == 1 and tiny_c[0].get('last') == 1.5e-7 and tiny_c[0].get('min') == 1.5e-7,
          f'the JSON summary\'s "tiny" counter: {tiny_c}')
    # The text summary: durations, shares and counter values with a point.
    r = trun(['locale'], clean_env(PROF=1, PROF_SUMMARY='stderr', **env_loc))
    s = r.summaries[-1]
    body = '\n'.join(s)
    commas = re.findall(r'\d+,\d+', body)
    check(not commas, f'decimal commas in the text summary: {commas}\n{body}')
    check(re.search(r'\d+\.\d+ (us|ms)', body), f'no durations with a decimal point:\n{body}')
    check(re.search(r'\btiny +20 +1\.5e-07 ', body), f'the "tiny" counter row lacks 1.5e-07:\n{body}')
    return True


def test_nan_plain(tmp):
    """Without a locale: NaN/Inf samples are left out of the trace."""
    path = os.path.join(tmp, 'nan.json')
    trun(['locale'], clean_env(PROF=1, PROF_TRACE=path, PROF_SUMMARY='off'))
    ev = load_trace(path)
    loss = [e['args']['value'] for e in ev if e['ph'] == 'C' and e['name'] == 'loss']
    check(loss == [0.25] * 20 + [0.75], f'loss samples in the trace: {loss}')


def test_nesting(tmp):
    path = os.path.join(tmp, 'flat.json')
    trun(['flat', 200000], clean_env(PROF=1, PROF_TRACE=path, PROF_SUMMARY='off',
                                     PROF_BUFFER='1M'))
    ev = load_trace(path, expect_stages=['a', 'b', 'c'], min_events=600000)
    check(not any('args' in e for e in ev if e['ph'] == 'X'), 'X events with args')


def test_main_thread(tmp):
    path = os.path.join(tmp, 'main.json')
    r = trun(['late_main'], clean_env(PROF=1, PROF_TRACE=path, PROF_SUMMARY='off'))
    pid = int(r.values['pid'])
    ev = load_trace(path, expect_stages=['worker_zone', 'main_zone'])
    names = {e['tid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name'}
    check(names.get(pid) == 'main', f'the main thread (tid {pid}) is named {names.get(pid)!r}; '
          f'names: {names}')
    worker = [e['tid'] for e in ev if e['ph'] == 'X' and e['name'] == 'worker_zone'][0]
    check(worker != pid and names.get(worker) != 'main', f'the worker is named {names.get(worker)!r}')


def test_close_race(tmp, suffix):
    delays = [0, 50, 100, 200, 300, 500, 700, 1000, 1500, 2000, 3000, 5000] * \
        (1 if common.QUICK else 2)
    complete = 0
    for i, us in enumerate(delays):
        path = os.path.join(tmp, f'race{i}.json{suffix}')
        p = subprocess.Popen([TPROG, 'close_race', str(us)],
                             env=clean_env(PROF=1, PROF_TRACE=path, PROF_SUMMARY='off'),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = p.communicate(timeout=60)
        check(p.returncode in (-signal.SIGINT, -signal.SIGTERM),
              f'close_race {us}: returncode {p.returncode}\n{err[-2000:]!r}')
        try:
            load_trace(path)
            complete += 1
        except common.trace_check.TraceError as e:
            raise Failure(f'close_race {us}{suffix}: the trace is not closed whole: {e}')
        if not suffix:
            data = open(path, 'rb').read()
            check(data.count(b'\n]') <= 1, f'close_race {us}: "]" written {data.count(b"]")} times')
    check(complete == len(delays), f'close_race{suffix}: {complete} of {len(delays)} complete')


def test(tmp):
    if TPROG is None:
        raise Failure('usage: trace_valid.py PROG TRACE_CHECK_PY TRACE_PROG')
    test_nan_plain(tmp)
    test_nesting(tmp)
    test_main_thread(tmp)
    test_close_race(tmp, '')
    test_close_race(tmp, '.gz')
    test_locale(tmp)


main(test)
