#!/usr/bin/env python3
"""A plugin that links libprof, loaded and unloaded by a host that does not
(tests/plugin/host.c), and two copies of the runtime in one process.

    plugin_check.py HOST HOST_LINKED PLUGIN_SHARED PLUGIN_STATIC

For each plugin (linking the shared libprof, or carrying libprof_static) and
each ending (return, a thread that recorded zones exiting after the
dlclose, SIGTERM after the dlclose): no crash, the end the program asked for
(exit 0, or death by SIGTERM), and exactly one final summary on stderr whose
"plugin outer" / "plugin inner" rows have every zone, by their names: the
plugin called prof_flush() before it was unloaded, which is all it must do.
The shared-linked plugin is really unmapped by the dlclose (its names are
gone from memory); the static one carries the runtime and stays.

A host that links the shared libprof and loads the static plugin has two
runtimes: one message says so, naming both objects; with the shared plugin
there is one runtime and no message, also after an exec that keeps the pid.
"""
import json
import os
import signal
import subprocess
import sys

N = 1000


def fail(msg):
    print(f'FAIL: {msg}')
    sys.exit(1)


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith('PROF')}
    e.update({'PROF': '1', 'PROF_SUMMARY_FORMAT': 'json'})
    e.update(extra)
    return e


def run(host, plugin, mode):
    try:
        p = subprocess.run([host, plugin, mode, str(N)], env=env(), capture_output=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        fail(f'{mode} {os.path.basename(plugin)}: no exit within 60 s')
    out = p.stdout.decode(errors='replace')
    err = p.stderr.decode(errors='replace')
    summaries, messages, other = [], [], []
    for line in err.splitlines():
        if line.startswith('{"prof":"summary"'):
            summaries.append(json.loads(line))
        elif line.startswith('prof: '):
            messages.append(line)
        elif line.strip():
            other.append(line)
    return p.returncode, out, summaries, messages, other, err


def count(summary, name):
    return {s['name']: s['count'] for s in summary['total']['stages']}.get(name)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    host, host_linked, shared, static = sys.argv[1:5]

    for plugin, pinned in ((shared, False), (static, True)):
        for mode in ('exit', 'thread-exit', 'sigterm'):
            what = f'{mode}, {os.path.basename(plugin)}'
            rc, out, summaries, messages, other, err = run(host, plugin, mode)
            want = -signal.SIGTERM if mode == 'sigterm' else 0
            if rc != want:
                how = f'killed by signal {-rc}' if rc < 0 else f'exit status {rc}'
                fail(f'{what}: {how}, want {want}\n{err[-2000:]}')
            if 'done' not in out:
                fail(f'{what}: the host did not get past the dlclose\n{out}')
            if f'unloaded={int(not pinned)}' not in out:
                fail(f'{what}: want unloaded={int(not pinned)} after dlclose: {out!r}')
            if messages or other:
                fail(f'{what}: unexpected output {messages + other}')
            finals = [s for s in summaries if s['kind'] == 'final']
            if len(finals) != 1 or len(summaries) != 1:
                fail(f'{what}: {len(summaries)} summaries, {len(finals)} final; want one final')
            for name in ('plugin outer', 'plugin inner'):
                if count(finals[0], name) != N:
                    rows = [(s['name'], s['count']) for s in finals[0]['total']['stages']]
                    fail(f'{what}: "{name}" count {count(finals[0], name)}, want {N}: {rows}')
            print(f'ok  {what}: {N} zones by name in the final summary', flush=True)

    # Two copies: the host's libprof.so and the plugin's libprof_static.
    rc, out, summaries, messages, other, err = run(host_linked, static, 'exit')
    if rc != 0 or other:
        fail(f'two copies: exit status {rc}, output {other}\n{err[-2000:]}')
    copies = [m for m in messages if 'two copies' in m]
    if len(messages) != 1 or len(copies) != 1:
        fail(f'two copies: want one message about two copies, got {messages}')
    if 'libprof.so' not in copies[0] or os.path.basename(static) not in copies[0]:
        fail(f'two copies: the message does not name both objects: {copies[0]}')
    if len(summaries) != 2:
        fail(f'two copies: {len(summaries)} summaries, want one per runtime')
    print(f'ok  two copies: {copies[0]}', flush=True)

    # One copy: the plugin uses the host's libprof.so.
    rc, out, summaries, messages, other, err = run(host_linked, shared, 'exit')
    if rc != 0 or other or messages:
        fail(f'one copy: exit status {rc}, output {messages + other}\n{err[-2000:]}')
    if len(summaries) != 1 or count(summaries[0], 'host zone') != 1 or \
            count(summaries[0], 'plugin outer') != N:
        fail(f'one copy: want one summary with the host\'s and the plugin\'s zones: {summaries}')
    print('ok  one copy: one summary, no message', flush=True)

    # The host execs itself after its runtime started: same pid, new image,
    # one runtime in it; what the old image left in the environment is not
    # a second copy.
    rc, out, summaries, messages, other, err = run(host_linked, shared, 'reexec')
    if rc != 0 or other or messages:
        fail(f'exec keeping the pid: exit status {rc}, output {messages + other}\n{err[-2000:]}')
    if len(summaries) != 1 or count(summaries[0], 'plugin outer') != N:
        fail(f'exec keeping the pid: want the new image\'s summary: {summaries}')
    print('ok  exec keeping the pid: no message')
    return 0


if __name__ == '__main__':
    sys.exit(main())
