"""Shared code of prof-merge, prof-diff and prof-report.

Reads the two kinds of files prof writes (docs/FORMATS.md): JSON summaries
(one object per line, the last one is the run) and Chrome traces (a JSON
array, possibly without its closing ']' when the process was killed), and
turns either into the same thing: a Run holding one Stage per stage name in
tree order, with count/total/self/min/max, a log-linear histogram and
percentiles, plus the call-path tree (for flame graphs and folded stacks).
Standard library only.
"""

import codecs
import contextlib
import json
import math
import os
import re
import sys
import tempfile
import zlib
from array import array

FORMAT = 1           # the docs/FORMATS.md "format" this code reads
SLACK_NS = 1         # nesting tolerance: ts/dur are rounded to whole ns
GPU_SUFFIX = ' [gpu]'


# meson substitutes the project's version when it installs this file; in the
# source tree the header beside the tools says it.
_VERSION = '@PROF_VERSION@'


class InputError(Exception):
    """Bad input or usage: printed as one line, exit status 2."""


def version():
    """The prof library's version, for --version."""
    if not _VERSION.startswith('@'):
        return _VERSION
    here = os.path.dirname(os.path.realpath(__file__))
    for rel in (('..', 'include'), ('..', '..', 'include'), ('..', '..', '..', 'include')):
        try:
            with open(os.path.join(here, *rel, 'prof_version.h'), encoding='utf-8') as f:
                m = re.search(r'#define\s+PROF_VERSION_STRING\s+"([^"]+)"', f.read())
        except OSError:
            continue
        if m:
            return m.group(1)
    return 'unknown'


def add_version(ap):
    ap.add_argument('--version', action='version', version=f'%(prog)s (prof) {version()}')


def doc_parts(doc):
    """A tool's docstring -> (description, epilog) for argparse, whole: the
    first paragraph up to the usage examples, then everything after them."""
    paras = doc.split('\n\n')
    return paras[0], '\n\n'.join(paras[1:])


def prog():
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else 'prof'


def warn(msg):
    print(f'{prog()}: warning: {msg}', file=sys.stderr)


def run_main(main):
    """Run main() -> exit status; InputError/OSError become one line and 2."""
    try:
        return main()
    except InputError as e:
        print(f'{prog()}: error: {e}', file=sys.stderr)
        return 2
    except BrokenPipeError:          # `prof-report x | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


def parse_pct(text):
    """A threshold -> percent, for argparse type=. '5%' is five percent and
    so is the fraction '0.05'; a bare number of 1 or more ('5') could mean
    either 5% or 500%, so it is refused rather than guessed."""
    import argparse
    t = str(text).strip()
    pct = t.endswith('%')
    try:
        v = float(t[:-1].strip() if pct else t)
    except ValueError:
        v = float('nan')
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(
            f'not a threshold: {text!r} (write a percentage such as 5% or a fraction such as 0.05)')
    if pct:
        return v
    if v >= 1:
        raise argparse.ArgumentTypeError(
            f'ambiguous threshold {text!r}: write {t}% for {t} percent, or a fraction below 1 '
            f'(0.05 means 5%)')
    return v * 100


# ---------------------------------------------------------------------------
# Histogram: the runtime's log-linear scheme (src/base/hist.h), so percentiles
# computed here from a trace match the ones a summary reports.

class Hist:
    SUB_BITS = 6     # add() has it written out: 64 = 1 << 6, 7 = 6 + 1     # values < 64 get a bucket each; each power of two above: 64 buckets

    def __init__(self):
        self.buckets = {}            # lo -> [hi, count]
        self.count = 0

    @classmethod
    def from_list(cls, items, where):
        """From a summary's "hist": [[lo, hi, count], ...]."""
        h = cls()
        for it in items:
            if not (isinstance(it, list) and len(it) == 3 and all(is_num(x) for x in it)
                    and it[0] <= it[1] and it[2] >= 0):
                raise InputError(f'{where}: bad histogram bucket {it!r} (want [lo_ns, hi_ns, count])')
            h.add_bucket(it[0], it[1], int(it[2]))
        return h

    def add_bucket(self, lo, hi, n):
        b = self.buckets.setdefault(lo, [hi, 0])
        b[1] += n
        self.count += n

    def add(self, v):
        """Count one value in the runtime's bucket (src/base/hist.c): values below
        64 alone, above that 64 buckets per power of two. Written out, not
        a call: this runs once per zone, twice with self time."""
        v = int(v) if v > 0 else 0
        if v < 64:
            lo, hi = v, v + 1
        else:
            shift = v.bit_length() - 7
            lo = v >> shift << shift
            hi = lo + (1 << shift)
        b = self.buckets.get(lo)
        if b is None:
            self.buckets[lo] = [hi, 1]
        else:
            b[1] += 1
        self.count += 1

    def items(self):
        """[(lo, hi, count)] ascending."""
        return [(lo, hb[0], hb[1]) for lo, hb in sorted(self.buckets.items()) if hb[1]]

    def weighted(self):
        """[(bucket midpoint, count)]: the distribution as weighted values."""
        return [(bucket_mid(lo, hi), n) for lo, hi, n in self.items()]

    def quantile(self, q, lo_clamp=None, hi_clamp=None):
        """Nearest rank, bucket midpoint, clamped to [min, max]: as the
        runtime's prof_hist_quantiles (src/base/hist.c), to the last bit."""
        if not self.count:
            return None
        if lo_clamp is not None and lo_clamp == hi_clamp:
            return lo_clamp
        q = min(1.0, max(0.0, q))
        rank = max(1, int(q * self.count + 0.999999999))
        seen = 0
        v = hi_clamp
        for lo, hi, n in self.items():
            seen += n
            if seen >= rank:
                v = bucket_mid(lo, hi)
                break
        if v is None:                # rank past every bucket: a foreign histogram
            v = float(self.items()[-1][1])
        if lo_clamp is not None:
            v = max(v, lo_clamp)
        if hi_clamp is not None:
            v = min(v, hi_clamp)
        return v


