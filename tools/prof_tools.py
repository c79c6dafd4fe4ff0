"""Shared code of prof-merge, prof-diff and prof-report.

Reads the two kinds of files prof writes (docs/FORMATS.md): JSON summaries
(one object per line, the last one is the run) and Chrome traces (a JSON
array, possibly without its closing ']' when the process was killed), and
turns either into the same thing: a Run holding one Stage per stage name in
tree order, with count/total/self/min/max, a log-linear histogram and
percentiles, plus the call-path tree (for flame graphs and folded stacks).
Standard library only.
"""

import json
import math
import os
import re
import sys
import tempfile
import zlib

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
# Histogram: the runtime's log-linear scheme (src/hist.h), so percentiles
# computed here from a trace match the ones a summary reports.

class Hist:
    SUB_BITS = 6     # values < 64 get a bucket each; each power of two above: 64 buckets

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
        v = max(0, int(v))
        if v < (1 << self.SUB_BITS):
            lo, hi = v, v + 1
        else:
            shift = v.bit_length() - 1 - self.SUB_BITS
            lo = (v >> shift) << shift
            hi = lo + (1 << shift)
        self.add_bucket(lo, hi, 1)

    def items(self):
        """[(lo, hi, count)] ascending."""
        return [(lo, hb[0], hb[1]) for lo, hb in sorted(self.buckets.items()) if hb[1]]

    def weighted(self):
        """[(bucket midpoint, count)]: the distribution as weighted values."""
        return [((lo + hi) / 2, n) for lo, hi, n in self.items()]

    def quantile(self, q, lo_clamp=None, hi_clamp=None):
        """Nearest rank, bucket midpoint, clamped to [min, max]: as the runtime."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for lo, hi, n in self.items():
            seen += n
            if seen >= rank:
                v = (lo + hi) / 2
                break
        if lo_clamp is not None:
            v = max(v, lo_clamp)
        if hi_clamp is not None:
            v = min(v, hi_clamp)
        return v


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------------------
# The common model

class Stage:
    """One row: every zone with one name."""

    def __init__(self, name):
        self.name = name
        self.parent = None           # the stage it mostly runs inside
        self.depth = 0
        self.gpu = name.endswith(GPU_SUFFIX)
        self.count = self.total = self.self_ns = 0
        self.min = self.max = None
        self.hist = None             # Hist, or None when the input has none
        self.self_hist = None        # Hist of each call's own time (traces only)
        self.p50 = self.p95 = self.p99 = None

    @property
    def avg(self):
        return self.total / self.count if self.count else None

    def fill_percentiles(self):
        if self.hist is not None and self.hist.count:
            self.p50, self.p95, self.p99 = (self.hist.quantile(q, self.min, self.max)
                                            for q in (0.50, 0.95, 0.99))


class Run:
    """One input file, whichever its kind."""

    def __init__(self, path, source, meta, stages, paths, events=None):
        self.path = path
        self.source = source         # 'summary' or 'trace'
        self.meta = meta             # program, pid, host, rank, wall_ns, steps, dropped, ...
        self.stages = stages         # [Stage] in tree order
        self.by_name = {s.name: s for s in stages}
        # {(root, ..., name): [total_ns, self_ns, count, Hist of the path's
        # durations (trace) or its Stage (summary)]}
        self.paths = paths
        self.events = events         # trace events (traces only)
        self.gz = path.endswith('.gz')

    def label(self):
        m = self.meta
        what = m.get('program') or os.path.basename(self.path)
        if m.get('rank') is not None and f'rank {m["rank"]}' not in what:
            what += f' (rank {m["rank"]})'
        return what


# ---------------------------------------------------------------------------
# Loading

GZIP_MAGIC = b'\x1f\x8b'


def gunzip(path, data):
    """Every gzip member in data, decompressed. A stream that stops early
    (PROF_TRACE=run.json.gz of a killed process) gives what it holds, with a
    warning; the trace reader then repairs the missing ']' as for a plain file."""
    out = []
    while data[:2] == GZIP_MAGIC:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(d.decompress(data))
            if not d.eof:
                out.append(d.flush())
        except zlib.error as e:
            if not out:
                raise InputError(f'{path}: corrupt gzip data: {e}') from None
            warn(f'{path}: corrupt gzip data after {sum(map(len, out))} bytes ({e}); '
                 f'reading what comes before')
            break
        if not d.eof:
            warn(f'{path}: the gzip stream ends early (process killed?); '
                 f'reading the {sum(map(len, out))} bytes it holds')
            break
        data = d.unused_data
    return b''.join(out)


def read_text(path):
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as e:
        raise InputError(f'{path}: cannot read: {e.strerror}') from None
    if data[:2] == GZIP_MAGIC:
        data = gunzip(path, data)
    if not data.strip():
        raise InputError(f'{path}: empty file')
    # Invalid bytes survive as lone surrogates, so that outputs can show them
    # as \xNN (terminal) or U+FFFD (JSON, HTML) rather than lose them.
    return data.decode('utf-8', errors='surrogateescape')


def json_error(path, e, what='invalid JSON'):
    return InputError(f'{path}: {what}: {e.msg} at line {e.lineno} column {e.colno}')


def load(path):
    """A JSON summary or a Chrome trace, told apart by content -> Run."""
    text = read_text(path)
    head = text.lstrip()[:1]
    if head == '[':
        return run_from_trace(path, parse_trace_text(path, text)[0])
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
        return run_from_trace(path, check_events(path, obj['traceEvents']))   # object form
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


def parse_trace_text(path, text):
    """-> (events, notes). Tolerates what a killed process leaves: no closing
    ']' and possibly a half-written last event (dropped, with a warning)."""
    notes = []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        body = text.rstrip().rstrip(',')
        try:
            data = json.loads(body + '\n]')
            notes.append('unterminated')
        except json.JSONDecodeError:
            # Drop the last (partial) line and try again.
            cut = body.rsplit('\n', 1)[0].rstrip().rstrip(',') if '\n' in body else '['
            try:
                data = json.loads(cut + '\n]')
                notes += ['unterminated', 'partial-last-event']
            except json.JSONDecodeError:
                raise json_error(path, e) from None
        if 'partial-last-event' in notes:
            if not data:
                raise InputError(f'{path}: truncated trace: not one complete event')
            warn(f'{path}: trace ends in a half-written event (process killed?); ignoring it')
    if isinstance(data, dict) and isinstance(data.get('traceEvents'), list):
        data = data['traceEvents']
    return check_events(path, data), notes


def check_events(path, data):
    """Enough checking that the tools' arithmetic cannot fail on a foreign file."""
    if not isinstance(data, list):
        raise InputError(f'{path}: not a Chrome trace (a JSON array of events)')
    for i, e in enumerate(data):
        if not (isinstance(e, dict) and isinstance(e.get('ph'), str) and 'name' in e):
            raise InputError(f'{path}: not a Chrome trace: event {i} is not an object '
                             f'with "name" and "ph"')
        if e['ph'] == 'X' and not (is_num(e.get('ts')) and is_num(e.get('dur')) and e['dur'] >= 0):
            raise InputError(f'{path}: event {i} ({e["name"]!r}): X event without numeric ts/dur')
    return data


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
    if not isinstance(sec, dict) or not isinstance(sec.get('stages'), list):
        raise InputError(f'{path}: summary has no "total" section with "stages"')
    stages, paths, stack = [], {}, []
    for i, d in enumerate(sec['stages']):
        if not (isinstance(d, dict) and isinstance(d.get('name'), str)):
            raise InputError(f'{path}: stage {i} has no name')
        s = Stage(d['name'])
        where = f'{path}: stage {s.name!r}'
        for key, attr in (('count', 'count'), ('total_ns', 'total')):
            if not is_num(d.get(key)):
                raise InputError(f'{where}: missing or non-numeric "{key}"')
            setattr(s, attr, d[key])
        s.self_ns = d['self_ns'] if is_num(d.get('self_ns')) else s.total
        s.min, s.max = (d.get(k) if is_num(d.get(k)) else None for k in ('min_ns', 'max_ns'))
        s.parent = d.get('parent') if isinstance(d.get('parent'), str) else None
        s.depth = d['depth'] if isinstance(d.get('depth'), int) and d['depth'] >= 0 else 0
        s.gpu = bool(d.get('gpu', s.gpu))
        if isinstance(d.get('hist'), list) and d['hist']:
            s.hist = Hist.from_list(d['hist'], where)
        s.fill_percentiles()
        for q in ('p50', 'p95', 'p99'):   # the runtime's own numbers win
            if is_num(d.get(q + '_ns')):
                setattr(s, q, d[q + '_ns'])
        stages.append(s)
        # Tree order + depth give the call path (a name is one row even when
        # it runs under several parents: it sits under the one named).
        del stack[s.depth:]
        stack.append(s.name)
        p = paths.setdefault(tuple(stack), [0, 0, 0, None])
        p[0] += s.total; p[1] += s.self_ns; p[2] += s.count
        p[3] = s                     # per-path percentiles: the stage's own
    meta = {k: obj.get(k) for k in ('program', 'pid', 'host', 'rank', 'version', 'kind',
                                    'unix_time', 'threads', 'dropped')}
    meta['wall_ns'] = sec.get('wall_ns', obj.get('wall_ns'))
    meta['steps'] = sec.get('steps', obj.get('step'))
    return Run(path, 'summary', meta, stages, paths)


