#!/usr/bin/env python3
"""Strict validator of prof Chrome traces (docs/FORMATS.md), used by the
whole test suite on every trace it writes.

    python3 tests/trace_check.py FILE [--allow-unterminated]
                                 [--expect-stage NAME ...] [--min-events N]

A FILE ending in .gz is decompressed first (a gzip member cut short by a
killed process is read up to where it stops, and then counts as
unterminated; when the kill landed inside a batch's write, the last event
is cut, and is dropped as docs/TRACE.md tells users to).

Exit 0 when the file is valid; otherwise print the first problem and exit 1.
Importable: check_trace(path, ...) returns the events or raises TraceError;
check_trace_stream(path, ...) makes the same checks reading the file a
piece at a time and returns counts (TraceStats), and iter_events(path)
yields the events one by one: for traces too large to hold as objects
(a stress test's parent writes hundreds of MB).

Deliberately independent of tools/prof_tools.py (whose output it also
checks) and stricter than the tools and viewers: strict UTF-8, no NaN or
Infinity, no lone surrogates, no duplicate keys, the closing ']' present
unless allowed to be missing, and the field rules of FORMATS.md. Zones
must nest as a viewer computes them: ts and dur parsed as doubles and
added, no slack (Chrome leaves improperly nested slices undrawn), and X
events carry no args: speedscope names a frame by its name and its args
(`name {"src":...}`), so a zone's call site is a second category instead,
"cat": "cpu,src:file:line" (speedscope_frame_name() is speedscope's rule).
"""

import argparse
import gzip
import json
import math
import re
import sys
import zlib

SLACK_NS = 1                         # ts/dur are rounded to whole ns
METADATA = {'process_name': 'name', 'thread_name': 'name',
            'process_sort_index': 'sort_index', 'thread_sort_index': 'sort_index'}
LIMIT_PREFIX = 'prof: trace size limit reached'


class TraceError(ValueError):
    pass


def _constant(name):
    raise TraceError(f'non-standard JSON constant {name} (NaN/Infinity are not JSON)')


def _float(text):
    v = float(text)
    if not math.isfinite(v):
        raise TraceError(f'number {text} overflows a double')
    return v


def _pairs(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise TraceError(f'duplicate key {k!r} in an object')
        obj[k] = v
    return obj


def _strings(x):
    """Every string (keys too) inside a parsed JSON value."""
    if isinstance(x, str):
        yield x
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)
    elif isinstance(x, dict):
        for k, v in x.items():
            yield k
            yield from _strings(v)


def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def parse(data, allow_unterminated=False, partial_last=False):
    """Bytes of a trace file -> list of events (strict JSON). partial_last:
    the text may stop inside its last event (a cut gzip stream), which is
    then dropped; a plain file's events are never cut."""
    try:
        text = data.decode('utf-8')          # strict: also rejects encoded surrogates
    except UnicodeDecodeError as e:
        raise TraceError(f'invalid UTF-8 at byte {e.start}: {data[e.start:e.start + 4]!r}') from None
    if text.startswith('\ufeff'):
        raise TraceError('file starts with a byte order mark')
    loads = lambda t: json.loads(t, parse_constant=_constant, parse_float=_float,
                                  object_pairs_hook=_pairs)  # noqa: E731
    try:
        events = loads(text)
    except json.JSONDecodeError as e:
        stripped = text.rstrip()
        if stripped.startswith('[') and not stripped.endswith(']'):
            if not allow_unterminated:
                raise TraceError('no closing "]" (unterminated trace; a normal exit must write it)') from None
            try:
                try:
                    events = loads(text + '\n]')
                except json.JSONDecodeError:
                    if not partial_last or '\n' not in text:
                        raise
                    events = loads(text[:text.rindex('\n')] + '\n]')
            except json.JSONDecodeError as e2:
                raise TraceError(f'invalid JSON even with "]" appended: {e2.msg} at line '
                                 f'{e2.lineno} column {e2.colno}') from None
        else:
            raise TraceError(f'invalid JSON: {e.msg} at line {e.lineno} column {e.colno}') from None
    if not isinstance(events, list):
        raise TraceError('top level is not a JSON array (prof writes the array form)')
    for s in _strings(events):
        try:
            s.encode('utf-8')
        except UnicodeEncodeError:
            raise TraceError(f'lone UTF-16 surrogate escape in string {s!r}') from None
    return events


