"""tests/trace_check.py, the validator every other test relies on: it must
accept prof's traces and reject each kind of broken one."""

import json
import os
import subprocess
import sys

import pytest

import synth
import trace_check
from conftest import ROOT

CHECKER = os.path.join(ROOT, 'tests', 'trace_check.py')


def lines(steps=3):
    return synth.trace_events(synth.simulate(1, steps=steps))


def check(path, *args):
    return subprocess.run([sys.executable, CHECKER, path, *args], capture_output=True, text=True)


def x(name, ts, dur, tid=1, depth=0, pid=4242):
    return json.dumps({'name': name, 'ph': 'X', 'pid': pid, 'tid': tid, 'ts': ts, 'dur': dur,
                       'cat': 'cpu', 'args': {'depth': depth}})


def test_accepts_a_prof_trace(write):
    f = write('t.json', synth.trace_text(lines()))
    p = check(f, '--expect-stage', 'forward', '--expect-stage', 'attention', '--min-events', '18')
    assert p.returncode == 0 and 'OK' in p.stdout, p.stderr
    events = trace_check.check_trace(f)
    assert sum(e['ph'] == 'X' for e in events) == 18


def test_accepts_edge_cases(write):
    """Empty trace; a child ending 1 ns past its parent (rounding);
    back-to-back siblings; zero-length zones; a proper surrogate pair."""
    base = lines(1)[:1]
    ok = [x('p', 10.0, 5.0), x('c', 10.0, 5.001, depth=1), x('s', 15.0, 1.0),
          x('z', 16.0, 0.0), x('z', 16.0, 0.0), x('\ud83d\ude00 \\u00e9', 17.0, 1.0)]
    f = write('t.json', synth.trace_text(base + ok))
    assert check(f).returncode == 0, check(f).stderr
    assert check(write('e.json', '[\n]\n')).returncode == 0


BAD = {
    'bad nesting': [x('a', 10.0, 5.0), x('b', 12.0, 5.0)],
    'overlap on one thread': [x('a', 10.0, 5.0, tid=2), x('a2', 14.0, 5.0, tid=2, depth=1)],
    'ts of 0': [x('a', 0, 5.0)],
    'negative dur': [x('a', 10.0, -1.0)],
    'NaN': ['{"name":"a","ph":"X","pid":4242,"tid":1,"ts":NaN,"dur":1.0,"cat":"cpu","args":{"depth":0}}'],
    'Infinity in args': ['{"name":"c","ph":"C","pid":4242,"tid":1,"ts":5.0,"args":{"value":Infinity}}'],
    'huge number': ['{"name":"c","ph":"C","pid":4242,"tid":1,"ts":5.0,"args":{"value":1e999}}'],
    'lone surrogate': [x('\udc80', 10.0, 1.0)],
    'string pid': [x('a', 10.0, 1.0).replace('"pid": 4242', '"pid": "4242"')],
    'float tid': [x('a', 10.0, 1.0).replace('"tid": 1', '"tid": 1.5')],
    'missing dur': ['{"name":"a","ph":"X","pid":4242,"tid":1,"ts":1.0,"cat":"cpu","args":{"depth":0}}'],
    'missing depth': ['{"name":"a","ph":"X","pid":4242,"tid":1,"ts":1.0,"dur":1,"cat":"cpu"}'],
    'bad cat': [x('a', 10.0, 1.0).replace('"cpu"', '"io"')],
    'duplicate key': ['{"name":"a","name":"b","ph":"i","pid":4242,"tid":1,"ts":1.0,"s":"t","cat":"mark"}'],
    'metadata without name': ['{"name":"thread_name","ph":"M","pid":4242,"tid":1,"args":{}}'],
    'unknown metadata': ['{"name":"whatever","ph":"M","pid":4242,"tid":1,"args":{"name":"x"}}'],
    'unknown ph': ['{"name":"a","ph":"B","pid":4242,"tid":1,"ts":1.0}'],
    'counter without value': ['{"name":"c","ph":"C","pid":4242,"tid":1,"ts":5.0}'],
    'step without number': ['{"name":"s","ph":"i","pid":4242,"tid":1,"ts":5.0,"s":"t","cat":"step"}'],
    'pid without process_name': [x('a', 10.0, 1.0, pid=99)],
    'limit note not last': ['{"name":"prof: trace size limit reached (1 MB); later events not recorded",'
                            '"ph":"i","pid":4242,"tid":1,"ts":5.0,"s":"t","cat":"prof"}', x('a', 10.0, 1.0)],
}


@pytest.mark.parametrize('what', list(BAD))
def test_rejects(write, what):
    f = write('bad.json', synth.trace_text(lines(1)[:1] + BAD[what]))
    p = check(f)
    assert p.returncode == 1 and 'INVALID' in p.stderr and 'Traceback' not in p.stderr, (what, p.stderr)
    with pytest.raises(trace_check.TraceError):
        trace_check.check_trace(f)


def test_rejects_first_event_not_process_name(write):
    f = write('bad.json', synth.trace_text(lines(1)[1:]))
    assert 'first event' in check(f).stderr
    no_ref = json.loads(lines(1)[0])
    del no_ref['args']['prof']['realtime_minus_monotonic_ns']
    f = write('bad2.json', synth.trace_text([json.dumps(no_ref)] + lines(1)[1:]))
    assert 'realtime_minus_monotonic_ns' in check(f).stderr