def bucket_mid(lo, hi):
    """A bucket's value in percentiles: lo + (width - 1) / 2, as the runtime
    (a bucket of width 1 is its value, not value + 0.5)."""
    return lo + (hi - lo - 1) / 2


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------------------
# The common model

class Stage:
    """One row: the zones of one name on one call path (recursion folded into
    the outermost zone of the name, as the runtime's rows are), or, for
    prof-merge's per-name table, every zone with one name."""

    def __init__(self, name, path=None):
        self.name = name
        self.path = path or (name,)  # names from the top, this row's last
        self.parent = None           # the row it is under (per name: mostly runs inside)
        self.depth = 0
        self.calls = None            # every call's duration summed, when total is not (recursion)
        self.gpu = name.endswith(GPU_SUFFIX)
        self.count = self.total = self.self_ns = 0
        self.min = self.max = None
        self.hist = None             # Hist, or None when the input has none
        self.self_hist = None        # Hist of each call's own time (traces only)
        self.p50 = self.p95 = self.p99 = None
        self.wall_share = None        # outer time / wall, as the runtime's wall%

    @property
    def avg(self):
        if not self.count:
            return None
        return (self.calls if self.calls is not None else self.total) / self.count

    def fill_percentiles(self):
        if self.hist is not None and self.hist.count:
            self.p50, self.p95, self.p99 = (self.hist.quantile(q, self.min, self.max)
                                            for q in (0.50, 0.95, 0.99))


class Run:
    """One input file, whichever its kind."""

    def __init__(self, path, source, meta, stages, paths):
        self.path = path
        self.source = source         # 'summary' or 'trace'
        self.meta = meta             # program, pid, host, rank, wall_ns, steps, dropped, ...
        self.stages = stages         # [Stage] in tree order, one per call path
        self.by_path = {s.path: s for s in stages}
        # {(root, ..., name): [total_ns, self_ns, count, Hist of the path's
        # durations (trace) or its Stage (summary)]}
        self.paths = paths
        self.gz = path.endswith('.gz')

    def label(self):
        m = self.meta
        what = m.get('program') or os.path.basename(self.path)
        if m.get('rank') is not None and f'rank {m["rank"]}' not in what:
            what += f' (rank {m["rank"]})'
        return what


# ---------------------------------------------------------------------------
# Loading. Traces are read as a stream of events (one at a time, through a
# buffer of about a megabyte), so that a trace of many gigabytes needs a
# fraction of its size in memory: what stays is 20 bytes per zone (its
# start, duration and name), not the event. Summaries (one JSON object per
# line, small) are read whole.

GZIP_MAGIC = b'\x1f\x8b'
CHUNK = 1 << 20
MAX_EVENT = 64 << 20         # an unfinished event longer than this is not one


def _open(path):
    try:
        return open(path, 'rb')
    except OSError as e:
        raise InputError(f'{path}: cannot read: {e.strerror}') from None


