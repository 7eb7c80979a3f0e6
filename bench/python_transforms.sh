#!/usr/bin/env bash
# python_transforms.sh: torchvision's transforms run by a Sluice worker's
# Python pool against torchvision's own DataLoader on the same cores, the
# transform alone, and the pool hop's cost per element
# (bench/python_transforms.py says what each includes). Bounded to 20 min.
#
#   bench/python_transforms.sh [--images 512] [--processes 2]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake --build "$BUILD" --target sluice_python dispatcherd workerd >/dev/null
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 1200 /usr/bin/python3 bench/python_transforms.py "$@"