def check_event(i, e, no_x_args=True):
    where = f'event {i}'
    if not isinstance(e, dict):
        raise TraceError(f'{where}: not an object')
    name, ph = e.get('name'), e.get('ph')
    if not isinstance(name, str):
        raise TraceError(f'{where}: "name" missing or not a string')
    where = f'event {i} ({name!r}, ph {ph!r})'
    for k in ('pid', 'tid'):
        if not _int(e.get(k)):
            raise TraceError(f'{where}: "{k}" missing or not an integer: {e.get(k)!r}')
    args = e.get('args')
    if 'args' in e and not isinstance(args, dict):
        raise TraceError(f'{where}: "args" is not an object')
    if ph == 'M':
        if name not in METADATA:
            raise TraceError(f'{where}: unknown metadata event (want one of {", ".join(METADATA)})')
        key = METADATA[name]
        val = (args or {}).get(key)
        if not (isinstance(val, str) if key == 'name' else _int(val)):
            raise TraceError(f'{where}: args.{key} missing or of the wrong type: {val!r}')
        if 'ts' in e and not (_num(e['ts']) and e['ts'] >= 0):
            raise TraceError(f'{where}: bad ts {e["ts"]!r}')
        return
    if ph not in ('X', 'C', 'i'):
        raise TraceError(f'{where}: unexpected ph (prof writes M, X, C, i)')
    ts = e.get('ts')
    if not _num(ts) or ts <= 0:
        raise TraceError(f'{where}: ts must be a number > 0, got {ts!r}')
    if ph == 'X':
        dur = e.get('dur')
        if not _num(dur) or dur < 0:
            raise TraceError(f'{where}: dur must be a number >= 0, got {dur!r}')
        cat = e.get('cat')
        if cat not in ('cpu', 'gpu') and zone_site(e) is None:
            raise TraceError(f'{where}: cat must be "cpu", "gpu" or "cpu,src:file:line", '
                             f'got {cat!r}')
        if no_x_args:
            if 'args' in e:
                raise TraceError(f'{where}: X events carry no args (speedscope would name the '
                                 f'frame {speedscope_frame_name(e)!r}), got {args!r}')
        else:
            depth = (args or {}).get('depth')
            if not (_int(depth) and depth >= 0):
                raise TraceError(f'{where}: args.depth must be an integer >= 0, got {depth!r}')
    elif ph == 'C':
        if not args or not all(_num(v) for v in args.values()):
            raise TraceError(f'{where}: a counter needs args with numeric values, got {args!r}')
    elif ph == 'i':
        if e.get('s') != 't':
            raise TraceError(f'{where}: instant events are thread scoped: "s" must be "t"')
        if not isinstance(e.get('cat'), str):
            raise TraceError(f'{where}: "cat" missing')
        if e['cat'] == 'step' and not _int((args or {}).get('step')):
            raise TraceError(f'{where}: a step instant needs an integer args.step')


def zone_site(e):
    """The call site "file:line" of an X event (its "cpu,src:..." category),
    or None."""
    cat = e.get('cat')
    if isinstance(cat, str) and cat.startswith('cpu,src:'):
        site = cat[len('cpu,src:'):]
        if re.fullmatch(r'.+:[1-9][0-9]*', site, re.S):
            return site
    return None


def speedscope_frame_name(e):
    """The frame name speedscope gives a B/E/X event: its name, then, when
    the event has args at all, a space and JSON.stringify(args) (keyForEvent
    in speedscope's src/import/trace-event.ts, jlfwong/speedscope). An
    empty {} counts: it is truthy in JavaScript."""
    name = e.get('name') or '(unnamed)'
    if 'args' in e and e['args'] is not None and e['args'] is not False:
        name += ' ' + json.dumps(e['args'], separators=(',', ':'), ensure_ascii=False)
    return name


