"""python -m prof [options] script.py [args...]   (or -m module [args...])

Runs a Python program with prof on, as ``python script.py args...`` would
(``sys.argv``, ``__main__``, ``sys.path[0]``, the exit status), and zones a
PyTorch training loop by itself when the program imports torch: the
DataLoader wait, module forwards to a depth, backward, optimizer steps,
each first-optimizer step a ``prof.step()`` (docs/TORCH.md).

Each option is the environment variable named beside it; the runtime reads
those once, when the library loads, which has already happened when this
module runs (it is inside the ``prof`` package). So when the options ask
for a setting the environment does not have yet, this sets it and execs the
interpreter again with the same command, options removed; the program then
starts once, in that second process.
"""

import argparse
import os
import sys

# option -> environment variable
_OPTIONS = [
    ("--depth", "PROF_TORCH_DEPTH", "N",
     "module levels timed in forward: 1 the model, 2 (default) also its direct children, ..."),
    ("--trace", "PROF_TRACE", "PATH",
     "write a Chrome trace (%%p pid, %%r rank; .gz compresses)"),
    ("--every", "PROF_SUMMARY_EVERY", "WHEN",
     "a summary every N steps (100steps) or every T (10s), as well as at the end"),
    ("--summary", "PROF_SUMMARY", "WHERE",
     "where summaries go: stderr (default), stdout, a file, logging, off"),
    ("--format", "PROF_SUMMARY_FORMAT", "FMT", "text (default) or json"),
    ("--metrics", "PROF_METRICS", "ADDR",
     "Prometheus metrics at HOST:PORT/metrics, or written to PATH.prom"),
    ("--skip-steps", "PROF_SKIP_STEPS", "N", "leave the first N steps out of the statistics"),
]


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m prof",
        usage="python -m prof [options] script.py [args...]\n"
              "       python -m prof [options] -m module [args...]",
        description="Run a Python program with prof on. When it imports torch, the DataLoader "
                    "wait (data), each model's forward (named as the script names it: model, "
                    "or 'model (eval)' without grad or in eval mode) and its modules, "
                    "backward and optimizer steps are zones with no code change, and each "
                    "step() of the first optimizer (each backward where there is none) is a "
                    "prof.step(). Each option sets the environment "
                    "variable named in brackets; setting that variable instead does the "
                    "same, and PROF_TORCH=1 with `import prof` in the program zones torch "
                    "without this command.",
        epilog="The final summary goes to stderr when the program ends, also by sys.exit or "
               "an exception (whose exit status is kept). docs/TORCH.md has the details.",
        allow_abbrev=False)
    for opt, var, meta, text in _OPTIONS:
        p.add_argument(opt, dest=var, metavar=meta, help=f"{text} [{var}]")
    p.add_argument("--no-torch", action="store_true",
                   help="do not zone torch by itself, only run the program with prof on "
                        "[PROF_TORCH=0]")
    p.add_argument("-m", dest="module", action="store_true",
                   help="run a library module as a script, like python -m")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="script.py [args...]",
                   help=argparse.SUPPRESS)
    return p


def _reexec_argv(cmd, module):
    tail = (["-m"] if module else []) + cmd
    orig = getattr(sys, "orig_argv", None)
    n_ours = len(sys.argv) - 1
    if orig and len(orig) > n_ours and orig[len(orig) - n_ours:] == sys.argv[1:]:
        # The interpreter's own options (-u, -X dev, ...) and "-m prof".
        return orig[:len(orig) - n_ours] + tail
    return [sys.executable, "-m", "prof"] + tail


# ---------------------------------------------------------------------------
# Running the program as `python script.py` / `python -m module` would
#
# CPython runs a script file itself (pythonrun.c, not runpy): the code is
# compiled with its absolute name and executed in the namespace of
# sys.modules["__main__"], which stays the program's module to the end of
# the process (threads still running after the main code returns, atexit,
# pickling of the program's functions by a Pool all look it up there). A
# directory or zip file, and -m, go through runpy._run_module_as_main,
# which runs in that same namespace. So prof puts a fresh module where the
# interpreter's own __main__ was (prof's, until now) and never puts its own
# back, then does what the interpreter does.