# ---------------------------------------------------------------------------
# Trace -> Run

def trace_meta(events):
    """Program, pid, rank, host and clock reference from the first
    process_name event (FORMATS.md), plus wall span, steps, drops."""
    meta = {'program': None, 'pid': None, 'rank': None, 'host': None, 'rmm_ns': None,
            'origin_ns': 0,
            'steps': None, 'dropped': 0, 'truncated': False}
    t0 = t1 = None
    for e in events:
        ph, name, args = e.get('ph'), e.get('name'), e.get('args')
        args = args if isinstance(args, dict) else {}
        if ph == 'M' and name == 'process_name' and meta['program'] is None:
            meta['program'] = args.get('name') if isinstance(args.get('name'), str) else None
            meta['pid'] = e.get('pid')
            p = args.get('prof') if isinstance(args.get('prof'), dict) else {}
            meta['rank'] = p.get('rank')
            meta['host'] = p.get('host')
            rmm = p.get('realtime_minus_monotonic_ns')
            meta['rmm_ns'] = rmm if isinstance(rmm, int) and not isinstance(rmm, bool) else None
            # ts counts from this CLOCK_MONOTONIC time (0 in older files).
            origin = p.get('ts_origin_ns')
            meta['origin_ns'] = origin if isinstance(origin, int) and not isinstance(origin, bool) else 0
        elif ph == 'X':
            ts = to_ns(e['ts'])
            t0 = ts if t0 is None else min(t0, ts)
            t1 = max(t1 or 0, ts + to_ns(e['dur']))
        elif ph == 'i' and e.get('cat') == 'step':
            meta['steps'] = (meta['steps'] or 0) + 1
        elif ph == 'C' and name == 'prof.dropped' and is_num(args.get('value')):
            meta['dropped'] = max(meta['dropped'], int(args['value']))
        elif ph == 'i' and e.get('cat') == 'prof' and 'limit' in str(name):
            meta['truncated'] = True
    if meta['pid'] is None and events:
        meta['pid'] = events[0].get('pid')
    meta['wall_ns'] = (t1 - t0) if t0 is not None else 0
    return meta