def byte_chunks(path, quiet=False):
    """The file's bytes in chunks, gunzipped on the fly when it starts with
    the gzip magic: every gzip member in turn. A stream that stops early
    (PROF_TRACE=run.json.gz of a killed process) gives what it holds, with a
    warning; the trace reader then repairs the missing ']' as for a plain file."""
    with _open(path) as f:
        data = f.read(CHUNK)
        if data[:2] != GZIP_MAGIC:
            while data:
                yield data
                data = f.read(CHUNK)
            return
        out_n = 0
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while True:
            if not data:
                data = f.read(CHUNK)
                if not data:
                    # What the output cap (below) left inside zlib, if anything.
                    try:
                        out = d.flush()
                    except zlib.error:
                        out = b''
                    if out:
                        out_n += len(out)
                        yield out
                    break
            try:
                out = d.decompress(data, 4 * CHUNK)
            except zlib.error as e:
                if not out_n:
                    raise InputError(f'{path}: corrupt gzip data: {e}') from None
                if not quiet:
                    warn(f'{path}: corrupt gzip data after {out_n} bytes ({e}); '
                         f'reading what comes before')
                return
            data = d.unconsumed_tail
            if out:
                out_n += len(out)
                yield out
            if d.eof:
                data = d.unused_data or f.read(CHUNK)
                if data[:2] != GZIP_MAGIC:
                    return               # the last member (or trailing bytes)
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if not d.eof and not quiet:
            warn(f'{path}: the gzip stream ends early (process killed?); '
                 f'reading the {out_n} bytes it holds')


def text_chunks(path, quiet=False):
    """byte_chunks() as text. Invalid bytes survive as lone surrogates, so
    that outputs can show them as \\xNN (terminal) or U+FFFD (JSON, HTML)
    rather than lose them."""
    dec = codecs.getincrementaldecoder('utf-8')(errors='surrogateescape')
    for b in byte_chunks(path, quiet):
        t = dec.decode(b)
        if t:
            yield t
    t = dec.decode(b'', final=True)
    if t:
        yield t


def read_text(path):
    text = ''.join(text_chunks(path))
    if not text.strip():
        raise InputError(f'{path}: empty file')
    return text


def json_error(path, e, what='invalid JSON'):
    return InputError(f'{path}: {what}: {e.msg} at line {e.lineno} column {e.colno}')


def first_char(path):
    """The first non-blank character of the file (after gunzip), or ''."""
    for t in text_chunks(path):
        t = t.lstrip()
        if t:
            return t[0]
    return ''


def load(path):
    """A JSON summary or a Chrome trace, told apart by content -> Run."""
    head = first_char(path)
    if head == '':
        raise InputError(f'{path}: empty file')
    if head == '[':
        return run_from_trace(path)
    text = read_text(path)
    if head != '{':
        if '\n{' in text:          # summaries among other lines (a captured log)
            return run_from_summary(path, last_summary_line(path, text))
        raise InputError(f'{path}: not a prof JSON summary or Chrome trace '
                         f'(starts with {text.lstrip()[:16]!r})')
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        if not e.msg.startswith('Extra data'):
            raise json_error(path, e, 'truncated or invalid JSON') from None
        return run_from_summary(path, last_summary_line(path, text))
    if isinstance(obj, dict) and isinstance(obj.get('traceEvents'), list):
        return run_from_trace(path)   # object form
    if isinstance(obj, dict) and obj.get('prof') == 'summary':
        return run_from_summary(path, obj)
    raise not_prof(path, obj)


def not_prof(path, obj):
    keys = ', '.join(list(obj)[:5]) if isinstance(obj, dict) else type(obj).__name__
    return InputError(f'{path}: not a prof JSON summary or Chrome trace '
                      f'(a JSON object without "prof": "summary"; keys: {keys})')


def last_summary_line(path, text):
    """A summary file holds one object per line; the last summary is the run.
    Lines that are not JSON objects (other output in a log) are skipped."""
    lines = [(i + 1, l) for i, l in enumerate(text.splitlines()) if l.lstrip().startswith('{')]
    first_obj = None
    for k, (lineno, line) in enumerate(reversed(lines)):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if k == 0:               # the newest line: a writer stopped mid-line
                raise InputError(f'{path}: line {lineno}: truncated or invalid JSON: {e.msg} '
                                 f'at column {e.colno}') from None
            continue
        if isinstance(obj, dict) and obj.get('prof') == 'summary':
            return obj
        first_obj = first_obj if first_obj is not None else obj
    raise not_prof(path, first_obj)


_DECODER = json.JSONDecoder()
_BLANK = ' \t\n\r'