_HERE = __file__

# The program's module code runs from this one-line frame, named as CPython
# names the place above the top of the stack: a warning whose stacklevel
# points above the program's first frame reads "sys:1: ...", as it does
# under plain python, not a line of prof or of runpy.
_TRAMPOLINE = compile("exec(code, namespace)", "sys", "exec")


def _main_module():
    """A module like the interpreter's own __main__ before a program runs
    in it (pylifecycle.c: add_main_module), installed in its place."""
    import builtins
    import importlib.machinery
    import types

    m = types.ModuleType("__main__")
    m.__annotations__ = {}
    m.__builtins__ = builtins
    m.__loader__ = importlib.machinery.BuiltinImporter
    sys.modules["__main__"] = m
    return m


def _program_name():
    """The interpreter as its user started it ("python3", "/usr/bin/python3"):
    the name CPython's own messages begin with."""
    orig = getattr(sys, "orig_argv", None)
    return orig[0] if orig else sys.executable


def _path_importer(path):
    """What CPython's pymain_get_importer asks of a command-line path: an
    importer for a directory or a zip file (run as its __main__ module),
    None for a file to run as a script."""
    for hook in sys.path_hooks:
        try:
            return hook(path)
        except ImportError:
            continue
    return None


def _run_script(path):
    """Run path as `python path` does; returns the exit status of a script
    that cannot be opened, else what the program's code raised."""
    import runpy

    # Python 3.9+: the path is joined to the working directory, not
    # normalised (__file__, the code's file name, sys.path[0] for a
    # directory); a script's sys.path[0] is its directory, links resolved.
    fname = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    if _path_importer(fname) is not None:
        if sys.flags.safe_path:
            sys.path.insert(0, fname)
        else:
            sys.path[0] = fname
        _main_module()
        runpy._run_module_as_main("__main__", False)
        return 0
    try:
        with open(fname, "rb") as f:
            data = f.read()
    except OSError as e:
        sys.stderr.write(f"{_program_name()}: can't open file '{fname}': "
                         f"[Errno {e.errno}] {e.strerror}\n")
        return 2
    if not sys.flags.safe_path:
        sys.path[0] = os.path.dirname(os.path.realpath(fname))
    import importlib.machinery
    import importlib.util

    if fname.endswith(".pyc") or data[:4] == importlib.util.MAGIC_NUMBER:
        import marshal

        loader = importlib.machinery.SourcelessFileLoader("__main__", fname)
        code = marshal.loads(memoryview(data)[16:])
    else:
        loader = importlib.machinery.SourceFileLoader("__main__", fname)
        code = compile(data, fname, "exec", dont_inherit=True)
    m = _main_module()
    m.__file__ = fname
    m.__cached__ = None
    m.__loader__ = loader
    import builtins

    exec(_TRAMPOLINE, {"__name__": "sys", "__builtins__": builtins,
                       "code": code, "namespace": m.__dict__})
    return 0


def _run_module(cmd):
    """Run a module as `python -m module args` does: sys.argv[0] is "-m"
    while it is found, then its file; runpy's frames above the module's
    are in its tracebacks, as they are under plain python."""
    import runpy

    sys.argv[:] = ["-m"] + cmd[1:]
    _main_module()
    runpy._run_module_as_main(cmd[0], True)
    return 0


def _prof_files():
    from . import _torch

    files = set()
    for f in (_HERE, _torch.__file__):
        files.add(f)
        files.add(os.path.abspath(f))
    return files


