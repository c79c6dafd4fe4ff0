#!/usr/bin/env python3
"""Sweep an allocation failure over every allocation of a prof run.

    alloc_sweep.py ALLOC_FAIL_EXE TRACE_CHECK [--max-once K] [--max-from K] [--jobs J]
                   [--sample S [--offset O]]

First a clean run counts the allocation calls the runtime makes (K). Then,
for every N in 1..K (+ a margin, since threads interleave differently from
run to run), the program runs with call N failing (mode "once"); for every
third N, with every call from N on failing (mode "from": memory stays
exhausted); and once with the collector thread failing to start. Every run must: exit 0
(no crash, no abort), finish within the timeout (no deadlock), print at most
a few "prof: " lines and nothing else unexpected, leave a trace that is
valid JSON with its closing ']' (when the file is not empty) and a summary
file whose every line is a JSON object. The functions in which failures
were injected are listed at the end (addr2line), with how many runs failed
there.

--sample S tries only every S-th N of each mode, starting at the O-th
(--offset), for builds where the full sweep finds little that another
build's full sweep does not (tests/faults/meson.build: the full sweep runs
under AddressSanitizer). PROF_ALLOC_SWEEP_SAMPLE overrides --sample (1: the
full sweep anywhere).
"""

import argparse
import collections
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

TIMEOUT = 30