def iter_events(path, notes=None, quiet=False):
    """The events of a Chrome trace, one at a time, checked (check_event).

    Reads the array prof writes ('[', then one event per line each after a
    ','), plain or gzip, through a sliding buffer. Tolerates what a killed
    process leaves: no closing ']' ('unterminated' is added to notes) and a
    half-written last event (dropped with a warning, 'partial-last-event').
    The object form {"traceEvents": [...]} of other tools is read whole."""
    notes = [] if notes is None else notes
    chunks = text_chunks(path, quiet)
    buf, pos, eof = '', 0, False

    def fill():
        nonlocal buf, pos, eof
        if eof:
            return False
        t = next(chunks, None)
        if t is None:
            eof = True
            return False
        if pos > CHUNK:          # drop what was read: the buffer slides
            buf, pos = buf[pos:], 0
        buf += t
        return True

    def skip_blank():
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in _BLANK:
                pos += 1
            if pos < len(buf) or not fill():
                return

    skip_blank()
    if pos >= len(buf):
        raise InputError(f'{path}: empty file')
    if buf[pos] == '{':
        text = buf[pos:] + ''.join(chunks)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise json_error(path, e) from None
        if not (isinstance(obj, dict) and isinstance(obj.get('traceEvents'), list)):
            raise InputError(f'{path}: not a Chrome trace (a JSON array of events)')
        for i, e in enumerate(obj['traceEvents']):
            yield check_event(path, i, e)
        return
    if buf[pos] != '[':
        raise InputError(f'{path}: not a Chrome trace (a JSON array of events)')
    pos += 1
    i = 0
    while True:
        skip_blank()
        if pos >= len(buf):
            notes.append('unterminated')
            return
        c = buf[pos]
        if c == ']':
            pos += 1
            skip_blank()
            if pos < len(buf):
                raise InputError(f'{path}: invalid JSON: extra data after the closing "]" '
                                 f'(after event {i})')
            return
        if i:
            if c != ',':
                raise InputError(f'{path}: invalid JSON: expected "," or "]" after event {i - 1}')
            pos += 1
            skip_blank()
            if pos >= len(buf):
                notes.append('unterminated')
                return
        while True:
            try:
                e, end = _DECODER.raw_decode(buf, pos)
                # A number cut at the buffer's end parses as a shorter one.
                if end < len(buf) or eof:
                    break
                if not fill():
                    break
            except json.JSONDecodeError as err:
                if len(buf) - pos < MAX_EVENT and fill():
                    continue
                rest = buf[pos:]
                if eof and '\n,' not in rest and '\n]' not in rest:
                    if not i:
                        raise InputError(f'{path}: truncated trace: not one complete event') from None
                    if not quiet:
                        warn(f'{path}: trace ends in a half-written event (process killed?); '
                             f'ignoring it')
                    notes += ['unterminated', 'partial-last-event']
                    return
                raise InputError(f'{path}: invalid JSON in event {i}: {err.msg}') from None
        pos = end
        yield check_event(path, i, e)
        i += 1


def check_event(path, i, e):
    """Enough checking that the tools' arithmetic cannot fail on a foreign file."""
    if not (isinstance(e, dict) and isinstance(e.get('ph'), str) and 'name' in e):
        raise InputError(f'{path}: not a Chrome trace: event {i} is not an object '
                         f'with "name" and "ph"')
    if e['ph'] == 'X' and not (is_num(e.get('ts')) and is_num(e.get('dur')) and e['dur'] >= 0):
        raise InputError(f'{path}: event {i} ({e["name"]!r}): X event without numeric ts/dur')
    return e


def to_ns(us):
    """Trace microseconds (3 decimals) -> integer nanoseconds."""
    return int(round(us * 1000))


def fmt_us(ns):
    """Integer ns -> exact microseconds with three decimals, as prof writes them."""
    sign = '-' if ns < 0 else ''
    ns = abs(int(ns))
    return f'{sign}{ns // 1000}.{ns % 1000:03d}'


# ---------------------------------------------------------------------------
# Summary -> Run

