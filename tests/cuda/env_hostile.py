"""Every variable docs/CONFIG.md lists, set to a 4,000-byte hostile value
(non-UTF-8 bytes, control characters, printf conversions), one at a time,
over a small instrumented program (hostile_env.c) that runs CPU zones and a
CUDA zone on the fake driver, with kernels mode, NVML, a .gz trace and a
.prom metrics file switched on, so every library and path variable is read.

What the user must see, for each variable: the program runs to its end and
its summary is printed; every line prof prints on stderr that the run
without the variable did not print is short (at most 320 characters: three quoted items of 60 and the words),
printable ASCII, and names the variable (NAME=); the value shows cut to at
most 60 characters between quotes.

The variables are read from the doc, so a variable added there is covered
without touching this test.

    env_hostile.py HOSTILE_ENV FAKECUDA FAKECUPTI FAKENVML CONFIG_MD
"""
import os
import re
import subprocess
import sys
import tempfile

LINE_MAX = 320
VALUE_MAX = 60


def doc_variables(path):
    """The variables of CONFIG.md: the first cell of each row of the table
    under "| variable |", and the rank variables `%r` reads."""
    text = open(path, encoding='utf-8').read()
    names = []
    in_table = False
    for line in text.splitlines():
        if line.startswith('| variable |'):
            in_table = True
            continue
        if in_table:
            if not line.startswith('|'):
                in_table = False
                continue
            cell = line.split('|')[1]
            names += re.findall(r'`([A-Z][A-Z0-9_]*)`', cell)
    m = re.search(r'`%r` is the first of (.*?)\s+that holds', text, re.S)
    if m:
        names += re.findall(r'`([A-Z][A-Z0-9_]*)`', m.group(1))
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def hostile_value():
    """4,000 bytes: a marker at both ends (a cut value keeps head and tail),
    bytes that are not UTF-8, ANSI escapes, bell, newline, printf
    conversions, a path separator, quotes and backslashes."""
    piece = (b'\xff\xfe\xc3(\xe2\x82\x1b[31m%n%s%p%r%%\x07\x01\t\n"\\/..'
             b'\xf0\x9f\x98\x80\x7f%.999999d')
    head, tail = b'hostile-head', b'hostile-tail'
    body = (piece * (4000 // len(piece) + 1))[:4000 - len(head) - len(tail)]
    v = head + body + tail
    assert len(v) == 4000 and b'\0' not in v
    return v


def run(exe, fakecuda, env):
    p = subprocess.run([exe, fakecuda], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout, p.stderr


def normal(line):
    """A line with its numbers blanked: pids and times differ run to run."""
    return re.sub(rb'[0-9]+', b'N', line)


def main():
    exe, fakecuda, fakecupti, fakenvml, config_md = sys.argv[1:6]
    names = doc_variables(config_md)
    if len(names) < 20:
        sys.exit(f'FAIL: only {len(names)} variables read from {config_md}: {names}')
    print(f'{len(names)} variables: {" ".join(names)}')
    value = hostile_value()
    failures = []
    with tempfile.TemporaryDirectory(prefix='prof-hostile-') as tmp:
        base = {k.encode(): v.encode() for k, v in os.environ.items()
                if not k.startswith('PROF') and k not in
                ('RANK', 'LOCAL_RANK', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK')}
        base.update({
            b'PROF': b'1',
            b'PROF_CUDA': b'kernels',
            b'PROF_CUDA_LIB': fakecuda.encode(),
            b'PROF_CUPTI_LIB': fakecupti.encode(),
            b'PROF_NVML_LIB': fakenvml.encode(),
            b'PROF_TRACE': os.path.join(tmp, 'trace-%p.json.gz').encode(),
            b'PROF_METRICS': os.path.join(tmp, 'metrics-%p.prom').encode(),
            b'PROF_LIVE': b'0',
            # Step windows, so that prof_ranks_start reads PROF_RANKS_TIMEOUT
            # (no window closes in the program's 5 steps).
            b'PROF_SUMMARY_EVERY': b'1000steps',
        })
        rc, out, err = run(exe, fakecuda, base)
        if rc != 0 or b'ran=1' not in out or b'prof summary: ' not in err:
            sys.exit(f'FAIL: the run without a hostile value: rc {rc}\n{err.decode("utf-8", "replace")}')
        baseline = {normal(l) for l in err.splitlines() if l.startswith(b'prof: ')}

        for name in names:
            env = dict(base)
            env[name.encode()] = value
            rc, out, err = run(exe, fakecuda, env)
            what = f'{name}=<4000 hostile bytes>'
            if rc != 0 or b'ran=1' not in out:
                failures.append(f'{what}: the program did not run to its end (rc {rc})')
            if b'prof summary: ' not in err:
                failures.append(f'{what}: no summary on stderr')
            said = 0
            for raw in err.splitlines():
                if not raw.startswith(b'prof: ') or normal(raw) in baseline:
                    continue
                said += 1
                line = raw.decode('ascii', 'replace')
                if len(raw) > LINE_MAX:
                    failures.append(f'{what}: a line of {len(raw)} characters: {line[:200]}...')
                if any(c < 0x20 or c >= 0x7f for c in raw):
                    failures.append(f'{what}: raw bytes in {raw[:200]!r}')
                if name + '=' not in line and name + ':' not in line:
                    failures.append(f'{what}: a line that does not name {name}: {line[:300]}')
                for m in re.finditer(re.escape(name) + r'="((?:[^"\\]|\\.)*)"', line):
                    if len(m.group(1)) > VALUE_MAX:
                        failures.append(f'{what}: the value shown in {len(m.group(1))} '
                                        f'characters: {line[:300]}')
            print(f'{name}: rc {rc}, {said} line(s)')
            for raw in err.splitlines():
                if raw.startswith(b'prof: ') and normal(raw) not in baseline:
                    print('   ', raw.decode('ascii', 'replace')[:300])
    if failures:
        print('\n'.join('FAIL: ' + f for f in failures), file=sys.stderr)
        sys.exit(1)
    print('ok')


main()
