#!/usr/bin/env python3
"""Each way into a user's build, end to end, as docs/BUILD.md tells it.

    run.py ROUTE [--source DIR] [--work DIR]

ROUTE is one of:
  disabled   -DPROF_DISABLE, C and C++, linked with no libprof
  make       a Makefile + pkg-config against a prefix install: libprof.so
             found through the .pc's rpath, and libprof_static.a
  cmake      find_package(prof) against a prefix install: prof::prof,
             prof::prof_static, and C++ PROF_FUNC() names (C++17 and C++11)
  cxx-names  the same names from g++ and clang++, C++11 and C++17
  meson-sub  prof as a meson subproject: only the library is built, only
             the consumer's tests run; -Dprof:prof_disable=true builds nothing
  meson-sub-nocmake  the same subproject, configured and built with no
             cmake on PATH (a directory of links to every other program)
  pip-message  pip install --no-build-isolation . in a venv without
             meson-python names what is missing
  wheel      pip wheel with Debian's python3, installed into a fresh venv
             (another CPython of the same version when there is one)

The prefix install (meson setup --prefix, meson install, as the docs say)
is shared by the routes: it lives in WORK/prefix and is refreshed under a
lock by each route that needs it. Everything else happens in a temporary
directory. Exit 0 pass, 1 fail, 77 skip (a tool is missing).
"""
import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


class Fail(Exception):
    pass


def log(msg):
    print(msg, flush=True)


def run(cmd, cwd=None, env=None, check=True, capture=True):
    log("$ " + " ".join(cmd) + (" (in %s)" % cwd if cwd else ""))
    p = subprocess.run(cmd, cwd=cwd, env=env, text=True,
                       stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.STDOUT if capture else None)
    if check and p.returncode != 0:
        raise Fail("%s exited %d:\n%s" % (cmd[0], p.returncode, p.stdout or ""))
    return p