def run_from_summary(path, obj):
    if obj.get('kind') not in (None, 'final'):
        warn(f'{path}: the last summary is "{obj.get("kind")}", not "final" '
             f'(did the run end early?); using its whole-run numbers')
    fmt = obj.get('format')
    if not isinstance(fmt, int) or fmt > FORMAT:
        raise InputError(f'{path}: unsupported summary format {fmt!r} (this tool reads {FORMAT})')
    sec = obj.get('total')
    if sec is None and obj.get('kind') == 'periodic' and isinstance(obj.get('window'), dict):
        raise InputError(f'{path}: the last summary is periodic and holds its window only '
                         f'(no final summary: did the run end early?); PROF_SUMMARY_JSON=full '
                         f'keeps whole-run numbers in periodic summaries')
    if not isinstance(sec, dict) or not isinstance(sec.get('stages'), list):
        raise InputError(f'{path}: summary has no "total" section with "stages"')
    stages, paths, stack = [], {}, []
    for i, d in enumerate(sec['stages']):
        if not (isinstance(d, dict) and isinstance(d.get('name'), str)):
            raise InputError(f'{path}: stage {i} has no name')
        depth = d['depth'] if isinstance(d.get('depth'), int) and d['depth'] >= 0 else 0
        # Tree order + depth give the call path: a row is a path (a name
        # under two parents is two rows; a summary before rows were paths
        # has one row per name, under the parent it mostly ran in).
        del stack[depth:]
        stack.append(d['name'])
        s = Stage(d['name'], tuple(stack))
        where = f'{path}: stage {s.name!r}'
        for key, attr in (('count', 'count'), ('total_ns', 'total')):
            if not is_num(d.get(key)):
                raise InputError(f'{where}: missing or non-numeric "{key}"')
            setattr(s, attr, d[key])
        s.self_ns = d['self_ns'] if is_num(d.get('self_ns')) else s.total
        s.min, s.max = (d.get(k) if is_num(d.get(k)) else None for k in ('min_ns', 'max_ns'))
        s.parent = d.get('parent') if isinstance(d.get('parent'), str) else None
        s.depth = len(s.path) - 1
        if is_num(d.get('avg_ns')) and s.count:
            s.calls = d['avg_ns'] * s.count
        s.gpu = bool(d.get('gpu', s.gpu))
        s.wall_share = d['wall_share'] if is_num(d.get('wall_share')) else None
        if isinstance(d.get('hist'), list) and d['hist']:
            s.hist = Hist.from_list(d['hist'], where)
        s.fill_percentiles()
        for q in ('p50', 'p95', 'p99'):   # the runtime's own numbers win
            if is_num(d.get(q + '_ns')):
                setattr(s, q, d[q + '_ns'])
        stages.append(s)
        p = paths.setdefault(s.path, [0, 0, 0, None])
        p[0] += s.total; p[1] += s.self_ns; p[2] += s.count
        p[3] = s                     # per-path percentiles: the stage's own
    meta = {k: obj.get(k) for k in ('program', 'pid', 'host', 'rank', 'version', 'kind',
                                    'unix_time', 'threads', 'dropped')}
    meta['wall_ns'] = sec.get('wall_ns', obj.get('wall_ns'))
    meta['steps'] = sec.get('steps', obj.get('step'))
    return Run(path, 'summary', meta, stages, paths)


# ---------------------------------------------------------------------------
# Trace -> Run

class TraceReader:
    """Reads a trace's events one at a time (feed) and keeps what the tools
    need: the metadata (program, pid, rank, host, clock reference from the
    first process_name event, FORMATS.md; wall span, steps, drops) and each
    thread's zones as three arrays, 20 bytes a zone."""

    def __init__(self):
        self.meta = {'program': None, 'pid': None, 'rank': None, 'host': None, 'rmm_ns': None,
                     'origin_ns': 0, 'steps': None, 'dropped': 0, 'truncated': False,
                     'forked_from': None}
        self.t0 = self.t1 = None
        self.first_pid = self.first_ts = None
        self.count = 0
        self.names, self.name_id = [], {}
        self.threads = {}            # (pid, tid) -> [ts, dur, name id] arrays, in file order
        self.pids = []               # in order of appearance
        self._seen_pids = set()
        self.meta_events = []        # the 'M' events, kept whole (a few per thread)

    def feed(self, e):
        """One checked event (check_event)."""
        if not self.count:
            self.first_pid = e.get('pid')
        self.count += 1
        pid = e.get('pid')
        if pid not in self._seen_pids:
            self._seen_pids.add(pid)
            self.pids.append(pid)
        ph = e['ph']
        if ph == 'X':                # most events: kept short
            ts, dur = int(round(e['ts'] * 1000)), int(round(e['dur'] * 1000))
            if self.t0 is None or ts < self.t0:
                self.t0 = ts
            if self.t1 is None or ts + dur > self.t1:
                self.t1 = ts + dur
            n = e['name']
            if type(n) is not str or e.get('cat') == 'gpu':
                n = stage_name(e)
            k = self.name_id.get(n)
            if k is None:
                k = self.name_id[n] = len(self.names)
                self.names.append(n)
            key = (pid, e.get('tid'))
            th = self.threads.get(key)
            if th is None:
                th = self.threads[key] = [array('q'), array('q'), array('i')]
            th[0].append(ts)
            th[1].append(dur)
            th[2].append(k)
            return
        meta, name, args = self.meta, e.get('name'), e.get('args')
        args = args if isinstance(args, dict) else {}
        if ph != 'M' and is_num(e.get('ts')):
            ts = to_ns(e['ts'])
            self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        if ph == 'M':
            self.meta_events.append(e)
        if ph == 'M' and name == 'process_name' and meta['program'] is None:
            meta['program'] = args.get('name') if isinstance(args.get('name'), str) else None
            meta['pid'] = pid
            p = args.get('prof') if isinstance(args.get('prof'), dict) else {}
            meta['rank'] = p.get('rank')
            meta['host'] = p.get('host')
            # A forked worker's parent pid (FORMATS.md): a worker, not a rank.
            ff = p.get('forked_from')
            meta['forked_from'] = ff if isinstance(ff, int) and not isinstance(ff, bool) else None
            rmm = p.get('realtime_minus_monotonic_ns')
            meta['rmm_ns'] = rmm if isinstance(rmm, int) and not isinstance(rmm, bool) else None
            # ts counts from this CLOCK_MONOTONIC time (0 in older files).
            origin = p.get('ts_origin_ns')
            meta['origin_ns'] = origin if isinstance(origin, int) and not isinstance(origin, bool) else 0
        elif ph == 'i' and e.get('cat') == 'step':
            meta['steps'] = (meta['steps'] or 0) + 1
        elif ph == 'C' and name == 'prof.dropped' and is_num(args.get('value')):
            meta['dropped'] = max(meta['dropped'], int(args['value']))
        elif ph == 'i' and e.get('cat') == 'prof' and 'limit' in str(name):
            meta['truncated'] = True

    @property
    def start_ns(self):
        """The earliest ts of any event but metadata, or None."""
        starts = [t for t in (self.t0, self.first_ts) if t is not None]
        return min(starts) if starts else None

    def read(self, path, notes=None):
        for e in iter_events(path, notes):
            self.feed(e)
        if self.meta['pid'] is None and self.count:
            self.meta['pid'] = self.first_pid
        self.meta['wall_ns'] = (self.t1 - self.t0) if self.t0 is not None else 0
        return self


