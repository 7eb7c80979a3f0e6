#!/usr/bin/env bash
# Scale-out across hosts (issue 36): one reader's aggregate throughput from
# 1, 2, 4 and 8 workers, each on a network-namespace host whose link is
# limited by tc tbf, against the sum of the links (bench/scale_out.py).
#
#   sudo bash bench/scale_out.sh BUILD_DIR [--link 400mbit] [--workers 1,2,4,8] [--seconds 8] [--baseline]
#
# Skips, saying why, when not root. Makes and removes its own namespaces
# (10.x addresses); nothing is added to the machine's own.
set -euo pipefail
build=${1:?usage: scale_out.sh BUILD_DIR [--link RATE] [--workers 1,2,4,8] [--seconds S] [--baseline]}
shift
if [[ $(id -u) -ne 0 ]]; then
  echo "scale_out: skipped: needs root (network namespaces and tc)"
  exit 0
fi
exec python3 "$(dirname "$0")/scale_out.py" --build "$build" "$@"
