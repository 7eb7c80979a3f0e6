#!/usr/bin/env bash
# Installs a build tree into a scratch prefix, then builds the out-of-tree
# project tests/find_package_consumer against it and runs what it built.
# Builds nothing in the Sluice tree: run it after the build, as ctest does.
# Usage: find_package_consumer_test.sh BUILD_DIR SOURCE_DIR [cmake args for the consumer...]
set -euo pipefail
build=$(cd "$1" && pwd)
src_dir=$(cd "$2" && pwd)
shift 2
work=$build/find_package_consumer
prefix=$work/prefix

rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
cmake -S "$src_dir/tests/find_package_consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" "$@"
cmake --build "$work/build" -j 2

# The consumer found this install, not another Sluice.
grep -qx "Sluice_DIR:PATH=$prefix/.*" "$work/build/CMakeCache.txt" ||
  { echo "find_package_consumer: the consumer did not find Sluice in $prefix" >&2; exit 1; }
"$work/build/trainer_loop" --help
# The installed programs find the installed libraries (RPATH $ORIGIN/../lib).
for program in sluice dispatcherd workerd; do
  "$prefix/bin/$program" --help > /dev/null
done
# The installed Python package imports and its LocalCluster starts the
# installed daemons.
package_dir=$prefix/lib/python3/dist-packages
if [ -d "$package_dir/sluice" ]; then
  PYTHONPATH=$package_dir /usr/bin/python3 -c '
import sluice
with sluice.LocalCluster(workers=1) as cluster:
    assert sluice.LocalCluster.__module__ == "sluice.local_cluster"
    values = [int(x) for x in sluice.Dataset.range(3).distribute("parallel_epochs", cluster.service)]
    assert values == [0, 1, 2], values
print("installed python package: OK")
'
fi
echo "find_package_consumer: OK"