def clean_env(**extra):
    """The environment a user's shell would have: none of the variables that
    could make a broken install look fine."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PROF", "PKG_CONFIG", "LD_", "PYTHON", "CMAKE_"))
           and k not in ("CFLAGS", "CXXFLAGS", "LDFLAGS", "CPATH", "LIBRARY_PATH",
                         "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


class Skip(Exception):
    pass


def need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            raise Skip("%s not found" % t)


def summary_stages(path):
    """{stage name: count} from the last (final) line of a JSON summary."""
    with open(path) as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    if not lines:
        raise Fail("no summary written to %s" % path)
    doc = json.loads(lines[-1])
    return {s["name"]: s["count"] for s in doc["total"]["stages"]}


def run_profiled(exe, work, cwd=None, env=None):
    """Run exe with PROF=1 and return its stages from the JSON summary."""
    out = os.path.join(work, "summary-%s.json" % os.path.basename(exe))
    e = clean_env(PROF="1", PROF_SUMMARY=out, PROF_SUMMARY_FORMAT="json")
    if env:
        e.update(env)
    run([exe], cwd=cwd, env=e)
    return summary_stages(out)


def expect_stages(got, want, what):
    for name, count in want.items():
        if got.get(name) != count:
            raise Fail("%s: stage %r: want count %d, got %r (stages: %s)"
                       % (what, name, count, got.get(name), sorted(got)))
    log("ok: %s: %s" % (what, ", ".join("%s x%d" % kv for kv in sorted(want.items()))))


def dynamic_section(exe):
    """(NEEDED libraries, RUNPATH/RPATH entries) of an ELF file."""
    out = run(["readelf", "-d", exe]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", out)
    paths = []
    for m in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[(.*?)\]", out):
        paths += m.split(":")
    return needed, paths


def expect_no_libprof(exe):
    needed, _ = dynamic_section(exe)
    if any("libprof" in n for n in needed):
        raise Fail("%s needs %s; it should carry prof statically" % (exe, needed))
    log("ok: %s needs no libprof (NEEDED: %s)" % (os.path.basename(exe), ", ".join(needed)))


# ---------------------------------------------------------------------------
# The prefix install, as docs/BUILD.md gives it


def prefix_install(source, work):
    """meson setup --prefix P; meson install: the commands of docs/BUILD.md,
    with no options. That builds what it installs and nothing else (the
    libraries; tests, examples, benchmarks and the Python extension are
    opt-in), which is checked. Returns P."""
    need("meson", "ninja")
    os.makedirs(work, exist_ok=True)
    prefix = os.path.join(work, "prefix")
    build = os.path.join(work, "build-lib")
    with open(os.path.join(work, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(build, "build.ninja")):
            run(["meson", "setup", build, source, "--prefix=" + prefix], env=clean_env())
            targets = json.loads(run(["meson", "introspect", "--targets", build]).stdout)
            built = sorted(t["name"] for t in targets if t["build_by_default"])
            if built != ["prof", "prof_static"]:
                shutil.rmtree(build)
                raise Fail("a plain prefix install builds %s; want only the libraries "
                           "(prof, prof_static)" % built)
            log("ok: a plain `meson setup --prefix` builds only %s" % ", ".join(built))
        # Install only when something was rebuilt: routes running in
        # parallel use the prefix, and an install rewrites its files.
        built = run(["ninja", "-C", build], env=clean_env()).stdout
        if "no work to do" not in built or not os.path.isdir(prefix):
            run(["meson", "install", "-C", build, "--quiet", "--no-rebuild"], env=clean_env())
    return prefix


def copy_consumer(name, tmp):
    dst = os.path.join(tmp, name)
    shutil.copytree(os.path.join(HERE, name), dst, symlinks=True)
    return dst


# ---------------------------------------------------------------------------
# Routes


def route_disabled(source, work, tmp):
    """-DPROF_DISABLE and no -lprof, C and C++: links, and every call gives
    its documented off value (the consumer checks); PROF=1 records nothing."""
    need("cc", "c++", "readelf")
    src = os.path.join(HERE, "disabled")
    inc = os.path.join(source, "include")
    # Every public call of prof.h and prof_ranks.h is exercised by app.c,
    # so a call added to a header without a compiled-out twin fails this
    # route.
    header = ""
    for name in ("prof.h", "prof_ranks.h"):
        with open(os.path.join(inc, name)) as f:
            header += f.read()
    api = sorted(set(re.findall(r"^PROF_API [^;(]*?\b(prof_[a-z_]*[a-z])\(", header, re.M)))
    with open(os.path.join(src, "app.c")) as f:
        app_c = f.read()
    untested = [n for n in api if not re.search(r"\b%s\(" % n, app_c)]
    if len(api) < 20 or untested:
        raise Fail("prof.h and prof_ranks.h declare %d calls; disabled/app.c does not call %s"
                   % (len(api), untested))
    log("ok: disabled/app.c calls all %d public functions of prof.h and prof_ranks.h"
        % len(api))
    warn = ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-DPROF_DISABLE", "-I" + inc]
    exe_c = os.path.join(tmp, "app_c")
    exe_cxx = os.path.join(tmp, "app_cxx")
    run(["cc", "-std=c11", "-O2"] + warn + [os.path.join(src, "app.c"), "-o", exe_c],
        env=clean_env())
    run(["c++", "-std=c++11", "-O2"] + warn + [os.path.join(src, "app.cpp"), "-o", exe_cxx],
        env=clean_env())
    # prof.h copied alone into a project (no prof_version.h nor
    # prof_impl.h beside it; prof_ranks.h, which app.c also calls, with
    # it): compiled out, it needs nothing else.
    alone = os.path.join(tmp, "alone")
    os.makedirs(alone)
    shutil.copy(os.path.join(inc, "prof.h"), alone)
    shutil.copy(os.path.join(inc, "prof_ranks.h"), alone)
    exe_alone = os.path.join(tmp, "app_alone")
    run(["cc", "-std=c11", "-O2"] + warn[:-1] + ["-I" + alone, os.path.join(src, "app.c"),
                                                 "-o", exe_alone], env=clean_env())
    run(["c++", "-std=c++11", "-O2"] + warn[:-1] + ["-I" + alone, os.path.join(src, "app.cpp"),
                                                    "-o", exe_alone + "_cxx"], env=clean_env())
    log("ok: prof.h alone compiles with -DPROF_DISABLE, C and C++")
    for exe in (exe_c, exe_cxx, exe_alone, exe_alone + "_cxx"):
        expect_no_libprof(exe)
        summary = os.path.join(tmp, "summary.txt")
        out = run([exe], env=clean_env(PROF="1", PROF_SUMMARY=summary)).stdout
        log(out.strip())
        if os.path.exists(summary):
            raise Fail("%s compiled out still wrote a summary" % exe)


def route_make(source, work, tmp):
    need("make", "cc", "pkg-config", "readelf")
    prefix = prefix_install(source, work)
    app = copy_consumer("make", tmp)
    pc_dir = os.path.join(prefix, "lib", "pkgconfig")   # the path docs/BUILD.md gives
    run(["make", "-C", app], env=clean_env(PKG_CONFIG_PATH=pc_dir))
    train = os.path.join(app, "train")
    needed, rpath = dynamic_section(train)
    if "libprof.so.0" not in needed:
        raise Fail("train does not link libprof.so.0: %s" % needed)
    if os.path.join(prefix, "lib") not in rpath:
        raise Fail("train has no rpath to %s/lib (rpath: %s)" % (prefix, rpath))
    ldd = run(["ldd", train], env=clean_env()).stdout
    if os.path.join(prefix, "lib", "libprof.so.0") not in ldd:
        raise Fail("the loader does not find the installed libprof:\n" + ldd)
    log("ok: train finds %s/lib/libprof.so.0 with no LD_LIBRARY_PATH" % prefix)
    want = {"make_step": 4, "make_forward": 4}
    expect_stages(run_profiled(train, tmp), want, "make: train (libprof.so)")
    static = os.path.join(app, "train_static")
    expect_no_libprof(static)
    expect_stages(run_profiled(static, tmp), want, "make: train_static (libprof_static.a)")


def route_cmake(source, work, tmp):
    need("cmake", "c++", "readelf")
    prefix = prefix_install(source, work)
    app = copy_consumer("cmake", tmp)
    build = os.path.join(app, "build")
    run(["cmake", "-S", app, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix,
         "-DCMAKE_BUILD_TYPE=Release"], env=clean_env())
    run(["cmake", "--build", build], env=clean_env())
    want = {"codec::Encoder::run": 3, "codec::Decoder::run": 2,
            "codec::Encoder::run::lambda": 3}
    for exe in ("codec", "codec_static", "codec_cxx11"):
        path = os.path.join(build, exe)
        got = run_profiled(path, tmp)
        expect_stages(got, want, "cmake: " + exe)
        if "run" in got or "operator()" in got:
            raise Fail("cmake: %s: unqualified names among %s" % (exe, sorted(got)))
    expect_no_libprof(os.path.join(build, "codec_static"))


def route_cxx_names(source, work, tmp):
    """PROF_FUNC() names with each C++ compiler here (gcc and clang print
    __PRETTY_FUNCTION__ differently), C++11 and C++17, without CMake."""
    prefix = prefix_install(source, work)
    compilers = [c for c in ("g++", "clang++") if shutil.which(c)]
    if not compilers:
        raise Skip("no C++ compiler")
    lib = os.path.join(prefix, "lib")
    want = {"codec::Encoder::run": 3, "codec::Decoder::run": 2,
            "codec::Encoder::run::lambda": 3}
    for cxx in compilers:
        for std in ("c++11", "c++17"):
            exe = os.path.join(tmp, "codec-%s-%s" % (cxx, std))
            run([cxx, "-std=" + std, "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                 "-I" + os.path.join(prefix, "include"), os.path.join(HERE, "cmake", "codec.cpp"),
                 "-o", exe, "-L" + lib, "-lprof", "-Wl,-rpath," + lib], env=clean_env())
            got = run_profiled(exe, tmp)
            expect_stages(got, want, "%s -std=%s" % (cxx, std))
            if len(got) != len(want):
                raise Fail("%s -std=%s: extra stages %s" % (cxx, std, sorted(got)))


def route_meson_sub(source, work, tmp):
    need("meson", "ninja", "readelf")
    app = copy_consumer("meson-sub", tmp)
    # The docs: prof's tree (a git clone, or what the wrap fetches) in
    # subprojects/prof. --wrap-mode=nodownload: the wrap's URL is a
    # placeholder, and this must use the tree under test.
    os.symlink(source, os.path.join(app, "subprojects", "prof"))
    for disabled in (False, True):
        build = os.path.join(app, "build-off" if disabled else "build")
        opts = ["-Dprof:prof_disable=true"] if disabled else []
        run(["meson", "setup", build, app, "--wrap-mode=nodownload"] + opts, env=clean_env())
        targets = json.loads(run(["meson", "introspect", "--targets", build]).stdout)
        prof_built = sorted(t["name"] for t in targets
                            if t.get("subproject") == "prof" and t["build_by_default"])
        want_built = [] if disabled else ["prof"]
        if prof_built != want_built:
            raise Fail("meson-sub%s: prof builds %s by default, want %s"
                       % (" (prof_disable)" if disabled else "", prof_built, want_built))
        steps = len([ln for ln in run(["ninja", "-C", build, "-t", "commands"]).stdout.splitlines()
                     if ln.strip()])
        log("ok: meson-sub%s: prof builds %s by default; %d build steps in all"
            % (" (prof_disable)" if disabled else "", prof_built or "nothing", steps))
        run(["ninja", "-C", build], env=clean_env())
        tests = json.loads(run(["meson", "introspect", "--tests", build]).stdout)
        names = sorted("%s/%s" % (t.get("project_name", "?"), t["name"]) for t in tests)
        if [t["name"] for t in tests] != ["app"]:
            raise Fail("meson-sub: meson test would run %s, want only the consumer's app" % names)
        out = run(["meson", "test", "-C", build, "--print-errorlogs"], env=clean_env()).stdout
        if not re.search(r"^Ok:\s+1\s*$", out, re.M):
            raise Fail("meson-sub: meson test did not run exactly one passing test:\n" + out)
        log("ok: meson-sub: meson test runs the consumer's one test and it passes")
        exe = os.path.join(build, "app")
        if disabled:
            expect_no_libprof(exe)
        else:
            expect_stages(run_profiled(exe, tmp), {"sub_step": 3}, "meson-sub: app")


def path_without(tmp, banned):
    """A directory of symlinks to every program on PATH except those named
    in banned (first one found wins, as for the shell): a PATH on which
    they are not found, with everything else where it was."""
    bin_dir = os.path.join(tmp, "path-bin")
    os.makedirs(bin_dir)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            exe = os.path.join(d, name)
            link = os.path.join(bin_dir, name)
            if name in banned or os.path.lexists(link):
                continue
            if os.access(exe, os.X_OK) and not os.path.isdir(exe):
                os.symlink(exe, link)
    return bin_dir


def route_meson_sub_nocmake(source, work, tmp):
    """No tool beyond meson, ninja and a C compiler builds prof as a
    subproject: PATH without cmake (meson's cmake module once wrote the
    CMake package files and stopped the configure without it)."""
    need("meson", "ninja")
    app = copy_consumer("meson-sub", tmp)
    os.symlink(source, os.path.join(app, "subprojects", "prof"))
    bin_dir = path_without(tmp, {"cmake", "cmake3"})
    env = clean_env(PATH=bin_dir)
    if shutil.which("cmake", path=bin_dir):
        raise Fail("cmake is still on the stripped PATH %s" % bin_dir)
    build = os.path.join(app, "build")
    run(["meson", "setup", build, app, "--wrap-mode=nodownload"], env=env)
    run(["ninja", "-C", build], env=env)
    expect_stages(run_profiled(os.path.join(build, "app"), tmp), {"sub_step": 3},
                  "meson-sub without cmake: app")
    # prof's own build, as a prefix install configures it, needs no cmake
    # either: the CMake package files are text it writes when configured
    # (the build itself is the subproject's above; consumer-cmake checks
    # that find_package reads the installed files).
    own = os.path.join(tmp, "build-own")
    run(["meson", "setup", own, source, "--prefix=" + os.path.join(tmp, "prefix")], env=env)
    installed = json.loads(run(["meson", "introspect", "--installed", own]).stdout).values()
    for f in ("profConfig.cmake", "profConfigVersion.cmake"):
        dest = os.path.join(tmp, "prefix", "lib", "cmake", "prof", f)
        if not os.path.isfile(os.path.join(own, "src", f)) or dest not in installed:
            raise Fail("configured without cmake, prof does not write and install %s" % dest)
    log("ok: without cmake on PATH, prof builds as a subproject, and configures a prefix "
        "install with its CMake files")


def route_pip_message(source, work, tmp):
    """A venv with no meson-python: pip install --no-build-isolation must
    stop with our message naming the packages, not a traceback."""
    py = "/usr/bin/python3"
    if not os.path.exists(py) or run([py, "-c", "import venv, ensurepip"], check=False).returncode:
        raise Skip("%s with venv and ensurepip not found" % py)
    venv = os.path.join(tmp, "venv")
    run([py, "-m", "venv", venv], env=clean_env())
    vpy = os.path.join(venv, "bin", "python")
    if run([vpy, "-c", "import mesonpy"], check=False).returncode == 0:
        raise Fail("a venv without system site packages has mesonpy?")
    p = run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
             source], env=clean_env(), check=False)
    if p.returncode == 0:
        raise Fail("pip install succeeded with no meson-python")
    for word in ("meson-python", "python3-mesonpy", "--no-build-isolation"):
        if word not in p.stdout:
            raise Fail("pip's failure does not name %r:\n%s" % (word, p.stdout))
    log("ok: pip names what is missing:\n" + "\n".join(
        ln for ln in p.stdout.splitlines() if "meson-python" in ln or "apt install" in ln))


def other_python(version):
    """A CPython of the same major.minor that is not Debian's, for installing
    the wheel 'on another Python of the same version'."""
    for cand in (shutil.which("python3"), shutil.which("python%s" % version)):
        if not cand or os.path.realpath(cand).startswith("/usr/bin/"):
            continue
        p = run([cand, "-c", "import sys, venv, ensurepip; "
                 "print('%d.%d' % sys.version_info[:2], sys.executable)"], check=False)
        if p.returncode == 0 and p.stdout.split()[0] == version:
            return p.stdout.split()[1]
    return None


def route_wheel(source, work, tmp):
    py = "/usr/bin/python3"
    if run([py, "-c", "import mesonpy, pip, venv"], check=False).returncode:
        raise Skip("%s has no meson-python (python3-mesonpy) or pip" % py)
    need("meson", "ninja", "patchelf")
    t0 = time.time()
    dist = os.path.join(tmp, "dist")
    # Build from a copy: pip and meson-python leave nothing in the tree then.
    src = os.path.join(tmp, "src")
    shutil.copytree(source, src, ignore=shutil.ignore_patterns(
        "build*", ".git", "dist", "__pycache__", "*.egg-info", ".mesonpy*"))
    run([py, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", src, "-w", dist],
        env=clean_env())
    wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
    if len(wheels) != 1:
        raise Fail("want one wheel, got %s" % wheels)
    wheel = os.path.join(dist, wheels[0])
    log("built %s in %.0f s" % (wheels[0], time.time() - t0))
    names = zipfile.ZipFile(wheel).namelist()
    stray = [n for n in names if n.endswith(".pc") or "/cmake/" in n or n.endswith(".a")]
    if stray:
        raise Fail("the wheel holds files that point outside it: %s" % stray)
    if not any(re.search(r"\.prof\.mesonpy\.libs/libprof\.so", n) for n in names):
        raise Fail("the wheel does not bundle libprof.so: %s" % names)
    log("ok: the wheel bundles libprof.so and holds no .pc, CMake or static files")
    version = run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).stdout.strip()
    target = other_python(version) or py
    log("installing into a venv of %s (Python %s)" % (target, version))
    venv = os.path.join(tmp, "venv")
    run([target, "-m", "venv", venv], env=clean_env())
    vpy = os.path.join(venv, "bin", "python")
    run([vpy, "-m", "pip", "install", "--no-index", "--no-deps", wheel], env=clean_env())
    check = ("import prof\n"
             "prof.enable()\n"
             "with prof.zone('x'):\n"
             "    pass\n"
             "s = prof.stats()\n"
             "print(s)\n"
             "assert 'x' in s, s\n"
             "print('loaded', prof._prof.__file__)\n")
    out = run([vpy, "-c", check], cwd=tmp, env=clean_env(PROF_SUMMARY="off")).stdout
    log(out.strip())
    if venv not in out:
        raise Fail("prof was not imported from the venv:\n" + out)
    # The tools as a user runs them: venv/bin/prof-top, the venv not
    # activated, PATH without it (issue 30: '#!/usr/bin/env python3' found
    # a python without the package).
    for tool, arg in (("prof-top", "--help"), ("prof-top", "--version"),
                      ("prof-merge", "--version"), ("prof-diff", "--version"),
                      ("prof-report", "--version")):
        p = run([os.path.join(venv, "bin", tool), arg], cwd=tmp, check=False,
                env=clean_env(PATH="/usr/bin:/bin"))
        if p.returncode != 0:
            raise Fail("venv/bin/%s %s with PATH=/usr/bin:/bin exited %d:\n%s"
                       % (tool, arg, p.returncode, p.stdout))
    log("ok: the installed tools run from any PATH")
    log("ok: the wheel works in a fresh venv of %s (%.0f s in all)" % (target, time.time() - t0))


ROUTES = {
    "disabled": route_disabled,
    "make": route_make,
    "cmake": route_cmake,
    "cxx-names": route_cxx_names,
    "meson-sub": route_meson_sub,
    "meson-sub-nocmake": route_meson_sub_nocmake,
    "pip-message": route_pip_message,
    "wheel": route_wheel,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("route", choices=sorted(ROUTES) + ["all"])
    ap.add_argument("--source", default=os.environ.get("PROF_TEST_SOURCE_DIR",
                                                      os.path.dirname(os.path.dirname(HERE))))
    ap.add_argument("--work", default=None,
                    help="where the shared prefix install lives (default: a temporary directory)")
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    routes = sorted(ROUTES) if args.route == "all" else [args.route]
    tmp_root = tempfile.mkdtemp(prefix="prof-consumers-")
    work = os.path.abspath(args.work) if args.work else os.path.join(tmp_root, "work")
    failed, skipped = [], []
    try:
        for r in routes:
            log("=== %s" % r)
            tmp = os.path.join(tmp_root, r)
            os.makedirs(tmp)
            try:
                ROUTES[r](source, work, tmp)
            except Fail as e:
                log("FAIL: %s: %s" % (r, e))
                failed.append(r)
            except Skip as e:
                log("SKIP: %s: %s" % (r, e))
                skipped.append(r)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    if failed:
        return 1
    return SKIP if len(skipped) == len(routes) else 0


if __name__ == "__main__":
    sys.exit(main())
