"""Traces are read as a stream (issue 21): a tool's memory follows what it
keeps (20 bytes a zone, the per-stage histograms), not the file's size. The
bound is relative: the tool's peak RSS over a small trace's, against the
size of a ~200 MB trace (the whole-file json.loads grew by 1,565 MB for a
190 MB trace; this reader by about 50 MB)."""

import gzip
import os
import subprocess
import sys

import synth
from conftest import SCRIPTS


def big_trace(path, target):
    """A trace of about target bytes: one simulated run's zones, repeated on
    one thread after another (a string copy per block, so it is quick)."""
    zones = synth.simulate(5, steps=1000)
    lines = synth.trace_events(zones, pid=4242)
    meta = [l for l in lines if '"M"' in l[:60]]
    body = '\n,'.join(l for l in lines if '"M"' not in l[:60])
    size, tid = 0, 1000
    with open(path, 'w') as f:
        f.write('[' + '\n,'.join(meta))
        while size < target:
            block = '\n,' + body.replace('"tid":1000,', f'"tid":{tid},')
            f.write(block)
            size += len(block)
            tid += 1
        f.write('\n]\n')
    return tid - 1000, sum(1 for z in zones)


def peak_rss(*args):
    """(exit status, peak RSS in bytes) of a tool run in a fresh process, so
    that no other child's peak is counted."""
    code = ('import resource, subprocess, sys\n'
            'p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n'
            'sys.stderr.buffer.write(p.stderr[-2000:])\n'
            'print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n')
    p = subprocess.run([sys.executable, '-c', code, sys.executable, *map(str, args)],
                       capture_output=True, text=True, timeout=300)
    rc, kb = p.stdout.split()
    return int(rc), int(kb) * 1024, p.stderr


def test_report_memory_does_not_follow_the_trace_size(tmp_path):
    small, big = tmp_path / 'small.json', tmp_path / 'big.json'
    big_trace(small, 1_000_000)
    threads, zones = big_trace(big, 200_000_000)
    size = os.path.getsize(big)
    try:
        rc0, base, err0 = peak_rss(SCRIPTS['report'], small)
        rc1, peak, err1 = peak_rss(SCRIPTS['report'], big, '--folded', tmp_path / 'f.folded')
    finally:
        os.unlink(big)
    assert rc0 == 0 and rc1 == 0, err0 + err1
    growth = peak - base
    # What stays is about 20 bytes a zone of ~110 bytes of JSON: ~0.2 of the
    # file; the whole file as Python objects was several times its size.
    assert growth < 0.5 * size, f'peak RSS grew {growth >> 20} MB for a {size >> 20} MB trace'
    # and it read it all: every thread's zones in the folded stacks
    folded = open(tmp_path / 'f.folded').read()
    total = sum(int(l.rsplit(' ', 1)[1]) for l in folded.splitlines())
    one = sum(z.self_ns for z in synth.simulate(5, steps=1000))
    assert total == threads * one


def test_gzip_and_cut_traces_stream(tool, write, tmp_path):
    """The same reader for .json.gz, several gzip members, and a cut file
    (no ']', a half-written last event)."""
    zones = synth.simulate(2, steps=50)
    text = synth.trace(zones)
    ref = tool('report', write('t.json', text), check=0).stdout.split('\n', 1)[1]
    g = tmp_path / 't.json.gz'
    half = len(text) // 2
    cut = text.index('\n,', half)
    g.write_bytes(gzip.compress(text[:cut].encode()) + gzip.compress(text[cut:].encode()))
    assert tool('report', g, check=0).stdout.split('\n', 1)[1] == ref
    lines = text.rstrip().rstrip(']').rstrip().split('\n')
    p = tool('report', write('cut.json', '\n'.join(lines[:-1]) + '\n' + lines[-1][:20]), check=0)
    assert 'half-written' in p.stderr
    p = tool('report', write('noend.json', '\n'.join(lines) + '\n'), check=0)
    assert p.stdout.split('\n', 1)[1] == ref
