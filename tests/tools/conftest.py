"""Shared fixtures of the tools' tests: where the scripts are, and running them.

Under meson the paths come from the environment (tests/tools/meson.build);
run directly (pytest-3 tests/tools) they default to the source tree."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, 'tests')]   # synth, trace_check

SCRIPTS = {name: os.environ.get('PROF_' + name.upper(), os.path.join(ROOT, 'tools', 'prof-' + name))
           for name in ('merge', 'diff', 'report')}


def run_tool(name, *args, check=None):
    """Run tools/prof-<name> with python3 -> CompletedProcess (text)."""
    p = subprocess.run([sys.executable, SCRIPTS[name], *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    if check is not None:
        assert p.returncode == check, f'exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}'
    return p


@pytest.fixture
def tool():
    return run_tool


@pytest.fixture
def write(tmp_path):
    """write('name', text_or_bytes) -> path in a per-test directory."""
    def _write(name, content):
        p = tmp_path / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding='utf-8')
        return str(p)
    return _write