def _program_tb(tb, files):
    """tb without the frames that are not the program's: everything up to
    its first frame (the interpreter's runpy running prof, this module,
    the trampoline), and prof._torch's wrappers between torch's frames."""
    start = tb
    t = tb
    while t is not None:
        code = t.tb_frame.f_code
        if code is _TRAMPOLINE or code.co_filename == _HERE:
            start = t.tb_next
        t = t.tb_next
    head = prev = None
    t = start
    while t is not None:
        nxt = t.tb_next
        if t.tb_frame.f_code.co_filename not in files:
            if prev is None:
                head = t
            else:
                prev.tb_next = t
            prev = t
        t = nxt
    if prev is not None:
        prev.tb_next = None
    return head


def _trim_chain(e, files, seen):
    if e is None or id(e) in seen:
        return
    seen.add(id(e))
    e.__traceback__ = _program_tb(e.__traceback__, files)
    _trim_chain(e.__cause__, files, seen)
    _trim_chain(e.__context__, files, seen)
    for inner in getattr(e, "exceptions", None) or ():
        if isinstance(inner, BaseException):
            _trim_chain(inner, files, seen)


def _print_uncaught(e):
    """What CPython's PyErr_Print does with the program's uncaught
    exception, with the traceback the program would have had on its own."""
    _trim_chain(e, _prof_files(), set())
    tb = e.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = e
    try:
        sys.excepthook(type(e), e, tb)
    except BaseException as he:     # noqa: B902 - as PyErr_Print reports it
        sys.stderr.write("Error in sys.excepthook:\n")
        sys.__excepthook__(type(he), he, he.__traceback__)
        sys.stderr.write("\nOriginal exception was:\n")
        sys.__excepthook__(type(e), e, tb)
    sys.stderr.flush()


def _silent_hook(*_args):
    pass

def main():
    args = _parser().parse_args()
    cmd = args.cmd
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        _parser().print_usage(sys.stderr)
        sys.stderr.write("python -m prof: name a script (or -m module) to run\n")
        return 2

    want = {}
    if os.environ.get("PROF", "").strip() != "0":
        want["PROF"] = "1"      # PROF=0 still wins, as everywhere
    want["PROF_TORCH"] = "0" if args.no_torch else "1"
    for _opt, var, _meta, _text in _OPTIONS:
        v = getattr(args, var)
        if v is not None:
            want[var] = v
    stripped = len(cmd) + (1 if args.module else 0) != len(sys.argv) - 1
    # PROF_TORCH* are read by prof/_torch.py, later in this process: they
    # need no restart.
    restart = stripped or any(os.environ.get(k) != v for k, v in want.items()
                              if not k.startswith("PROF_TORCH"))
    os.environ.update(want)
    if restart:
        sys.stdout.flush()
        sys.stderr.flush()
        argv = _reexec_argv(cmd, args.module)
        try:
            os.execv(argv[0] if os.path.isabs(argv[0]) else sys.executable, argv)
        except OSError as e:
            sys.stderr.write(f"python -m prof: could not restart {argv[0]} ({e}); "
                             "running in this process, where the options that the runtime "
                             "reads at start have no effect\n")

    import prof
    from . import _torch

    if os.environ.get("PROF", "").strip() != "0" and not prof.enabled():
        prof.enable(True)
    if _torch.enabled_by_env():
        _torch.install()

    sys.argv[:] = cmd
    try:
        if args.module:
            return _run_module(cmd)
        return _run_script(cmd[0])
    except SystemExit:
        raise               # the interpreter prints its message and exits with its code
    except BaseException as e:          # noqa: B902 - shown as Python would
        _print_uncaught(e)
        if isinstance(e, KeyboardInterrupt):
            # Shown; raised again so that the interpreter ends as on Ctrl-C
            # (finalises, then dies by SIGINT: status 130 in a shell), with
            # nothing printed a second time.
            sys.excepthook = _silent_hook
            raise
        return 1


if __name__ == "__main__":
    _status = main()
    if _status:
        sys.exit(_status)