def stage_name(e):
    """GPU zones get the summary's ' [gpu]' suffix so traces and summaries diff."""
    name = str(e['name'])
    if e.get('cat') == 'gpu' and not name.endswith(GPU_SUFFIX):
        name += GPU_SUFFIX
    return name


def _thread_order(ts, dur):
    """The zones' indices, last-ending first. prof writes a thread's zones in
    the order they end, so this is the file's order backwards; other
    writers' files are sorted (ends descending, then the longer first)."""
    n = len(ts)
    prev = None
    for k in range(n):
        end = ts[k] + dur[k]
        if prev is not None and end < prev:
            return sorted(range(n), key=lambda j: (-(ts[j] + dur[j]), -dur[j]))
        prev = end
    return range(n - 1, -1, -1)


def trace_stages(reader, by_name=False):
    """Stats from a TraceReader's zones -> (rows in tree order, paths).

    Rows are call paths, as the runtime's summary has them: a name under two
    parents is two rows, and a recursive name is one row, its nested calls
    folded into the outermost (count: every call; total: the outermost
    calls' time, each moment once, so a row's children add up to at most
    its child time). by_name: one row per name instead, under the parent it
    mostly runs in, total counting nested calls again (prof-merge's table
    across ranks, keyed by name like the runtime's).

    Zones nest per (pid, tid). Walked from the last-ending zone back, a
    zone comes before the zones inside it (the reverse of the order prof
    writes them: a child ends before its parent), so each zone lies inside
    the innermost open zone that contains it, with one stack and no
    recursion, whatever the depth. A zone's self time is its duration minus
    its children's."""
    names = reader.names
    acc, paths, under, rows = {}, {}, {}, {}
    for n in names:
        s = acc[n] = Stage(n)
        s.hist, s.self_hist = Hist(), Hist()

    def row_of(cpath):
        r = rows.get(cpath)
        if r is None:
            r = rows[cpath] = Stage(cpath[-1], cpath)
            r.hist, r.self_hist, r.calls = Hist(), Hist(), 0
        return r

    def close(fr):                   # fr = [ts, end, path, dur, child_ns, row path]
        self_ns = max(0, fr[3] - fr[4])
        s = acc[fr[2][-1]]
        s.self_ns += self_ns
        s.self_hist.add(self_ns)
        r = rows[fr[5]]
        r.self_ns += self_ns
        r.self_hist.add(self_ns)
        paths[fr[2]][1] += self_ns

    for ts_a, dur_a, name_a in reader.threads.values():
        stack = []
        for k in _thread_order(ts_a, dur_a):
            ts, dur, name = ts_a[k], dur_a[k], names[name_a[k]]
            end = ts + dur
            # The top contains this zone when it starts no later, and this
            # zone starts before the top ends and ends by its end (1 ns slack:
            # ts/dur are rounded to whole ns).
            while stack and not (stack[-1][0] <= ts and ts + SLACK_NS < stack[-1][1]
                                 and end <= stack[-1][1] + SLACK_NS):
                close(stack.pop())
            parent = stack[-1] if stack else None
            if parent:
                parent[4] += dur
            path = (parent[2] if parent else ()) + (name,)
            # The row: the outermost row of this name above (recursion),
            # else the parent's row and this name.
            above = parent[5] if parent else ()
            nested = name in above
            cpath = above[:above.index(name) + 1] if nested else above + (name,)
            r = row_of(cpath)
            r.count += 1
            r.calls += dur
            if not nested:
                r.total += dur
            r.min = dur if r.min is None else min(r.min, dur)
            r.max = dur if r.max is None else max(r.max, dur)
            r.hist.add(dur)
            s = acc[name]
            s.count += 1
            s.total += dur
            s.min = dur if s.min is None else min(s.min, dur)
            s.max = dur if s.max is None else max(s.max, dur)
            s.hist.add(dur)
            p = paths.get(path)
            if p is None:
                p = paths[path] = [0, 0, 0, Hist()]
            p[0] += dur; p[2] += 1
            p[3].add(dur)
            w = under.setdefault(name, {})
            pname = parent[2][-1] if parent else None
            w[pname] = w.get(pname, 0) + dur
            stack.append([ts, end, path, dur, 0, cpath])
        while stack:
            close(stack.pop())
    # wall%: time in a stage's zones that are not inside a zone of the same
    # stage (the runtime's "outer" time) over the trace's wall span.
    outer = {}
    for path, v in paths.items():
        if path[-1] not in path[:-1]:
            outer[path[-1]] = outer.get(path[-1], 0) + v[0]
    wall = reader.meta.get('wall_ns') or 0
    # The parent of a stage is where most of its time runs; a GPU stage goes
    # under its CPU stage of the same name, as in the summary.
    if not by_name:
        return path_rows(rows, acc, wall), paths
    parent_of = {}
    for name, w in under.items():
        base = name[:-len(GPU_SUFFIX)] if name.endswith(GPU_SUFFIX) else None
        parent_of[name] = base if base in acc else max(w, key=lambda p: (w[p], p is None))
    stages = []
    # Siblings by total time, largest first, as the runtime's summary orders them.
    for name, depth in tree_order(list(acc), parent_of, key=lambda n: (-acc[n].total, n)):
        s = acc[name]
        s.parent, s.depth = (parent_of[name] if depth else None), depth
        s.wall_share = outer.get(name, 0) / wall if wall else None
        s.fill_percentiles()
        stages.append(s)
    return stages, paths


