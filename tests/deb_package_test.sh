#!/usr/bin/env bash
# The .deb packages of this build (cmake/SluicePackage.cmake), made by
# CPack from BUILD_DIR as it is: their names, fields and contents, the
# postinst's syntax, and the extracted files working from where they lie
# (dpkg-deb -x into a scratch root: the daemons find their libraries by
# RPATH, the Python package imports). Installing them with apt needs a
# Debian root with network access, which CI does not have.
# Usage: deb_package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$build/deb_package
rm -rf "$work"
mkdir -p "$work"
fail() { echo "deb_package: $*" >&2; exit 1; }

if ! (cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" > "$work/cpack.log" 2>&1); then
  cat "$work/cpack.log" >&2
  fail "cpack failed (log above)"
fi
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
[ -n "$version" ] || fail "no CPACK_PACKAGE_VERSION in $build/CPackConfig.cmake"
arch=$(dpkg --print-architecture)
runtime=$work/out/sluice_${version}_${arch}.deb
sdk=$work/out/sluice-dev_${version}_${arch}.deb
python=$work/out/python3-sluice_${version}_${arch}.deb
for deb in "$runtime" "$sdk" "$python"; do
  [ -f "$deb" ] || fail "cpack made no $(basename "$deb"); it made: $(ls "$work/out"/*.deb 2>/dev/null)"
done

# Fields.
field() { dpkg-deb -f "$1" "$2"; }
[ "$(field "$runtime" Package)" = sluice ] || fail "runtime package name: $(field "$runtime" Package)"
depends=$(field "$runtime" Depends)
for needed in adduser libgrpc++1.51 libc6; do
  grep -q "$needed" <<< "$depends" || fail "sluice Depends lacks $needed: $depends"
done
grep -q "sluice (= $version)" <<< "$(field "$sdk" Depends)" || fail "sluice-dev Depends: $(field "$sdk" Depends)"
grep -q "sluice (= $version)" <<< "$(field "$python" Depends)" || fail "python3-sluice Depends: $(field "$python" Depends)"
grep -q "python3-numpy" <<< "$(field "$python" Depends)" || fail "python3-sluice Depends: $(field "$python" Depends)"

# Contents: each file in its package, and none in two.
contents() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
contents "$runtime" > "$work/runtime.txt"
contents "$sdk" > "$work/sdk.txt"
contents "$python" > "$work/python.txt"
expect() {
  grep -qx "$2" "$work/$1.txt" || fail "$1 package lacks $2"
}
for program in dispatcherd workerd sluice; do expect runtime "/usr/bin/$program"; done
for library in libsluice_core.so libsluice_service.so libsluice_client.so; do expect runtime "/usr/lib/$library"; done
expect runtime /usr/lib/systemd/system/sluice-dispatcher.service
expect runtime /usr/lib/systemd/system/sluice-worker.service
expect runtime /usr/share/sluice/examples/dispatcher.yaml
expect sdk /usr/include/sluice/dataset.h
expect sdk /usr/lib/cmake/Sluice/SluiceConfig.cmake
expect python /usr/lib/python3/dist-packages/sluice/__init__.py
expect python /usr/lib/python3/dist-packages/sluice/_paths.py
grep -q "^/usr/lib/python3/dist-packages/sluice/_sluice.*\.so$" "$work/python.txt" || fail "python3-sluice lacks _sluice*.so"
shared=$(sort "$work/runtime.txt" "$work/sdk.txt" "$work/python.txt" | grep -v '/$' | uniq -d)
[ -z "$shared" ] || fail "files in two packages: $shared"

# The postinst: present, executable, valid sh, and it makes the user.
dpkg-deb -e "$runtime" "$work/control"
[ -x "$work/control/postinst" ] || fail "sluice has no executable postinst"
sh -n "$work/control/postinst" || fail "postinst is not valid sh"
grep -q "adduser --system --group" "$work/control/postinst" || fail "postinst makes no sluice user"

# The files, extracted, work from where they lie.
root=$work/root
for deb in "$runtime" "$sdk" "$python"; do dpkg-deb -x "$deb" "$root"; done
"$root/usr/bin/dispatcherd" --version > "$work/version.txt" || fail "dispatcherd --version failed from the package"
grep -q "$version" "$work/version.txt" || fail "dispatcherd --version says $(cat "$work/version.txt"), not $version"
"$root/usr/bin/workerd" --help > /dev/null || fail "workerd --help failed from the package"
unit=$root/usr/lib/systemd/system/sluice-dispatcher.service
grep -qx "ExecStart=/usr/bin/dispatcherd --config /etc/sluice/dispatcher.yaml" "$unit" || fail "$unit: $(grep ExecStart "$unit")"
grep -qx "User=sluice" "$unit" || fail "$unit runs as no sluice user"
grep -q 'DISPATCHERD = "/usr/bin/dispatcherd"' "$root/usr/lib/python3/dist-packages/sluice/_paths.py" ||
  fail "_paths.py: $(cat "$root/usr/lib/python3/dist-packages/sluice/_paths.py")"
(cd "$work" && env -u PYTHONPATH PYTHONPATH="$root/usr/lib/python3/dist-packages" /usr/bin/python3 -c '
import sys
import sluice
assert sluice.__file__.startswith(sys.argv[1]), sluice.__file__
values = [int(x) for x in sluice.Dataset.range(4).map("square")]
assert values == [0, 1, 4, 9], values
' "$root/") || fail "the packaged Python package does not import and run"
echo "deb_package: OK ($(ls "$work/out"/*.deb | xargs -n1 basename | tr '\n' ' '))"
