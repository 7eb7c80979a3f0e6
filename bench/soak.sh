#!/usr/bin/env bash
# The soak (issue 36, part 4): a dispatcher with a journal, 4 workers and 8
# readers for --minutes (30 by default); jobs made and read continuously in
# both modes, a worker killed with SIGKILL and restarted every 2 minutes, the
# dispatcher every 10; every read checked exactly; RSS, open fds and threads
# of every daemon sampled every 10 s, then a table, a plot (PNG) and PASS or
# FAIL per criterion. See bench/README.md, "Soak", and bench/soak.py for the
# flags (--warmup-minutes, --worker-kill-every, --dispatcher-kill-every,
# --out, ...).
#
#   bash bench/soak.sh [--build DIR] [--minutes 30] [--out DIR] [soak.py flags...]
#
# Exits 0 when every criterion passed, 1 when a read failed, 3 when only a
# series was not flat, 2 when it could not start. Every process it starts
# dies with it (Ctrl-C included).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

for binary in "$build/dispatcher/dispatcherd" "$build/worker/workerd"; do
  [ -x "$binary" ] || { echo "soak: $binary is missing; build first (deploy/build.sh)" >&2; exit 2; }
done
[ -d "$build/python/sluice" ] || { echo "soak: $build/python/sluice is missing; build first" >&2; exit 2; }

# The plot needs matplotlib (Debian's python3-matplotlib), which CI does not
# install: install_deps.sh installs it with --bench.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "soak: matplotlib is missing; installing it: bash deploy/install_deps.sh --bench" >&2
  if ! bash "$root/deploy/install_deps.sh" --bench; then
    echo "soak: could not install python3-matplotlib; run 'sudo apt-get install python3-matplotlib'" \
      "(or deploy/install_deps.sh --bench) and start again" >&2
    exit 2
  fi
fi

# soak.py puts every daemon and reader in a process group of its own, kills
# them all when it ends, and has the kernel kill them if it dies (SIGKILL
# included). The trap hands this script's Ctrl-C or SIGTERM on to it, so it
# can stop them in order and still print what it measured.
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
/usr/bin/python3 "$root/bench/soak.py" --build "$build" "${args[@]}" &
driver=$!
trap 'kill -TERM "$driver" 2>/dev/null' INT TERM HUP
status=0
while true; do
  wait "$driver"
  status=$?
  # wait returns early (above 128) when a trapped signal arrives; the driver
  # is then still stopping.
  kill -0 "$driver" 2>/dev/null || break
done
trap - INT TERM HUP
exit "$status"