def run(exe, tmp, tag, extra):
    d = os.path.join(tmp, tag)
    os.mkdir(d)
    trace = os.path.join(d, 'trace.json')
    summary = os.path.join(d, 'summary.json')
    env = dict(os.environ)
    env.update({'PROF': '1', 'PROF_TRACE': trace, 'PROF_SUMMARY': summary,
                'PROF_SUMMARY_FORMAT': 'json', 'PROF_SUMMARY_EVERY': '50steps'})
    env.update(extra)
    try:
        p = subprocess.run([exe], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return {'tag': tag, 'problems': [f'no exit within {TIMEOUT} s (deadlock?)'], 'sites': [],
                'messages': [], 'total': None}
    return {'tag': tag, 'rc': p.returncode, 'stderr': p.stderr.decode(errors='replace'),
            'trace': trace, 'summary': summary, 'dir': d}


def judge(r, trace_check, max_messages):
    if 'problems' in r:
        return r
    if isinstance(max_messages, dict):
        max_messages = max_messages[r['tag'].split('-')[0]]
    problems, sites, messages, total = [], [], [], None
    if r['rc'] != 0:
        problems.append(f'exit status {r["rc"]}' + (' (killed by a signal)' if r['rc'] < 0 else ''))
    for line in r['stderr'].splitlines():
        if line.startswith('prof: '):
            messages.append(line)
        elif line.startswith('fault-site: '):
            sites.append(tuple(int(x, 16) for x in line.split()[1:3]))
        elif line.startswith('fault-total: '):
            total = int(line.split()[1])
        elif line.startswith('{"prof":"summary"'):
            # PROF_SUMMARY's path was lost (out of memory reading the
            # environment): summaries go to stderr, as documented for a
            # summary path that cannot be used.
            try:
                json.loads(line)
            except ValueError as e:
                problems.append(f'summary on stderr invalid: {e}')
        elif line.strip():
            problems.append(f'unexpected output: {line[:300]}')
    if len(messages) > max_messages:
        problems.append(f'{len(messages)} messages (at most {max_messages}): ' + ' | '.join(messages))
    if os.path.exists(r['trace']) and os.path.getsize(r['trace']) > 0:
        c = subprocess.run([sys.executable, trace_check, r['trace']], capture_output=True, text=True)
        if c.returncode != 0:
            problems.append(f'trace invalid: {c.stdout.strip()} {c.stderr.strip()}')
    elif os.path.exists(r['trace']) and not any('trace' in m for m in messages):
        problems.append('trace file left empty without a message')
    if os.path.exists(r['summary']):
        for i, line in enumerate(open(r['summary'], 'rb').read().split(b'\n')):
            if not line:
                continue
            try:
                obj = json.loads(line.decode('utf-8'))
                if obj.get('prof') != 'summary':
                    raise ValueError('not a summary')
            except (ValueError, UnicodeDecodeError) as e:
                problems.append(f'summary line {i + 1} invalid: {e}: {line[:120]!r}')
    return {'tag': r['tag'], 'problems': problems, 'sites': sites, 'messages': messages,
            'total': total, 'dir': r['dir']}


def symbolize(exe, sites):
    """{(addr, base)} -> {(addr, base): function name}"""
    with open(exe, 'rb') as f:
        f.seek(16)
        pie = int.from_bytes(f.read(2), 'little') == 3     # ET_DYN
    keys = sorted(sites)
    addrs = [hex(a - b if pie else a) for a, b in keys]
    try:
        out = subprocess.run(['addr2line', '-f', '-e', exe] + addrs, capture_output=True,
                             text=True, timeout=60).stdout.split('\n')
        names = out[0::2]
    except (OSError, subprocess.TimeoutExpired):
        names = addrs
    return {k: (names[i] if i < len(names) and names[i] not in ('', '??') else addrs[i])
            for i, k in enumerate(keys)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('exe')
    ap.add_argument('trace_check')
    ap.add_argument('--max-once', type=int, default=2,
                    help='messages allowed when one allocation fails')
    ap.add_argument('--max-from', type=int, default=5,
                    help='messages allowed when memory stays exhausted')
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--margin', type=int, default=10)
    ap.add_argument('--from-stride', type=int, default=3,
                    help='mode "from" tries every k-th N (it fails all later calls too)')
    ap.add_argument('--sample', type=int, default=1,
                    help='try every S-th N only (1: every N)')
    ap.add_argument('--offset', type=int, default=0,
                    help='with --sample: the first N tried is 1 + offset %% S')
    a = ap.parse_args()
    if os.environ.get('PROF_ALLOC_SWEEP_SAMPLE', ''):
        a.sample = int(os.environ['PROF_ALLOC_SWEEP_SAMPLE'])
    a.sample = max(a.sample, 1)
    first = 1 + a.offset % a.sample

    with tempfile.TemporaryDirectory(prefix='prof-alloc-') as tmp:
        base = judge(run(a.exe, tmp, 'clean', {}), a.trace_check, 0)
        if base['problems'] or base['total'] is None:
            print('clean run failed:', base['problems'])
            return 1
        total = base['total']
        print(f'clean run: {total} allocation calls by the runtime', flush=True)

        last = total + a.margin
        once_ns = range(first, last + 1, a.sample)
        from_ns = range(first, last + 1, a.from_stride * a.sample)
        jobs = [(f'once-{n}', {'PROF_FAULT_N': str(n), 'PROF_FAULT_MODE': 'once'})
                for n in once_ns]
        jobs += [(f'from-{n}', {'PROF_FAULT_N': str(n), 'PROF_FAULT_MODE': 'from'})
                 for n in from_ns]
        jobs.append(('thread', {'PROF_FAULT_THREAD': '1'}))
        results = []
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            limits = {'once': a.max_once, 'from': a.max_from, 'thread': a.max_once}
            futs = [pool.submit(lambda t=t, e=e: judge(run(a.exe, tmp, t, e), a.trace_check,
                                                        limits)) for t, e in jobs]
            for f in futs:
                results.append(f.result())

        failed = [r for r in results if r['problems']]
        all_sites = {s for r in results for s in r['sites']}
        names = symbolize(a.exe, all_sites) if all_sites else {}
        per_func = collections.Counter()
        for r in results:
            for fn in {names[s] for s in r['sites']}:
                per_func[fn] += 1
        msgs = collections.Counter()
        for r in results:
            for m in r['messages']:
                msgs[m.replace(r['dir'], '<dir>')[:100] if r.get('dir') else m[:100]] += 1
        sampled = f', every {a.sample}th N from {first}' if a.sample > 1 else ''
        print(f'{len(results)} runs ({len(once_ns)} x once, {len(from_ns)} x from, '
              f'1 x collector thread{sampled}), {len(failed)} failed')
        print('runs with a failure injected, by the function whose allocation failed:')
        for fn, n in sorted(per_func.items(), key=lambda x: -x[1]):
            print(f'  {n:5d}  {fn}')
        print('messages printed (runs):')
        for m, n in msgs.most_common(20):
            print(f'  {n:5d}  {m}')
        mx = max((len(r['messages']) for r in results), default=0)
        print(f'most messages in one run: {mx}')
        for r in failed[:30]:
            where = ', '.join(sorted({names[s] for s in r['sites']}))
            print(f'FAIL {r["tag"]} (failed in: {where or "-"}): ' + '; '.join(r['problems']))
        return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
