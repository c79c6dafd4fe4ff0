#!/usr/bin/env python3
"""Run one libFuzzer target for a bounded time on a copy of its corpus.

    run_fuzzer.py FUZZER CORPUS_DIR CRASH_DIR [--seconds S] [--runs N] [--max-len L]

The committed corpus is copied to a temporary directory, which is the only
directory libFuzzer writes to, so the repository is never modified. A crash,
leak, timeout or failed check is saved under CRASH_DIR (in the build
directory) and printed with the command that reproduces it; commit it to
CORPUS_DIR as a regression input once the bug is fixed (the replay tests run
every corpus file in every build). PROF_FUZZ_SECONDS overrides --seconds for
longer local runs.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('fuzzer')
    ap.add_argument('corpus')
    ap.add_argument('crash_dir')
    ap.add_argument('--seconds', type=int, default=20)
    ap.add_argument('--runs', type=int, default=5000000)
    ap.add_argument('--max-len', type=int, default=4096)
    a = ap.parse_args()
    seconds = int(os.environ.get('PROF_FUZZ_SECONDS', a.seconds))
    name = os.path.basename(a.fuzzer)
    os.makedirs(a.crash_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f'{name}-') as tmp:
        corpus = os.path.join(tmp, 'corpus')
        artifacts = os.path.join(tmp, 'artifacts')
        shutil.copytree(a.corpus, corpus)
        os.mkdir(artifacts)
        n0 = len(os.listdir(corpus))
        cmd = [a.fuzzer, f'-max_total_time={seconds}', f'-runs={a.runs}',
               f'-max_len={a.max_len}', '-timeout=10', '-rss_limit_mb=2048',
               '-print_final_stats=1', f'-artifact_prefix={artifacts}/', corpus]
        print(' '.join(cmd), flush=True)
        try:
            rc = subprocess.run(cmd, timeout=seconds + 120).returncode
        except subprocess.TimeoutExpired:
            print(f'{name}: did not stop within {seconds + 120} s', flush=True)
            rc = 1
        found = sorted(os.listdir(artifacts))
        for f in found:
            dst = os.path.join(a.crash_dir, f'{name}-{f}')
            shutil.copy(os.path.join(artifacts, f), dst)
            data = open(dst, 'rb').read()
            print(f'{name}: failing input saved as {dst} ({len(data)} bytes): {data[:200]!r}')
            print(f'  reproduce: {a.fuzzer} {dst}')
            print(f'  then add it to {a.corpus}/ as a regression input')
        print(f'{name}: corpus {n0} -> {len(os.listdir(corpus))} inputs in {seconds} s, '
              f'exit {rc}', flush=True)
        return 1 if rc != 0 or found else 0


if __name__ == '__main__':
    sys.exit(main())