def check_prof_args(e):
    """The first event: process_name carrying the clock reference."""
    if not (e.get('ph') == 'M' and e.get('name') == 'process_name'):
        raise TraceError(f'event 0 is {e.get("name")!r}/{e.get("ph")!r}; the first event must be '
                         f'the process_name metadata')
    prof = e['args'].get('prof')
    if not isinstance(prof, dict):
        raise TraceError('event 0: args.prof (format, clock reference) missing')
    if not _int(prof.get('format')):
        raise TraceError('event 0: args.prof.format missing or not an integer')
    if not _int(prof.get('realtime_minus_monotonic_ns')):
        raise TraceError('event 0: args.prof.realtime_minus_monotonic_ns missing or not an integer')
    if 'ts_origin_ns' in prof and not (_int(prof['ts_origin_ns']) and prof['ts_origin_ns'] >= 0):
        raise TraceError('event 0: args.prof.ts_origin_ns is not an integer >= 0')
    for k, ok in (('rank', lambda v: v is None or _int(v)), ('pid', _int),
                  ('host', lambda v: isinstance(v, str)), ('version', lambda v: isinstance(v, str))):
        if k in prof and not ok(prof[k]):
            raise TraceError(f'event 0: args.prof.{k} has the wrong type: {prof[k]!r}')


def check_nesting(events):
    """X events of one (pid, tid) nest: each lies inside the innermost zone
    still open at its start, or starts after that zone ended."""
    threads = {}
    for i, e in enumerate(events):
        if e['ph'] == 'X':
            ts, dur = round(e['ts'] * 1000), round(e['dur'] * 1000)
            threads.setdefault((e['pid'], e['tid']), []).append((ts, -dur, i))
    for (pid, tid), zones in threads.items():
        zones.sort()
        stack = []                           # (end, index)
        for ts, ndur, i in zones:
            end = ts - ndur
            while stack and stack[-1][0] <= ts + SLACK_NS:
                stack.pop()
            if stack and end > stack[-1][0] + SLACK_NS:
                p = events[stack[-1][1]]
                c = events[i]
                raise TraceError(
                    f'pid {pid} tid {tid}: zones overlap without nesting: {c["name"]!r} '
                    f'(event {i}, ts {c["ts"]}, dur {c["dur"]}) starts inside {p["name"]!r} '
                    f'(event {stack[-1][1]}, ts {p["ts"]}, dur {p["dur"]}) and ends after it')
            stack.append((end, i))


def check_nesting_as_viewers(events):
    """The same, as a viewer computes it: ts and dur as parsed doubles, the
    end their double sum, no slack. Sorted by start, longer first; a zone
    that starts before the innermost open zone's end must end by it. CPU
    zones only (GPU tracks hold what the driver timed)."""
    threads = {}
    for i, e in enumerate(events):
        if e['ph'] == 'X' and e.get('cat') != 'gpu':
            ts, dur = float(e['ts']), float(e['dur'])
            threads.setdefault((e['pid'], e['tid']), []).append((ts, -(ts + dur), i))
    for (pid, tid), zones in threads.items():
        zones.sort()
        stack = []                           # (end, index)
        for ts, nend, i in zones:
            end = -nend
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and end > stack[-1][0]:
                p, c = events[stack[-1][1]], events[i]
                raise TraceError(
                    f'pid {pid} tid {tid}: in double arithmetic, {c["name"]!r} (event {i}, ts '
                    f'{c["ts"]}, dur {c["dur"]}, end {end!r}) starts inside {p["name"]!r} (event '
                    f'{stack[-1][1]}, ts {p["ts"]}, dur {p["dur"]}, end {stack[-1][0]!r}) and '
                    f'ends after it')
            stack.append((end, i))


