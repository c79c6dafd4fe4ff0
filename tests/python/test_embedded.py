"""Python zones on a C thread that enters Python through PyGILState_Ensure.

ctypes and pybind11 callbacks, and C libraries' own threads, run Python
code this way: each Ensure on a thread without a thread state makes a new
one, and its Release deletes it. The new state's context version starts
again from 1 and its context is often allocated where the last one was
freed, so a cache keyed on (context, version) alone matched the old
state's, and the first zone of a callback that had set a context variable
once used the freed stack: `RuntimeError: prof.zone('outer').__exit__()
without a matching __enter__()` raised in the user's code (9 of 2,000
callbacks), or worse. The embedder below is compiled with the C compiler
against the running interpreter.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from conftest import child_env

CALLBACKS = 2000

EMBEDDER = r"""
#include <Python.h>
#include <pthread.h>

static const char *code;

/* A C library's thread calling back into Python: a fresh thread state
 * per call. */
static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < %d; i++) {
        PyGILState_STATE g = PyGILState_Ensure();
        if (PyRun_SimpleString(code) != 0)
            _exit(3);
        PyGILState_Release(g);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t;

    if (argc != 3)
        return 2;
    Py_Initialize();
    if (PyRun_SimpleString(argv[1]) != 0)
        return 4;
    code = argv[2];
    PyThreadState *s = PyEval_SaveThread();
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    PyEval_RestoreThread(s);
    return Py_FinalizeEx() < 0 ? 5 : 0;
}
""" % CALLBACKS

SETUP = """
import contextvars, prof
cv = contextvars.ContextVar('cv')

@prof.zone('deco')
def deco():
    pass
"""

# One context variable set before the zones: the callback's context version
# is then the one the last callback's zone left cached.
CALLBACK = """
cv.set(1)
with prof.zone('outer'):
    with prof.zone('inner'):
        deco()
"""


def build_embedder(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    include = sysconfig.get_paths().get("include")
    libdir = sysconfig.get_config_var("LIBDIR")
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    if cc is None or include is None or not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip("no C compiler or no Python.h for this interpreter (Debian: python3-dev)")
    if not ldlib.endswith(".so") or not os.path.exists(os.path.join(libdir or "", ldlib)):
        pytest.skip(f"this interpreter has no shared libpython to embed ({ldlib!r})")
    src = tmp_path / "embed.c"
    exe = tmp_path / "embed"
    src.write_text(EMBEDDER)
    lib = ldlib[3:-3]                                  # libpython3.11.so -> python3.11
    r = subprocess.run([cc, "-o", str(exe), str(src), "-I", include, "-L", libdir,
                        f"-Wl,-rpath,{libdir}", f"-l{lib}", "-lpthread"],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"cannot build the embedder:\n{r.stderr}"
    return exe


def test_callbacks_from_a_c_thread(tmp_path):
    exe = build_embedder(tmp_path)
    out = tmp_path / "summary.json"
    env = child_env(PROF=1, PROF_SUMMARY=str(out), PROF_SUMMARY_FORMAT="json")
    # The embedded interpreter finds prof where this one did.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run([str(exe), SETUP, CALLBACK], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "Error" not in r.stderr, \
        f"embedder exited {r.returncode}\n--- stderr\n{r.stderr[-3000:]}"
    final = [json.loads(l) for l in out.read_text().splitlines()][-1]
    assert final["kind"] == "final"
    stages = {s["name"]: s for s in final["total"]["stages"]}
    assert set(stages) == {"outer", "inner", "deco"}, sorted(stages)
    for name, parent in (("outer", None), ("inner", "outer"), ("deco", "inner")):
        assert stages[name]["count"] == CALLBACKS, (name, stages[name]["count"])
        assert stages[name]["parent"] == parent, (name, stages[name]["parent"])
    assert final["dropped"] == 0
