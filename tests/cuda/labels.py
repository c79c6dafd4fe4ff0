"""Names in the Prometheus text (PROF_METRICS) and the text summary, with
PROF_CUDA=kernels: test_cuda_kernels labels runs zones whose GPU stage
names put a 2-, 3- and 4-byte UTF-8 character across their 128th byte
(where a name cut into a fixed room would split it), and one with quotes,
a backslash, a newline, a control and an invalid byte; each runs a kernel
with a UTF-8 name.

What a scraper sees: the whole metrics text is valid UTF-8 (Prometheus
rejects a scrape with one bad byte) and valid exposition format, checked
line by line by the strict parser below and by `promtool check metrics`
where it is installed; no series twice; the kernels metrics label each GPU
stage as the other per-stage metrics do (its path), with the name whole.
The text summary is valid UTF-8 with no control byte but newlines.

    labels.py TEST_CUDA_KERNELS
"""
import os
import re
import shutil
import subprocess
import sys

METRIC = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*'
VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r'^(%s)(?:\{((?:%s=%s)(?:,%s=%s)*)?,?\})? (\S+)(?: (-?[0-9]+))?$'
                    % (METRIC, LABEL, VALUE, LABEL, VALUE))
PAIR = re.compile(r'(%s)=(%s)' % (LABEL, VALUE))
TYPES = ('counter', 'gauge', 'histogram', 'summary', 'untyped')


def fail(msg):
    print('FAIL: ' + msg, file=sys.stderr)
    sys.exit(1)


def number(v):
    if v in ('NaN', '+Inf', '-Inf', 'Inf'):
        return True
    try:
        float(v)
        return True
    except ValueError:
        return False


def check_exposition(raw):
    """The text exposition format, strictly; returns {metric: [labels dict]}."""
    try:
        text = raw.decode('utf-8', 'strict')
    except UnicodeDecodeError as e:
        fail(f'the metrics are not valid UTF-8: {e}: {raw[max(0, e.start - 60):e.end + 20]!r}')
    if not text.endswith('\n'):
        fail('the metrics do not end with a newline')
    families, series, samples = {}, set(), {}
    current = None
    for n, line in enumerate(text[:-1].split('\n'), 1):
        if line.startswith('#'):
            m = re.match(r'^# (HELP|TYPE) (%s) (.*)$' % METRIC, line)
            if m is None:
                if re.match(r'^# (HELP|TYPE)\b', line):
                    fail(f'line {n}: a malformed {line[:60]!r}')
                continue
            kind, name, rest = m.groups()
            if kind == 'TYPE':
                if rest not in TYPES:
                    fail(f'line {n}: type {rest!r}')
                if name in families:
                    fail(f'line {n}: a second TYPE for {name}')
                families[name] = rest
                current = name
            continue
        m = SAMPLE.match(line)
        if m is None:
            fail(f'line {n} is not a sample: {line[:200]!r}')
        name, labels, value = m.group(1), m.group(2) or '', m.group(3)
        if not number(value):
            fail(f'line {n}: value {value!r}')
        base = re.sub(r'_(sum|count|bucket)$', '', name)
        if current not in (name, base):
            fail(f'line {n}: {name} outside its family ({current})')
        pairs = PAIR.findall(labels)
        if ','.join(f'{k}={v}' for k, v in pairs) != labels.rstrip(','):
            fail(f'line {n}: labels {labels[:200]!r}')
        if len({k for k, _ in pairs}) != len(pairs):
            fail(f'line {n}: a label twice')
        key = (name, tuple(sorted(pairs)))
        if key in series:
            fail(f'line {n}: series {name}{{{labels[:100]}}} twice')
        series.add(key)
        samples.setdefault(name, []).append(dict(pairs))
    return samples


def section(out, name):
    m = re.search(rb'--- %s\n(.*?)--- end\n' % name.encode(), out, re.S)
    if m is None:
        fail(f'no {name} section in the output')
    return m.group(1)


def main():
    exe = sys.argv[1]
    # A file left by an earlier run would be read as this run's.
    prom = os.environ.get('PROF_METRICS', '')
    if not prom.endswith('.prom'):
        fail('PROF_METRICS is not set to a .prom file')
    if os.path.exists(prom):
        os.unlink(prom)
    p = subprocess.run([exe, 'labels'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    if p.returncode != 0:
        fail(f'test_cuda_kernels labels: rc {p.returncode}\n{p.stderr.decode("utf-8", "replace")}')
    metrics, text = section(p.stdout, 'metrics'), section(p.stdout, 'text')
    samples = check_exposition(metrics)

    stages = {d['stage'] for d in samples.get('prof_stage_count_total', [])}
    for metric in ('prof_gpu_stage_kernels_total', 'prof_gpu_stage_kernel_busy_seconds_total'):
        got = [d['stage'] for d in samples.get(metric, [])]
        if len(got) != 5:
            fail(f'{len(got)} {metric} samples, expected the 4 zones and (no zone): {got}')
        for s in got:
            if s not in stages:
                fail(f'{metric} labels a stage {s[:160]}... that no prof_stage_count_total '
                     'sample has (not its path)')
    # Each zone's GPU stage: its path, names whole.
    whole = [s for s in got if s.endswith(' [gpu]"') and '/' in s]
    if len(whole) != 4:
        fail(f'GPU stages labelled by path with their whole name: {len(whole)} of 4: {got}')

    promtool = shutil.which('promtool')
    if promtool:
        r = subprocess.run([promtool, 'check', 'metrics'], input=metrics,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            fail('promtool check metrics: ' + (r.stdout + r.stderr).decode('utf-8', 'replace'))
        print('promtool check metrics: ok')
    else:
        print('promtool is not installed: the strict checker alone judged the metrics')

    try:
        t = text.decode('utf-8', 'strict')
    except UnicodeDecodeError as e:
        fail(f'the text summary is not valid UTF-8: {e}: {text[max(0, e.start - 40):e.end + 20]!r}')
    bad = [c for c in t if (ord(c) < 0x20 and c != '\n') or 0x7f <= ord(c) < 0xa0]
    if bad:
        fail(f'control characters in the text summary: {bad[:5]}')
    for k in ('k\u00e9rnel', '\u540d\u524d', '\U0001f600_k'):
        if k not in t:
            fail(f'kernel {k} not in the text summary:\n{t}')
    print('ok')


if __name__ == '__main__':
    main()