def check_events(events, expect_stages=(), min_events=0):
    # Files with a ts origin (prof since it wrote one) have no args on X
    # events and nest in double arithmetic; older ones (and the tools
    # tests' synthetic traces) had args.depth and a nanosecond of slack.
    first = events[0] if events and isinstance(events[0], dict) else {}
    prof = (first.get('args') or {}).get('prof') if isinstance(first.get('args'), dict) else None
    current = isinstance(prof, dict) and 'ts_origin_ns' in prof
    for i, e in enumerate(events):
        check_event(i, e, no_x_args=current)
    if events:
        check_prof_args(events[0])
    named = {e['pid'] for e in events if e['ph'] == 'M' and e['name'] == 'process_name'}
    for i, e in enumerate(events):
        if e['pid'] not in named:
            raise TraceError(f'event {i} ({e["name"]!r}): pid {e["pid"]} has no process_name metadata')
    for i, e in enumerate(events):
        if e['ph'] == 'i' and e['name'].startswith(LIMIT_PREFIX) and i != len(events) - 1:
            raise TraceError(f'event {i}: the size-limit note must be the last event')
    check_nesting(events)
    if current:                          # a writer that promises it
        check_nesting_as_viewers(events)
    zones = {e['name'] for e in events if e['ph'] == 'X'}
    for s in expect_stages:
        if s not in zones:
            raise TraceError(f'no X event named {s!r} (stages seen: {", ".join(sorted(zones)[:20])})')
    nx = sum(e['ph'] == 'X' for e in events)
    if nx < min_events:
        raise TraceError(f'{nx} X events, expected at least {min_events}')


def gunzip(data, allow_truncated=False):
    """A gzip file's contents, and whether its member is complete. One
    member, nothing after it. A member cut short (a killed process) gives
    what it holds when allowed; it then has no closing ']'."""
    d = zlib.decompressobj(31)
    try:
        out = d.decompress(data)
    except zlib.error as e:
        raise TraceError(f'corrupt gzip stream: {e}') from None
    if not d.eof:
        if not allow_truncated:
            raise TraceError('gzip stream cut short (no end of member: the process was killed?)')
        return out, False
    if d.unused_data:
        raise TraceError(f'{len(d.unused_data)} bytes after the gzip member')
    # The standard library's reader must agree (it checks CRC and length).
    try:
        if gzip.decompress(data) != out:
            raise TraceError('gzip module and zlib disagree about the contents')
    except (OSError, EOFError) as e:
        raise TraceError(f'gzip trailer rejected: {e}') from None
    return out, True


def read_trace_bytes(path, allow_unterminated=False):
    """The trace's text, and whether it is a gzip stream cut short."""
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as e:
        raise TraceError(f'cannot read: {e.strerror}') from None
    if path.endswith('.gz'):
        if data[:2] != b'\x1f\x8b':
            raise TraceError('named .gz but not gzip')
        out, complete = gunzip(data, allow_unterminated)
        return out, not complete
    return data, False


def check_trace(path, allow_unterminated=False, expect_stages=(), min_events=0):
    """Validate the trace at path (gzip when it ends in .gz); return its
    events or raise TraceError."""
    data, cut = read_trace_bytes(path, allow_unterminated)
    events = parse(data, allow_unterminated, partial_last=cut)
    check_events(events, expect_stages, min_events)
    return events


# ---------------------------------------------------------------------------
# Streaming: the same checks without holding the events. A trace of N
# zones costs a few small tuples per zone (for the nesting checks) instead
# of N parsed objects.

_WS = ' \t\n\r'
_CHUNK = 1 << 20


def _chunks(path, allow_unterminated):
    """(text pieces, strictly decoded, and a flag: True once a gzip member
    turned out to be cut short)."""
    import codecs
    dec = codecs.getincrementaldecoder('utf-8')('strict')
    state = {'cut': False}

    def raw():
        try:
            f = open(path, 'rb')
        except OSError as e:
            raise TraceError(f'cannot read: {e.strerror}') from None
        with f:
            if not path.endswith('.gz'):
                while True:
                    b = f.read(_CHUNK)
                    if not b:
                        return
                    yield b
            head = f.read(2)
            if head != b'\x1f\x8b':
                raise TraceError('named .gz but not gzip')
            z = zlib.decompressobj(31)
            b = head + f.read(_CHUNK)
            while b:
                try:
                    out = z.decompress(b)
                except zlib.error as e:
                    raise TraceError(f'corrupt gzip stream: {e}') from None
                if out:
                    yield out
                if z.eof:
                    rest = z.unused_data + f.read()
                    if rest:
                        raise TraceError(f'{len(rest)} bytes after the gzip member')
                    return
                b = f.read(_CHUNK)
            if not allow_unterminated:
                raise TraceError('gzip stream cut short (no end of member: the process was killed?)')
            state['cut'] = True

    offset = 0
    for b in raw():
        try:
            yield dec.decode(b), state
        except UnicodeDecodeError as e:
            at = offset + e.start
            raise TraceError(f'invalid UTF-8 at byte {at}: {e.object[e.start:e.start + 4]!r}') from None
        offset += len(b)
    try:
        yield dec.decode(b'', final=True), state
    except UnicodeDecodeError as e:
        raise TraceError(f'invalid UTF-8 at byte {offset + e.start}') from None


