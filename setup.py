"""How `pip install .` builds the sluice package: with CMake, not setuptools.

CMake builds the _sluice extension, the daemons and the CLI (in
$SLUICE_BUILD_DIR when set, a tree already configured and built, as CI's
build/ is; else in build/pip, configured here without tests), then installs
them into a scratch prefix. The wheel takes the package from there, and its
shared libraries and programs as data: pip puts them in the environment's
lib/ and bin/ (or ~/.local's with --user), where the extension's RPATH
($ORIGIN/../../../../lib) and the programs' ($ORIGIN/../lib) find them, as
under a CMake install prefix; the package's _paths.py finds the programs
the same way.
"""

import glob
import os
import shutil
import subprocess
import sys

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


def _cmake_install():
    """Builds the targets and installs them; the scratch prefix."""
    build = _build_dir()
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        if os.environ.get("SLUICE_BUILD_DIR"):
            sys.exit(f"SLUICE_BUILD_DIR={build} is not a configured CMake build tree (no CMakeCache.txt)")
        _run(["cmake", "-S", SOURCE_DIR, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
              "-DSLUICE_BUILD_TESTS=OFF", f"-DSLUICE_PYTHON={os.path.realpath(sys.executable)}"])
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
    _run(["cmake", "--build", build, "-j", jobs, "--target", *TARGETS])
    prefix = os.path.join(build, "pip-prefix")
    shutil.rmtree(prefix, ignore_errors=True)
    _run(["cmake", "--install", build, "--prefix", prefix])
    return prefix


class _BuildPackage(build_ext):
    """Lays the package out from the CMake install (the wheel's only build step)."""

    def run(self):
        prefix = _cmake_install()
        package = os.path.join(prefix, "lib", "python3", "dist-packages", "sluice")
        if not os.path.isdir(package):
            sys.exit(f"cmake --install put no sluice package in {package}: was the build made without Python?")
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
        self.distribution.data_files = [
            ("lib", sorted(glob.glob(os.path.join(prefix, "lib", "*.so*")))),
            ("bin", [os.path.join(prefix, "bin", program) for program in PROGRAMS]),
        ]


class _BinaryDistribution(Distribution):
    """Holds native code: the wheel is for this platform and Python."""

    def has_ext_modules(self):
        return True


scratch = os.path.join(_build_dir(), "setuptools")
os.makedirs(scratch, exist_ok=True)
setup(
    cmdclass={"build_ext": _BuildPackage},
    distclass=_BinaryDistribution,
    # setuptools' own files go beside the CMake build, not into the source tree.
    options={"build": {"build_base": scratch}, "egg_info": {"egg_base": scratch}},
)