def stage_name(e):
    """GPU zones get the summary's ' [gpu]' suffix so traces and summaries diff."""
    name = str(e['name'])
    if e.get('cat') == 'gpu' and not name.endswith(GPU_SUFFIX):
        name += GPU_SUFFIX
    return name


def trace_stages(events):
    """Per-stage stats from X events -> (stages in tree order, paths).

    Zones nest per (pid, tid): sorted by start (longest first), each zone
    lies inside the innermost open zone that has not ended. A zone's self
    time is its duration minus its children's; total is the sum of
    durations (recursion counted at every level, as the runtime does)."""
    threads = {}
    for e in events:
        if e.get('ph') == 'X':
            ts, dur = to_ns(e['ts']), to_ns(e['dur'])
            threads.setdefault((e.get('pid'), e.get('tid')), []).append((ts, -dur, stage_name(e)))
    acc, paths, under = {}, {}, {}

    def close(fr):                   # fr = [end, path, dur, child_ns]
        self_ns = max(0, fr[2] - fr[3])
        s = acc[fr[1][-1]]
        s.self_ns += self_ns
        s.self_hist.add(self_ns)
        paths[fr[1]][1] += self_ns

    for zones in threads.values():
        zones.sort()
        stack = []
        for ts, ndur, name in zones:
            dur, end = -ndur, ts - ndur
            while stack and (stack[-1][0] <= ts + SLACK_NS or end > stack[-1][0] + SLACK_NS):
                close(stack.pop())   # ended before us, or overlaps us without nesting (not prof's)
            parent = stack[-1] if stack else None
            if parent:
                parent[3] += dur
            path = (parent[1] if parent else ()) + (name,)
            s = acc.get(name)
            if s is None:
                s = acc[name] = Stage(name)
                s.hist, s.self_hist = Hist(), Hist()
            s.count += 1
            s.total += dur
            s.min = dur if s.min is None else min(s.min, dur)
            s.max = dur if s.max is None else max(s.max, dur)
            s.hist.add(dur)
            p = paths.setdefault(path, [0, 0, 0, None])
            p[0] += dur; p[2] += 1
            if p[3] is None:
                p[3] = Hist()
            p[3].add(dur)
            w = under.setdefault(name, {})
            pname = parent[1][-1] if parent else None
            w[pname] = w.get(pname, 0) + dur
            stack.append([end, path, dur, 0])
        while stack:
            close(stack.pop())
    # The parent of a stage is where most of its time runs; a GPU stage goes
    # under its CPU stage of the same name, as in the summary.
    parent_of = {}
    for name, w in under.items():
        base = name[:-len(GPU_SUFFIX)] if name.endswith(GPU_SUFFIX) else None
        parent_of[name] = base if base in acc else max(w, key=lambda p: (w[p], p is None))
    stages = []
    # Siblings by total time, largest first, as the runtime's summary orders them.
    for name, depth in tree_order(list(acc), parent_of, key=lambda n: (-acc[n].total, n)):
        s = acc[name]
        s.parent, s.depth = (parent_of[name] if depth else None), depth
        s.fill_percentiles()
        stages.append(s)
    return stages, paths


