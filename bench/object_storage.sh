#!/usr/bin/env bash
# object_storage.sh: bench/object_storage.py with the build's Python package:
# the same TFRecord shards and image folder read from local disk, from s3rver on
# loopback, and through a relay adding latency each way; figures in
# bench/README.md ("Object storage").
#
#   bench/object_storage.sh [--shards 16] [--shard-mib 64] [--images 2000] [--delays-ms 20,50]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="${BUILD:-build}/python"
exec timeout 3600 /usr/bin/python3 bench/object_storage.py "$@"