def test_rejects_invalid_utf8_and_bom(write):
    text = synth.trace_text(lines(1)).encode()
    bad = text.replace(b'"forward"', b'"for\xffward"')
    assert bad != text
    p = check(write('bad.json', bad))
    assert p.returncode == 1 and 'UTF-8' in p.stderr
    surrogate = text.replace(b'"forward"', b'"for\xed\xa0\x80ward"')   # CESU-style surrogate
    assert check(write('bad2.json', surrogate)).returncode == 1
    assert check(write('bom.json', b'\xef\xbb\xbf' + text)).returncode == 1


def test_unterminated_only_with_the_flag(write):
    text = synth.trace_text(lines(2), terminated=False)
    f = write('killed.json', text)
    p = check(f)
    assert p.returncode == 1 and 'closing' in p.stderr
    assert check(f, '--allow-unterminated').returncode == 0
    assert len(trace_check.check_trace(f, allow_unterminated=True)) > 10
    # a half-written last event is not what prof leaves: rejected even so
    assert check(write('cut.json', text[:-30]), '--allow-unterminated').returncode == 1
    # killed before the first event
    assert check(write('empty.json', '['), '--allow-unterminated').returncode == 0


def test_cut_gzip_drops_only_its_last_event(write):
    """A kill inside the write of a compressed batch cuts that batch's last
    event (docs/TRACE.md): with the flag, the events before it are read;
    a plain file cut the same way is still rejected (padding keeps its
    events whole)."""
    import zlib
    text = synth.trace_text(lines(2), terminated=False).encode()
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    whole = c.compress(text) + c.flush(zlib.Z_SYNC_FLUSH)
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    cut = c.compress(text[:-30]) + c.flush(zlib.Z_SYNC_FLUSH)
    n_whole = len(trace_check.check_trace(write('whole.json.gz', whole), allow_unterminated=True))
    f = write('cut.json.gz', cut)
    assert check(f).returncode == 1
    assert check(f, '--allow-unterminated').returncode == 0
    assert len(trace_check.check_trace(f, allow_unterminated=True)) == n_whole - 1
    assert check(write('cut.json', text[:-30]), '--allow-unterminated').returncode == 1


def test_expectations(write):
    f = write('t.json', synth.trace_text(lines(2)))
    p = check(f, '--expect-stage', 'nope')
    assert p.returncode == 1 and 'nope' in p.stderr
    p = check(f, '--min-events', '1000')
    assert p.returncode == 1 and '1000' in p.stderr
    assert check('/nonexistent.json').returncode == 1
    assert check(write('obj.json', '{"traceEvents": []}')).returncode == 1


# check_trace_stream / iter_events: the same verdicts reading the file a
# piece at a time (pieces of 7 bytes here, so that events, strings, numbers
# and UTF-8 sequences are cut at every place).

@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(trace_check, '_CHUNK', 7)


def test_stream_accepts_what_check_trace_accepts(write, small_chunks):
    f = write('t.json', synth.trace_text(lines()))
    events = trace_check.check_trace(f)
    assert list(trace_check.iter_events(f)) == events
    st = trace_check.check_trace_stream(f, expect_stages=['forward'], min_events=18)
    assert st.events == len(events) and st.x_events == 18
    assert st.pids == {e['pid'] for e in events}
    base = lines(1)[:1]
    ok = [x('p', 10.0, 5.0), x('c', 10.0, 5.001, depth=1), x('s', 15.0, 1.0),
          x('z', 16.0, 0.0), x('\ud83d\ude00 \\u00e9', 17.0, 1.0)]
    trace_check.check_trace_stream(write('t2.json', synth.trace_text(base + ok)))
    assert trace_check.check_trace_stream(write('e.json', '[\n]\n')).events == 0


@pytest.mark.parametrize('what', list(BAD))
def test_stream_rejects(write, small_chunks, what):
    f = write('bad.json', synth.trace_text(lines(1)[:1] + BAD[what]))
    with pytest.raises(trace_check.TraceError):
        trace_check.check_trace_stream(f)


def test_stream_rejects_encoding_and_form(write, small_chunks):
    text = synth.trace_text(lines(1)).encode()
    for bad in (text.replace(b'"forward"', b'"for\xffward"'),
                text.replace(b'"forward"', b'"for\xed\xa0\x80ward"'),
                b'\xef\xbb\xbf' + text, b'{"traceEvents": []}', text + b'x'):
        with pytest.raises(trace_check.TraceError):
            trace_check.check_trace_stream(write('bad.json', bad))


def test_stream_unterminated_and_cut_gzip(write, small_chunks):
    import zlib
    text = synth.trace_text(lines(2), terminated=False)
    f = write('killed.json', text)
    with pytest.raises(trace_check.TraceError, match='closing'):
        trace_check.check_trace_stream(f)
    n = trace_check.check_trace_stream(f, allow_unterminated=True).events
    assert n == len(trace_check.check_trace(f, allow_unterminated=True))
    with pytest.raises(trace_check.TraceError):
        trace_check.check_trace_stream(write('cut.json', text[:-30]), allow_unterminated=True)
    assert trace_check.check_trace_stream(write('empty.json', '['), allow_unterminated=True).events == 0
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    cut = c.compress(text.encode()[:-30]) + c.flush(zlib.Z_SYNC_FLUSH)
    g = write('cut.json.gz', cut)
    with pytest.raises(trace_check.TraceError):
        trace_check.check_trace_stream(g)
    assert trace_check.check_trace_stream(g, allow_unterminated=True).events == n - 1