def tree_order(names, parent_of, key):
    """[(name, depth)]: each stage followed by the stages under it."""
    known = set(names)
    children = {}
    roots = []
    for n in names:
        p = parent_of.get(n)
        (children.setdefault(p, []) if p in known and p != n else roots).append(n)
    out, seen = [], set()

    def visit(n, depth):
        if n in seen:
            return
        seen.add(n)
        out.append((n, depth))
        for c in sorted(children.get(n, ()), key=key):
            visit(c, depth + 1)

    for n in sorted(roots, key=key) + sorted(names, key=key):   # then cycles (a in b in a)
        visit(n, 0)
    return out


def run_from_trace(path, events):
    stages, paths = trace_stages(events)
    return Run(path, 'trace', trace_meta(events), stages, paths, events)


def load_trace(path):
    """For prof-merge: a trace only -> (events, notes)."""
    text = read_text(path)
    if text.lstrip()[:1] != '[':
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None
        if not (isinstance(obj, dict) and isinstance(obj.get('traceEvents'), list)):
            raise InputError(f'{path}: not a Chrome trace (a JSON array of events); '
                             f'prof-merge merges traces, not summaries')
    return parse_trace_text(path, text)


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


def fmt_pct(x, signed=True):
    if x is None:
        return '-'
    x = round(x, 1) + 0.0             # no '-0.0%'
    return f'{x:+.1f}%' if signed and x else f'{x:.1f}%'


def shown(text):
    """Text as it may reach a terminal, by the rule of the library's own
    table (src/summary.c): valid UTF-8 is kept; control characters (ESC,
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
    data = json_safe(text).encode('utf-8')
    if path.endswith('.gz'):
        import gzip
        data = gzip.compress(data, compresslevel=6, mtime=0)
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', suffix='.tmp', dir=d)
    except OSError as e:
        raise InputError(f'{path}: cannot write {what}: {e.strerror}') from None
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(f'{path}: cannot write {what}: {e.strerror}') from None


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
