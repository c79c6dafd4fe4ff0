"""Hostile names (quotes, backslashes, newlines, control bytes, terminal
escapes, format specifiers, JSON injection, valid and invalid UTF-8, every
byte value, a 1 MB name, NULL, the empty string) for zones, counters, marks
and a thread: the trace and the JSON summary stay strictly valid and give
every name back (invalid UTF-8 as U+FFFD), and the text table sends nothing
raw to the terminal: no control byte but newline, valid UTF-8, names cut to
a readable width, format specifiers shown as they are."""
import os
import re
from common import check, main, run, clean_env, load_trace, json_lines, stage

NAMES = [
    b'plain', b'', b'with "quotes"', b'back\\slash', b'new\nline', b'tab\there',
    b'ctrl \x01\x02\x1f\x7f', b'esc \x1b[31mred\x1b[0m \x1b]0;title\x07', b'fmt %s%n%x%p%%',
    b'json "},{"ph":"X","name":"injected', b'utf8 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80',
    b'bad utf8 \xff\xfe end', b'overlong \xc0\x80 and \xe0\x80\x80', b'surrogate \xed\xa0\x80',
    b'truncated \xe6\x97', b'lone continuation \x80\xbf', b'above max \xf4\x90\x80\x80',
    b'\xe2\x80\xae right-to-left override',
]
BIG = ''.join(chr(ord('a') + i % 26) for i in range(1024 * 1024))
EVERY = bytes(range(1, 256))


def expected(b):
    """What JSON output must say for these bytes: invalid sequences become
    U+FFFD (how many per sequence is the writer's choice: runs collapse)."""
    return collapse(b.decode('utf-8', 'replace'))


def collapse(s):
    return re.sub('\ufffd+', '\ufffd', s)


def check_names(got, what, zones=True):
    """Every hostile name is in got; zones also have the 1 MB name and the
    every-byte one (counters and marks have the list and NULL)."""
    got = {collapse(n) for n in got}
    for b in NAMES + ([EVERY] if zones else []):
        check(expected(b) in got, f'{what}: name {b!r} missing (as {expected(b)!r})')
    if zones:
        check(BIG in got, f'{what}: the 1 MB name is missing or cut')
    check('(null)' in got, f'{what}: the NULL name is not "(null)"')


def test(tmp):
    path = os.path.join(tmp, 'names.json')
    summ = os.path.join(tmp, 'summary.json')
    r = run(['names'], clean_env(PROF=1, PROF_TRACE=path, PROF_SUMMARY=summ,
                                 PROF_SUMMARY_FORMAT='json'))
    check(r.prof_lines == [], f'unexpected messages: {r.prof_lines}')
    ev = load_trace(path)
    check_names([e['name'] for e in ev if e['ph'] == 'X'], 'trace zones')
    check_names([e['name'] for e in ev if e['ph'] == 'i' and e['cat'] == 'mark'], 'trace marks',
                zones=False)
    check_names([e['name'] for e in ev if e['ph'] == 'C'], 'trace counters', zones=False)
    tnames = [e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name']
    check(expected(b'thread \x1b[2J "name" \xff') in map(collapse, tnames),
          f'thread name not round-tripped: {tnames}')
    # "child" runs inside every hostile zone: one stage, many parents.
    check(sum(e['name'] == 'child' for e in ev if e['ph'] == 'X') == len(NAMES), 'child zones')

    lines = json_lines(summ)
    check(len(lines) == 1 and lines[0]['kind'] == 'final', 'one final JSON summary')
    total = lines[0]['total']
    check_names([s['name'] for s in total['stages']], 'JSON summary stages')
    check_names([s['name'] for s in total['counters']], 'JSON summary counters', zones=False)
    check_names([s['name'] for s in total['marks']], 'JSON summary marks', zones=False)
    check(stage(total, expected(b'fmt %s%n%x%p%%'))['count'] == 1, 'format name count')
    check(stage(total, '')['count'] == 1, 'empty name count')

    # The text table, to a file: what a terminal would receive.
    txt = os.path.join(tmp, 'summary.txt')
    run(['names'], clean_env(PROF=1, PROF_SUMMARY=txt))
    data = open(txt, 'rb').read()
    text = data.decode('utf-8')    # strict: valid UTF-8 only
    bad = sorted({c for c in data if (c < 0x20 and c != 0x0a) or c == 0x7f})
    check(not bad, f'raw control bytes in the table: {[hex(c) for c in bad]}')
    check('fmt %s%n%x%p%%' in text, 'format specifiers not shown as they are')
    check('\\x1b[31mred' in text, 'escape sequence not shown escaped')
    # (The marks share one line; every other line is a row of the table.)
    longest = max(len(l) for l in text.split('\n') if not l.startswith('marks:'))
    check(longest < 400, f'a table line of {longest} characters (the 1 MB name not cut)')
    check('(null)' in text, 'the NULL name not shown as (null)')


main(test)
