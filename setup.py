"""How `pip install .` builds the sluice package: with CMake, not setuptools.

CMake builds the _sluice extension, the daemons and the CLI (in
$SLUICE_BUILD_DIR when set, a tree already configured, as CI's build/ is;
else in build/pip, configured here without tests or benchmarks), then
installs them into a scratch prefix ($SLUICE_PIP_WORK_DIR, default the
build tree). SLUICE_PIP_NO_BUILD=1 installs the tree as it is, building
nothing (the ctest pip_install, beside tests that run its programs). The wheel takes the package from there, and its
shared libraries and programs as data: pip puts them in the environment's
lib/ and bin/ (or ~/.local's with --user), where the extension's RPATH
($ORIGIN/../../../../lib) and the programs' ($ORIGIN/../lib) find them, as
under a CMake install prefix; the package's _paths.py finds the programs
the same way.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.dist import Distribution

SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ("dispatcherd", "workerd", "sluice")
TARGETS = ("_sluice",) + PROGRAMS


def _build_dir():
    given = os.environ.get("SLUICE_BUILD_DIR")
    if given:
        return os.path.abspath(given)
    return os.path.join(SOURCE_DIR, "build", "pip")


def _run(command):
    print("+ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)


def _work_dir():
    return os.path.abspath(os.environ.get("SLUICE_PIP_WORK_DIR") or _build_dir())


def _cache_value(build, name):
    with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as cache:
        for line in cache:
            match = re.match(rf"{name}:[A-Z]+=(.*)$", line.rstrip("\n"))
            if match:
                return match.group(1)
    return None


def _cmake_install():
    """Builds the targets and installs them; the scratch prefix."""
    build = _build_dir()
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        if os.environ.get("SLUICE_BUILD_DIR"):
            sys.exit(f"SLUICE_BUILD_DIR={build} is not a configured CMake build tree (no CMakeCache.txt)")
        _run(["cmake", "-S", SOURCE_DIR, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DSLUICE_BUILD_TESTS=OFF",
              "-DSLUICE_BUILD_BENCH=OFF", "-DSLUICE_BUILD_PYTHON=ON", "-DCMAKE_INSTALL_LIBDIR=lib",
              f"-DSLUICE_PYTHON={os.path.realpath(sys.executable)}"])
    # pip puts the libraries in the environment's lib/: the RPATHs must say so.
    libdir = _cache_value(build, "CMAKE_INSTALL_LIBDIR")
    if libdir != "lib":
        sys.exit(f"{build} installs its libraries in '{libdir}', not 'lib', where pip puts them: configure it "
                 "with -DCMAKE_INSTALL_LIBDIR=lib, or unset SLUICE_BUILD_DIR")
    if os.environ.get("SLUICE_PIP_NO_BUILD") != "1":
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        _run(["cmake", "--build", build, "-j", jobs, "--target", *TARGETS])
    prefix = os.path.join(_work_dir(), "pip-prefix")
    shutil.rmtree(prefix, ignore_errors=True)
    _run(["cmake", "--install", build, "--prefix", prefix])
    return prefix


class _BuildPackage(build_ext):
    """Lays the package out from the CMake install (the wheel's only build step)."""

    def run(self):
        if self.inplace:
            sys.exit("sluice cannot be installed in editable mode (pip install -e): the package is laid out by "
                     "cmake --install; use PYTHONPATH=build/python for a development tree")
        prefix = _cmake_install()
        package = os.path.join(prefix, "lib", "python3", "dist-packages", "sluice")
        if not os.path.isdir(package):
            sys.exit(f"cmake --install put no sluice package in {package}: was the build made without Python?")
        # The extension must be for the Python that runs pip.
        extension = "_sluice" + sysconfig.get_config_var("EXT_SUFFIX")
        if not os.path.exists(os.path.join(package, extension)):
            built = [os.path.basename(f) for f in glob.glob(os.path.join(package, "_sluice*"))]
            sys.exit(f"the build's extension is {built}, not {extension} for {sys.executable}: configure the "
                     "build with -DSLUICE_PYTHON naming this Python")
        target = os.path.join(self.build_lib, "sluice")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(package, target)
        with open(os.path.join(target, "_paths.py"), "w", encoding="utf-8") as paths:
            # The package is in BASE/lib/pythonX.Y/site-packages/sluice; the
            # programs in BASE/bin.
            paths.write("# Written by pip install: the programs installed with the package.\n"
                        "import os as _os\n\n"
                        "_BIN = _os.path.normpath(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)),"
                        " '..', '..', '..', '..', 'bin'))\n")
            for program in PROGRAMS:
                paths.write(f'{program.upper()} = _os.path.join(_BIN, "{program}")\n')
        # The libraries and programs go to the environment's lib/ and bin/.
        libraries = sorted(glob.glob(os.path.join(prefix, "lib", "*.so*")))
        if not libraries:
            sys.exit(f"cmake --install put no shared library in {prefix}/lib")
        self.distribution.data_files = [
            ("lib", libraries),
            ("bin", [os.path.join(prefix, "bin", program) for program in PROGRAMS]),
        ]


class _BinaryDistribution(Distribution):
    """Holds native code: the wheel is for this platform and Python."""

    def has_ext_modules(self):
        return True


scratch = os.path.join(_work_dir(), "setuptools")
os.makedirs(scratch, exist_ok=True)
setup(
    cmdclass={"build_ext": _BuildPackage},
    distclass=_BinaryDistribution,
    # setuptools' own files go beside the CMake build, not into the source tree.
    options={"build": {"build_base": scratch}, "egg_info": {"egg_base": scratch}},
)
