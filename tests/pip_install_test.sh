#!/usr/bin/env bash
# `pip install .` as a trainer runs it: into a virtual environment made
# with --system-site-packages (Debian's NumPy and torch), with Debian's
# build tools (--no-build-isolation, --no-index: no PyPI). Installs BUILD_DIR
# as it is (SLUICE_BUILD_DIR, SLUICE_PIP_NO_BUILD: it builds nothing, as
# other tests run its programs), with its scratch files in its own folder. Then
# the installed package, outside the source tree, starts the installed
# daemons and reads through them; and `pip uninstall` removes it all.
# Usage: pip_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src_dir=$(cd "$2" && pwd)
work=$build/pip_install
venv=$work/venv

rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 -m venv --system-site-packages "$venv"
if ! SLUICE_BUILD_DIR=$build SLUICE_PIP_NO_BUILD=1 SLUICE_PIP_WORK_DIR=$work "$venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
  "$src_dir" > "$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  echo "pip_install: pip install failed (log above)" >&2
  exit 1
fi

for program in dispatcherd workerd sluice; do
  "$venv/bin/$program" --help > /dev/null
done
# Not the build tree's package, nor the source tree's: the installed one.
cd "$work"
env -u PYTHONPATH "$venv/bin/python" - "$venv" <<'PY'
import os
import sys

import sluice
from sluice import _paths

venv = os.path.realpath(sys.argv[1])
site = os.path.realpath(os.path.dirname(os.path.dirname(sluice.__file__)))
assert site.startswith(venv + "/lib/python3"), site
assert os.path.realpath(_paths.DISPATCHERD) == venv + "/bin/dispatcherd", _paths.DISPATCHERD
assert os.path.realpath(_paths.WORKERD) == venv + "/bin/workerd", _paths.WORKERD
with sluice.LocalCluster(workers=1) as cluster:
    values = [int(x) for x in sluice.Dataset.range(5).map("square").distribute("parallel_epochs", cluster.service)]
assert values == [0, 1, 4, 9, 16], values
print("pip-installed package: OK")
PY

"$venv/bin/python" -m pip uninstall -y sluice > "$work/uninstall.log"
for program in dispatcherd workerd sluice; do
  if [ -e "$venv/bin/$program" ]; then
    echo "pip_install: pip uninstall left $venv/bin/$program" >&2
    exit 1
  fi
done
if ls "$venv"/lib/libsluice_* > /dev/null 2>&1; then
  echo "pip_install: pip uninstall left $(ls "$venv"/lib/libsluice_*)" >&2
  exit 1
fi
if env -u PYTHONPATH "$venv/bin/python" -c "import sluice" 2> /dev/null; then
  echo "pip_install: sluice still imports after pip uninstall" >&2
  exit 1
fi
echo "pip_install: OK"
