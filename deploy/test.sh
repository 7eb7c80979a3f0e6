#!/usr/bin/env bash
# The full test suite: installs dependencies, builds everything with tests,
# and runs ctest; then builds the fuzz targets (clang, ASan+UBSan, in
# build-fuzz/) and runs each for 15 s on its corpus (tests/fuzz/run.sh),
# failing on any crash. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh -DSLUICE_BUILD_TESTS=ON
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 300
bash tests/fuzz/run.sh --build --opt -O0 --build-dir build-fuzz --seconds 15 --jobs "$(nproc)"
