#!/usr/bin/env python3
"""Checks that the fuzz build (tests/fuzz/CMakeLists.txt) compiles every source
of the pipeline engine (sluice_core in pipeline/CMakeLists.txt).

The fuzz targets link the engine from their own source lists, built with
clang; a source added to sluice_core and not there links in the normal build
and fails only the fuzz build, late in CI. Prints what is missing and exits 1.

  /usr/bin/python3 tools/check_fuzz_sources.py [SOURCE_DIR]
"""
import os
import re
import sys


def core_sources(text):
    """The .cc files of add_library(sluice_core ...), relative to pipeline/."""
    block = re.search(r"add_library\(sluice_core SHARED(.*?)\)", text, re.S)
    if block is None:
        sys.exit("check_fuzz_sources: pipeline/CMakeLists.txt has no add_library(sluice_core SHARED ...)")
    return set(re.findall(r"[\w/]+\.cc", block.group(1)))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(root, "pipeline", "CMakeLists.txt")) as f:
        core = core_sources(f.read())
    with open(os.path.join(root, "tests", "fuzz", "CMakeLists.txt")) as f:
        fuzz = set(re.findall(r"\$\{root\}/pipeline/([\w/]+\.cc)", f.read()))
    missing = sorted(core - fuzz)
    for source in missing:
        print(f"pipeline/{source}: in sluice_core but not in tests/fuzz/CMakeLists.txt (add it to "
              "fuzz_instrumented or fuzz_plain)")
    if missing:
        return 1
    print(f"check_fuzz_sources: the fuzz build compiles all {len(core)} sources of sluice_core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
