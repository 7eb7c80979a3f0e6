#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/) for N seconds (default 600, the
# 10 minutes of issue 36) and writes a summary table: runs, runs/s,
# coverage (edges) and features at the end, corpus entries added, and
# crashes. New corpus entries, logs and any reproducer stay in a scratch
# folder (--work; a fresh one under $TMPDIR by default), never in the
# repository: copy an entry worth keeping into tests/fuzz/corpus/<target>/
# by hand, and a reproducer as crash-<what> beside its fix.
#
#   bench/fuzz.sh [--seconds 600] [--jobs 1] [--only NAME[,NAME...]] [--work DIR]
#                 [--build-dir build-fuzz]
#
# Builds build-fuzz first when needed. --jobs 1 (the default) runs one
# target at a time, so that runs/s compare across targets and runs; the
# whole set takes 13 x N seconds. The table is also in WORK/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
jobs=1
only=""
work=""
build_dir=build-fuzz
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz-bench.XXXXXX")"

args=(--build --build-dir "$build_dir" --seconds "$seconds" --jobs "$jobs" --work "$work")
[ -z "$only" ] || args+=(--only "$only")
status=0
bash tests/fuzz/run.sh "${args[@]}" || status=$?
echo
echo "fuzz.sh: $(date -u +%Y-%m-%dT%H:%MZ), ${seconds} s per target; table in $work/summary.txt"
exit "$status"