def iter_events(path, allow_unterminated=False):
    """Yield the events of the trace at path one at a time, with parse()'s
    rules (strict JSON and UTF-8, the array form, the closing ']' unless
    allowed to be missing; a cut gzip stream's last event is dropped)."""
    decoder = json.JSONDecoder(parse_constant=_constant, parse_float=_float,
                               object_pairs_hook=_pairs)
    buf, pos, started, state = '', 0, False, {'cut': False}
    chunks = _chunks(path, allow_unterminated)
    eof = False

    def more():
        nonlocal buf, pos, eof, state
        for text, st in chunks:
            state = st
            buf = buf[pos:] + text
            pos = 0
            if text:
                return True
        eof = True
        buf = buf[pos:]
        pos = 0
        return False

    def skip_ws():
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            if pos < len(buf) or eof or not more():
                return

    def unterminated():
        if not allow_unterminated:
            raise TraceError('no closing "]" (unterminated trace; a normal exit must write it)')

    skip_ws()
    if buf.startswith('\ufeff'):
        raise TraceError('file starts with a byte order mark')
    if pos >= len(buf):
        raise TraceError('invalid JSON: Expecting value at line 1 column 1')
    if buf[pos] != '[':
        raise TraceError('top level is not a JSON array (prof writes the array form)')
    pos += 1
    first = True
    while True:
        skip_ws()
        if pos >= len(buf):
            unterminated()
            return
        if buf[pos] == ']':
            pos += 1
            skip_ws()
            if pos < len(buf):
                raise TraceError('invalid JSON: Extra data after the closing "]"')
            return
        if not first:
            if buf[pos] != ',':
                raise TraceError(f'invalid JSON: expecting "," or "]" (found {buf[pos]!r})')
            pos += 1
            skip_ws()
            if pos >= len(buf):
                unterminated()
                # parse() would append "]" after the comma: not JSON.
                raise TraceError('invalid JSON even with "]" appended: a "," ends the text')
        first = False
        while True:
            try:
                e, end = decoder.raw_decode(buf, pos)
                if end == len(buf) and not eof:
                    raise json.JSONDecodeError('more', buf, end)   # a number may go on
                break
            except json.JSONDecodeError as err:
                if not eof:
                    more()
                    continue
                # At the end of the text: an event cut short.
                if state['cut'] and allow_unterminated:
                    return                   # dropped, as docs/TRACE.md says
                if allow_unterminated and not buf.rstrip().endswith(']'):
                    raise TraceError(f'invalid JSON even with "]" appended: {err.msg}') from None
                raise TraceError(f'invalid JSON: {err.msg} at line {err.lineno} column '
                                 f'{err.colno} of the text read') from None
        pos = end
        for s in _strings(e):
            try:
                s.encode('utf-8')
            except UnicodeEncodeError:
                raise TraceError(f'lone UTF-16 surrogate escape in string {s!r}') from None
        yield e


class TraceStats:
    """What check_trace_stream saw: events in all, by ph, pids, zone names."""

    def __init__(self):
        self.events = 0
        self.kinds = {}
        self.pids = set()
        self.zone_names = set()
        self.x_events = 0


