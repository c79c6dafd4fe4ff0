"""What a newcomer saw and should not (issue 19): the runtime's final table
printed again after the program printed its own summary, and a Python
process called "python3" instead of its script."""
import json
import os
import re
import subprocess
import sys
import textwrap

from conftest import child_env

HEADER = re.compile(r"^prof summary: (\S+) \(pid \d+\), (final|now|step \d+)", re.M)

SCRIPT = """
    import sys
    import prof
    how = sys.argv[1]
    p = prof.ProfilingContext(enabled=True)
    for i in range(4):
        with p.track("fwd"):
            pass
        p.step()
        if how == "mid" and i == 1:
            print(p.summary())
    if how == "end":
        print(p.summary())
    if how == "module":
        print(prof.summary(format="json"))
    if how == "end_then_step":
        print(prof.summary())
        prof.step()
"""


def run(args, cwd, **env):
    e = child_env(**env)
    e.pop("PROF_SUMMARY", None)     # the default a user has: stderr
    for k, v in env.items():
        if v is not None:
            e[k] = str(v)
    return subprocess.run([sys.executable, *args], env=e, cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=True)


def headers(text):
    return [m.group(2) for m in HEADER.finditer(text)]


def test_summary_printed_by_the_program_is_not_repeated_at_exit(tmp_path):
    script = tmp_path / "ctx_train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    # The program's own table after its last step: no second one at exit.
    for how in ("end", "module"):
        r = run([str(script), how], tmp_path)
        assert headers(r.stderr) == [], (how, r.stderr)
    assert headers(run([str(script), "end"], tmp_path).stdout) == ["now"]
    # Steps after the program's last summary: the final table says more.
    r = run([str(script), "mid"], tmp_path)
    assert headers(r.stdout) == ["now"] and headers(r.stderr) == ["final"], r.stderr
    r = run([str(script), "end_then_step"], tmp_path)
    assert headers(r.stderr) == ["final"], r.stderr
    # No summary taken: the runtime's final table, as always.
    assert headers(run([str(script), "none"], tmp_path).stderr) == ["final"]
    # PROF_SUMMARY asked for it: it is written where it says.
    r = run([str(script), "end"], tmp_path, PROF_SUMMARY="stderr")
    assert headers(r.stderr) == ["final"], r.stderr
    # Periodic summaries are untouched.
    r = run([str(script), "end"], tmp_path, PROF_SUMMARY_EVERY="2steps")
    assert headers(r.stderr) == ["step 2", "step 4"], r.stderr


BODY = "import prof\nwith prof.zone('work'):\n    pass\n"


def process_names(trace):
    with open(trace) as f:
        events = json.load(f)
    return [e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "process_name"]


def test_python_process_is_named_after_its_script(tmp_path):
    (tmp_path / "my_train.py").write_text(BODY)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "runner.py").write_text(BODY)
    cases = [
        (["my_train.py"], "my_train.py"),
        ([str(tmp_path / "my_train.py")], "my_train.py"),
        (["-u", "-X", "utf8", "-W", "ignore", "my_train.py"], "my_train.py"),
        (["-m", "pkg.runner"], "pkg.runner"),
        (["-Wignore", "-mpkg.runner"], "pkg.runner"),
        (["-c", BODY], "python"),
    ]
    for i, (args, want) in enumerate(cases):
        trace = tmp_path / ("t%d.json" % i)
        r = run(args, tmp_path, PROF=1, PROF_TRACE=trace)
        assert [m.group(1) for m in HEADER.finditer(r.stderr)] == [want], (args, r.stderr)
        assert process_names(trace) == [want], args
