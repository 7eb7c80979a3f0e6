#!/usr/bin/env bash
# The full test suite: installs dependencies, builds everything with tests,
# and runs ctest. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh -DSLUICE_BUILD_TESTS=ON
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 300