def path_rows(rows, acc, wall):
    """The trace's rows in tree order: each under the row of its path's
    parent; a GPU stage (its own track) under the heaviest row of its CPU
    stage, as the runtime places it."""
    heaviest = {}
    for cpath, r in rows.items():
        h = heaviest.get(r.name)
        if h is None or r.total > rows[h].total:
            heaviest[r.name] = cpath
    parent_of = {}
    for cpath, r in rows.items():
        base = r.name[:-len(GPU_SUFFIX)] if r.name.endswith(GPU_SUFFIX) else None
        if len(cpath) == 1 and base in heaviest:
            parent_of[cpath] = heaviest[base]
        elif len(cpath) > 1:
            parent_of[cpath] = cpath[:-1]
    out = []
    for cpath, depth in tree_order(list(rows), parent_of,
                                   key=lambda c: (-rows[c].total, rows[c].name)):
        r = rows[cpath]
        up = parent_of.get(cpath) if depth else None
        r.parent, r.depth = (rows[up].name if up else None), depth
        if up is not None and up != cpath[:-1]:
            r.path = up + (r.name,)      # a GPU row under its CPU row
        r.wall_share = r.total / wall if wall else None
        r.fill_percentiles()
        out.append(r)
    return out


def tree_order(names, parent_of, key):
    """[(name, depth)]: each stage followed by the stages under it, siblings
    sorted by key. Iterative (an explicit stack): a chain of stages as deep
    as the runtime records (tens of thousands) needs no recursion limit."""
    known = set(names)
    children = {}
    roots = []
    for n in names:
        p = parent_of.get(n)
        (children.setdefault(p, []) if p in known and p != n else roots).append(n)
    out, seen = [], set()
    # then what a cycle (a in b in a) left unreached, as roots
    for top in sorted(roots, key=key) + sorted(names, key=key):
        stack = [(top, 0)]
        while stack:
            n, depth = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            out.append((n, depth))
            kids = sorted(children.get(n, ()), key=key)
            stack.extend((c, depth + 1) for c in reversed(kids))
    return out


def run_from_trace(path):
    r = TraceReader().read(path)
    stages, paths = trace_stages(r)
    return Run(path, 'trace', r.meta, stages, paths)


# ---------------------------------------------------------------------------
# Output helpers

def fmt_ns(ns):
    """Human time: 812ns, 12.34us, 4.567ms, 1.234s."""
    if ns is None:
        return '-'
    a = abs(ns)
    for unit, scale in (('s', 1e9), ('ms', 1e6), ('us', 1e3)):
        if a >= scale:
            return f'{ns / scale:.4g}{unit}'
    return f'{ns:.0f}ns'


