"""PROF_TRACE ending in .gz: a gzip stream (zlib loaded at run time).

  round trip   the file is one complete gzip member (CRC and length checked
               by Python's gzip) whose contents pass the same strict checks
               as a plain trace, with the same zones as the plain trace of
               the same run; %p expands before the .gz.
  size         at least 6x smaller than the plain trace of the same run.
  SIGKILL      the file is a gzip member cut at a sync point: it
               decompresses (zlib, reading what is there) to whole events
               and loads once ']' is appended.
  SIGTERM      a complete member with the closing ']'.
  no zlib      PROF_ZLIB_LIB=/nonexistent: one message, plain JSON at the
               name without .gz, no .gz file. A hostile value (escape
               sequences, 250 characters) is named by its variable, escaped
               and shortened: printable ASCII, under 400 characters.
  size cap     PROF_TRACE_MAX_MB counts bytes on disk: a capped gz trace is
               near the cap on disk and holds more than the cap of JSON.
"""
import gzip
import os
import signal
import zlib
import common
from common import check, main, run, clean_env, load_trace


def x_counts(ev):
    """Zones per name; "(no stage)" left out: the gaps between a stepping
    thread's zones are drawn from 10 us, which a slow run (a sanitizer)
    crosses more or less often than the other."""
    c = {}
    for e in ev:
        if e['ph'] == 'X' and e['name'] != '(no stage)':
            c[e['name']] = c.get(e['name'], 0) + 1
    return c