def _nesting_compact(threads, slack, what, event_at):
    """check_nesting's rule over (start, -end, index) tuples per thread;
    event_at(i) fetches an event for the message."""
    for (pid, tid), zones in threads.items():
        zones.sort()
        stack = []
        for ts, nend, i in zones:
            end = -nend
            while stack and stack[-1][0] <= ts + slack:
                stack.pop()
            if stack and end > stack[-1][0] + slack:
                p, c = event_at(stack[-1][1]), event_at(i)
                raise TraceError(
                    f'pid {pid} tid {tid}: {what}{c["name"]!r} (event {i}, ts {c["ts"]}, dur '
                    f'{c["dur"]}) starts inside {p["name"]!r} (event {stack[-1][1]}, ts {p["ts"]}, '
                    f'dur {p["dur"]}) and ends after it')
            stack.append((end, i))


def check_trace_stream(path, allow_unterminated=False, expect_stages=(), min_events=0):
    """check_trace's checks, reading the file as a stream: returns a
    TraceStats, or raises TraceError."""
    st = TraceStats()
    current = False
    named, first_of_pid = set(), {}
    limit_at = None
    exact, viewer = {}, {}
    for i, e in enumerate(iter_events(path, allow_unterminated)):
        if i == 0 and isinstance(e, dict):
            prof = (e.get('args') or {}).get('prof') if isinstance(e.get('args'), dict) else None
            current = isinstance(prof, dict) and 'ts_origin_ns' in prof
        check_event(i, e, no_x_args=current)
        if i == 0:
            check_prof_args(e)
        if limit_at is not None:
            raise TraceError(f'event {limit_at}: the size-limit note must be the last event')
        ph = e['ph']
        st.events += 1
        st.kinds[ph] = st.kinds.get(ph, 0) + 1
        st.pids.add(e['pid'])
        first_of_pid.setdefault(e['pid'], (i, e['name']))
        if ph == 'M' and e['name'] == 'process_name':
            named.add(e['pid'])
        elif ph == 'i' and e['name'].startswith(LIMIT_PREFIX):
            limit_at = i
        elif ph == 'X':
            st.x_events += 1
            st.zone_names.add(e['name'])
            key = (e['pid'], e['tid'])
            ts_ns = round(e['ts'] * 1000)
            exact.setdefault(key, []).append((ts_ns, -(ts_ns + round(e['dur'] * 1000)), i))
            if current and e.get('cat') == 'cpu':
                ts = float(e['ts'])
                viewer.setdefault(key, []).append((ts, -(ts + float(e['dur'])), i))
    for pid, (i, name) in sorted(first_of_pid.items(), key=lambda kv: kv[1][0]):
        if pid not in named:
            raise TraceError(f'event {i} ({name!r}): pid {pid} has no process_name metadata')

    def event_at(k):
        for j, e in enumerate(iter_events(path, allow_unterminated)):
            if j == k:
                return e
        raise TraceError(f'event {k} vanished on a second read')
    _nesting_compact(exact, SLACK_NS, 'zones overlap without nesting: ', event_at)
    exact.clear()
    if current:
        _nesting_compact(viewer, 0, 'in double arithmetic, ', event_at)
    for s in expect_stages:
        if s not in st.zone_names:
            raise TraceError(f'no X event named {s!r} (stages seen: '
                             f'{", ".join(sorted(st.zone_names)[:20])})')
    if st.x_events < min_events:
        raise TraceError(f'{st.x_events} X events, expected at least {min_events}')
    return st


def main(argv=None):
    ap = argparse.ArgumentParser(description='Strictly validate a prof Chrome trace.')
    ap.add_argument('file')
    ap.add_argument('--allow-unterminated', action='store_true',
                    help='accept a file without its closing "]" (a killed process)')
    ap.add_argument('--expect-stage', action='append', default=[], metavar='NAME',
                    help='require an X event with this name (repeatable)')
    ap.add_argument('--min-events', type=int, default=0, metavar='N',
                    help='require at least N X (zone) events')
    a = ap.parse_args(argv)
    try:
        events = check_trace(a.file, a.allow_unterminated, a.expect_stage, a.min_events)
    except TraceError as e:
        print(f'trace_check: {a.file}: INVALID: {e}', file=sys.stderr)
        return 1
    kinds = {}
    for e in events:
        kinds[e['ph']] = kinds.get(e['ph'], 0) + 1
    print(f'trace_check: {a.file}: OK: {len(events)} events '
          f'({", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