def fmt_dur(ns):
    """A duration as the library's own table writes it (src/base/json.c,
    prof_fmt_dur): '812 ns', '12.34 us', '4.57 ms', '1.234 s'. The
    same decimal rounding (half to even on the double's exact value)."""
    if ns is None:
        return '-'
    ns = float(ns)
    for below, scale, decimals, unit in ((1e3, 1, 0, ' ns'), (1e6, 1e3, 2, ' us'),
                                         (1e9, 1e6, 2, ' ms')):
        if ns < below:
            break
    else:
        scale, decimals, unit = 1e9, 3, ' s'
    return f'{ns / scale:.{decimals}f}' + unit


def fmt_pct(x, signed=True):
    if x is None:
        return '-'
    x = round(x, 1) + 0.0             # no '-0.0%'
    return f'{x:+.1f}%' if signed and x else f'{x:.1f}%'


def shown(text):
    """Text as it may reach a terminal, by the rule of the library's own
    table (src/output/summary.c): valid UTF-8 is kept; control characters (ESC,
    CSI, OSC, newlines, \\x01), DEL and C1 controls are shown as \\xNN, one
    per UTF-8 byte; bytes that were not UTF-8 in the input are \\xNN too."""
    text = str(text)
    if _PLAIN.fullmatch(text):
        return text
    out = []
    for c in text:
        o = ord(c)
        if 0xdc80 <= o <= 0xdcff:            # an invalid input byte (surrogateescape)
            out.append(f'\\x{o - 0xdc00:02x}')
        elif 0xd800 <= o <= 0xdfff:          # a lone surrogate from a JSON \\u escape
            out.append('\ufffd')
        elif o < 0x20 or 0x7f <= o <= 0x9f:
            out.append(''.join(f'\\x{b:02x}' for b in c.encode('utf-8')))
        else:
            out.append(c)
    return ''.join(out)


_PLAIN = re.compile(r'[\x20-\x7e]*')
_SURROGATE = re.compile('[\ud800-\udfff]')


def json_safe(text):
    """JSON text (ensure_ascii=False) -> text that encodes as valid UTF-8:
    invalid input bytes and lone surrogates become U+FFFD, as the library
    writes them."""
    return _SURROGATE.sub('\ufffd', text)


def clean_json(obj):
    """A value for json.dumps: json_safe() on every string, keys included."""
    if isinstance(obj, str):
        return json_safe(obj)
    if isinstance(obj, dict):
        return {clean_json(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj


def html_text(text):
    """A name for HTML/SVG text or attributes: shown() (no control
    characters, which XML forbids), then entity-escaped."""
    return (shown(text).replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')
            .replace('"', '&quot;').replace("'", '&#39;'))


def setup_stdout():
    """Never fail on printing a name the locale cannot encode."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.reconfigure(errors='backslashreplace')
        except (AttributeError, ValueError):
            pass


def write_output(path, text, what='output'):
    """Write text (UTF-8) to path, gzip-compressed when the name ends in
    '.gz', through a temporary file renamed over it ('-': stdout)."""
    if path == '-':
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    with output_file(path, what) as w:
        w(text)


@contextlib.contextmanager
def output_file(path, what='output'):
    """-> write(text): a file written piece by piece (a merged trace of many
    gigabytes is never one string), gzip when the name ends in '.gz', in a
    temporary file renamed over path once whole; removed on failure."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', suffix='.tmp', dir=d)
    except OSError as e:
        raise InputError(f'{path}: cannot write {what}: {e.strerror}') from None
    try:
        with os.fdopen(fd, 'wb') as raw:
            if path.endswith('.gz'):
                import gzip
                f = gzip.GzipFile(filename='', mode='wb', fileobj=raw, compresslevel=6, mtime=0)
            else:
                f = raw
            yield lambda text: f.write(json_safe(text).encode('utf-8'))
            if f is not raw:
                f.close()
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(f'{path}: cannot write {what}: {e.strerror}') from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def table(headers, rows, left=1):
    """Plain text table; the first `left` columns are left-aligned. Every
    cell goes through shown(): names are user data."""
    cells = [[shown(c) for c in headers]] + [[shown(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for r in cells:
        out.append('  '.join(c.ljust(w) if i < left else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return '\n'.join(out)


def describe(run):
    """One line about a run for table headers."""
    m = run.meta
    bits = [run.label(), run.source + (' (gzip)' if run.gz else '')]
    if m.get('host'):
        bits.append(f'host {m["host"]}')
    if m.get('steps'):
        bits.append(f'{m["steps"]} steps')
    if m.get('wall_ns'):
        bits.append(f'wall {fmt_ns(m["wall_ns"])}')
    if m.get('dropped'):
        bits.append(f'{m["dropped"]} dropped')
    if m.get('truncated'):
        bits.append('trace cut at size limit')
    return shown(f'{run.path}: ' + ', '.join(bits))
