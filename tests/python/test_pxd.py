"""prof.pxd declares what prof.h has: Cython code that reads any field of
any struct the .pxd declares compiles against the real header.

The test reads the .pxd itself, so a field added there is covered at once:
for every `ctypedef struct` it writes a .pyx that takes the address of each
declared field, has Cython translate it, and compiles the C with the
header (a field that prof.h lacks, or that has another type, fails the
compile).
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

from conftest import SOURCE_ROOT

PXD = os.path.join(SOURCE_ROOT, "python", "prof", "prof.pxd")
CYTHON = shutil.which("cython3") or shutil.which("cython")


def declared_structs(text):
    """{struct: [(ctype, field), ...]} of the .pxd's ctypedef structs."""
    structs, cur, indent = {}, None, None
    for line in text.splitlines():
        m = re.match(r"^(\s*)ctypedef struct (\w+):\s*$", line)
        if m:
            cur, indent = m.group(2), None
            structs[cur] = []
            continue
        if cur is None:
            continue
        if not line.strip() or line.strip().startswith("#"):
            continue
        lead = len(line) - len(line.lstrip())
        if indent is None:
            indent = lead
        if lead < indent:
            cur = None
            continue
        m = re.match(r"^\s*(.+?)\s*\*?\s*(\w+)(\[\d+\])?\s*$", line)
        assert m, line
        ctype = line.strip()[:-len(m.group(2) + (m.group(3) or ""))].strip()
        structs[cur].append((ctype, m.group(2)))
    return structs


def test_pxd_parser_sees_the_zone():
    with open(PXD) as f:
        structs = declared_structs(f.read())
    assert [f for _, f in structs["prof_zone"]] == ["start", "name", "parent", "depth", "gen",
                                                     "thread"]


@pytest.mark.skipif(CYTHON is None, reason="Cython is not installed (Debian: cython3)")
def test_every_declared_field_compiles(tmp_path):
    with open(PXD) as f:
        structs = declared_structs(f.read())
    lines = ["# cython: language_level=3", "cimport prof", "", "cdef void touch_all():",
             "    cdef const void *p"]
    for k, (name, fields) in enumerate(sorted(structs.items())):
        assert fields, name
        lines.append(f"    cdef prof.{name} v{k}")
        for _, field in fields:
            lines.append(f"    p = <const void *>&v{k}.{field}")
    lines += ["", "touch_all()", ""]
    pyx = tmp_path / "fields.pyx"
    pyx.write_text("\n".join(lines))
    out = tmp_path / "fields.c"
    r = subprocess.run([CYTHON, "-3", "-I", os.path.join(SOURCE_ROOT, "python"), "-o",
                        str(out), str(pyx)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    cc = shutil.which("cc") or shutil.which("gcc")
    r = subprocess.run([cc, "-fsyntax-only", "-Werror=incompatible-pointer-types",
                        "-I", os.path.join(SOURCE_ROOT, "include"),
                        "-I", sysconfig.get_paths()["include"], str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