def round_trip(tmp):
    gz = os.path.join(tmp, 'basic.json.gz')
    plain = os.path.join(tmp, 'basic.json')
    r = run(['basic', 20], clean_env(PROF=1, PROF_TRACE=gz))
    check(r.prof_lines == [], f'messages: {r.prof_lines}')
    data = open(gz, 'rb').read()
    check(data[:3] == b'\x1f\x8b\x08', f'not gzip: {data[:8]!r}')
    text = gzip.decompress(data)            # checks CRC-32 and length
    check(text.endswith(b'\n]\n'), f'decompressed trace ends {text[-20:]!r}')
    ev = load_trace(gz, expect_stages=['train_step', 'forward', 'attention', 'backward',
                                       'load_batch', 'read'], min_events=120)
    run(['basic', 20], clean_env(PROF=1, PROF_TRACE=plain))
    check(x_counts(ev) == x_counts(load_trace(plain)), 'gz and plain traces hold different zones')
    names = {e['tid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name'}
    check('main-loop' in names.values() and 'worker' in names.values(), f'thread names {names}')

    pat = os.path.join(tmp, 'run-%p.json.gz')
    r = run(['basic', 3], clean_env(PROF=1, PROF_TRACE=pat, PROF_SUMMARY='off'))
    want = os.path.join(tmp, f'run-{r.values["pid"]}.json.gz')
    check(os.path.exists(want), f'{want} not written: {os.listdir(tmp)}')
    load_trace(want, expect_stages=['train_step'])


def size(tmp):
    gz = os.path.join(tmp, 'many.json.gz')
    plain = os.path.join(tmp, 'many.json')
    run(['basic', 200], clean_env(PROF=1, PROF_TRACE=gz, PROF_SUMMARY='off'))
    run(['basic', 200], clean_env(PROF=1, PROF_TRACE=plain, PROF_SUMMARY='off'))
    a, b = os.path.getsize(plain), os.path.getsize(gz)
    print(f'basic 200: plain {a} bytes, gz {b} bytes ({a / b:.1f}x)')
    check(a >= 6 * b, f'gz trace only {a / b:.1f}x smaller ({a} vs {b} bytes)')


def start(tmp, tag):
    return common.start_forever(tmp, f'{tag}.json.gz')


def killed(tmp):
    for path in common.killed_traces(tmp, '.json.gz', 1000):
        data = open(path, 'rb').read()
        d = zlib.decompressobj(31)
        text = d.decompress(data)
        check(not d.eof, 'a killed process ended its gzip member?')
        # Whole events: the decompressed prefix ends with one, and "]"
        # makes it strict JSON (what `zcat f.json.gz; echo ']'` does).
        check(text.rstrip().endswith(b'}'), f'decompressed prefix ends {text[-40:]!r}')
        with open(path + '.repaired.json', 'wb') as f:
            f.write(text + b'\n]\n')
        ev = load_trace(path + '.repaired.json', min_events=1)
        check(any(e['name'] == 'train_step' for e in ev), 'no train_step in the killed trace')
        load_trace(path, allow_unterminated=True)

    p, path = start(tmp, 'term')
    common.wait_size(path, 1000)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    check(p.returncode == -signal.SIGTERM, f'SIGTERM: returncode {p.returncode}')
    check(gzip.decompress(open(path, 'rb').read()).endswith(b'\n]\n'), 'SIGTERM: no closing "]"')
    load_trace(path, expect_stages=['train_step', 'load_batch'])


def no_zlib(tmp):
    gz = os.path.join(tmp, 'nozlib.json.gz')
    r = run(['basic', 5], clean_env(PROF=1, PROF_TRACE=gz, PROF_ZLIB_LIB='/nonexistent/libz.so.1'))
    lines = r.prof_lines
    check(len(lines) == 1, f'{len(lines)} messages, expected one: {lines}')
    check('zlib' in lines[0] and gz[:-3] in lines[0] and 'plain' in lines[0],
          f'the message does not say what happened: {lines[0]}')
    check(not os.path.exists(gz), 'a .gz file was written without zlib')
    load_trace(gz[:-3], expect_stages=['train_step'])
    check(len(r.summaries) == 1, 'no final summary')

    hostile = '/nonexistent/\x1b[31m\x1b]0;owned\x07' + 'A' * 220 + '/libz.so.1'
    r = run(['basic', 5], clean_env(PROF=1, PROF_TRACE=gz, PROF_ZLIB_LIB=hostile))
    lines = r.prof_lines
    check(len(lines) == 1, f'{len(lines)} messages, expected one: {lines}')
    check('PROF_ZLIB_LIB="' in lines[0], f'the message does not name PROF_ZLIB_LIB: {lines[0]!r}')
    check(all(0x20 <= ord(c) < 0x7f for c in lines[0]), f'raw bytes in {lines[0]!r}')
    check('\\x1b[31m' in lines[0] and 'libz.so.1' in lines[0],
          f'the value is not shown escaped, head and tail: {lines[0]!r}')
    check(len(lines[0]) < 400, f'a message of {len(lines[0])} characters: {lines[0]!r}')


def capped(tmp):
    gz = os.path.join(tmp, 'capped.json.gz')
    r = run(['many', 400000], clean_env(PROF=1, PROF_TRACE=gz, PROF_TRACE_MAX_MB=1,
                                        PROF_SUMMARY='off'))
    disk = os.path.getsize(gz)
    text = gzip.decompress(open(gz, 'rb').read())
    check(disk <= 1024 * 1024 + 256 * 1024, f'{disk} bytes on disk with a 1 MB cap')
    check(disk >= 1024 * 1024 * 8 // 10, f'{disk} bytes on disk: stopped well before the cap')
    check(len(text) > 3 * 1024 * 1024, f'only {len(text)} bytes of JSON: the cap counted JSON, '
          f'not bytes on disk')
    ev = load_trace(gz)
    check(ev[-1]['name'].startswith('prof: trace size limit reached'), f'last event {ev[-1]}')
    check(len([l for l in r.prof_lines if 'limit' in l]) == 1, f'messages {r.prof_lines}')


def test(tmp):
    round_trip(tmp)
    size(tmp)
    killed(tmp)
    no_zlib(tmp)
    capped(tmp)


main(test)
