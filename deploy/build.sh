#!/usr/bin/env bash
# Installs dependencies (if missing) and builds Sluice into ./build.
# Usage: deploy/build.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j "$(nproc)"
