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
                    "wait (data), module forwards (forward and its modules), backward and "
                    "optimizer steps are zones with no code change, and each step() of the "
                    "first optimizer is a prof.step(). Each option sets the environment "
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


def _trimmed(tb):
    """The traceback from the program's own first frame: runpy's and ours
    are not the user's."""
    here = os.path.abspath(__file__)
    while tb is not None:
        f = tb.tb_frame
        if f.f_globals.get("__name__") != "runpy" and os.path.abspath(f.f_code.co_filename) != here:
            break
        tb = tb.tb_next
    return tb


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

    import runpy

    sys.argv[:] = cmd
    try:
        if args.module:
            runpy.run_module(cmd[0], run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(cmd[0]))
            runpy.run_path(cmd[0], run_name="__main__")
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as e:          # noqa: B902 - shown as Python would, then exit 1
        e.__traceback__ = _trimmed(e.__traceback__)
        sys.excepthook(type(e), e, e.__traceback__)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
