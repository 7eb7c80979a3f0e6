#!/usr/bin/env bash
# Runs the libFuzzer targets of a fuzz build (tests/fuzz/CMakeLists.txt),
# each for a while on its checked-in corpus, and prints a table: runs,
# runs/s, coverage (edges), features, corpus entries added, and the
# outcome. New corpus entries and any reproducer go to a scratch folder,
# never into the repository. Exit status 1 when any target crashed (a
# crash, an ASan/UBSan/leak report, a timeout or running out of memory).
#
#   tests/fuzz/run.sh [--build [--opt -O1]] [--build-dir build-fuzz]
#                     [--seconds 15] [--jobs 2] [--work DIR] [--only NAME,...]
#
# --build configures (clang-14, -DSLUICE_FUZZ=ON, SLUICE_FUZZ_OPT from
# --opt, -O1 by default) and builds the targets first, with --jobs compile
# jobs. CI builds -O0: 40% less compile time, half the runs per second.
#
# deploy/test.sh runs it for 15 s per target in CI; bench/fuzz.sh for 10
# minutes. A reproducer replays with: build-fuzz/tests/fuzz/NAME_fuzzer FILE
set -euo pipefail
cd "$(dirname "$0")/../.."

build_dir=build-fuzz
seconds=15
jobs=2
work=""
only=""
build=false
opt=-O1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --build) build=true; shift ;;
    --opt) opt="$2"; shift 2 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if $build; then
  cmake -S . -B "$build_dir" -DSLUICE_FUZZ=ON -DSLUICE_FUZZ_OPT="$opt" -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  cmake --build "$build_dir" -j "$jobs"
fi
[ -n "$work" ] || work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz.XXXXXX")"
mkdir -p "$work"

targets=()
for dir in tests/fuzz/corpus/*/; do
  name="$(basename "$dir")"
  if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
  if [ ! -x "$build_dir/tests/fuzz/${name}_fuzzer" ]; then
    echo "run.sh: $build_dir/tests/fuzz/${name}_fuzzer is not built" >&2
    exit 2
  fi
  targets+=("$name")
done

# One target: new corpus entries to $work/NAME/corpus (the first folder,
# where libFuzzer writes), the checked-in corpus read only.
run_one() {
  local name="$1" dir="$work/$1"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  local status=0
  "$build_dir/tests/fuzz/${name}_fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "$dir/corpus" "tests/fuzz/corpus/$name" \
    >"$dir/log" 2>&1 || status=$?
  echo "$status" >"$dir/status"
}

echo "fuzz: ${#targets[@]} targets, ${seconds} s each, $jobs at a time; logs and new corpus entries in $work"
running=0
for name in "${targets[@]}"; do
  run_one "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=()
summary="$work/summary.txt"
printf '%-20s %12s %8s %8s %8s %7s  %s\n' target runs runs/s cov ft new outcome >"$summary"
for name in "${targets[@]}"; do
  dir="$work/$name"
  status="$(cat "$dir/status")"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)"
  added="$(sed -n 's/^stat::new_units_added: *//p' "$dir/log" | tail -1)"
  last="$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
  outcome=ok
  reproducer="$(ls "$dir/artifacts" 2>/dev/null | head -1 || true)"
  if [ "$status" != 0 ] || [ -n "$reproducer" ]; then
    outcome="CRASH (exit $status)"
    failed+=("$name")
  fi
  rate=""
  if [ -n "$runs" ]; then rate=$((runs / seconds)); fi
  printf '%-20s %12s %8s %8s %8s %7s  %s\n' "$name" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "${added:-?}" "$outcome" >>"$summary"
done
cat "$summary"

for name in "${failed[@]}"; do
  dir="$work/$name"
  echo
  echo "fuzz: $name crashed; its log ($dir/log) ends:"
  grep -v '^#[0-9]' "$dir/log" | tail -40
  for file in "$dir"/artifacts/*; do
    [ -e "$file" ] || continue
    echo "fuzz: $name reproducer: $file (replay: $build_dir/tests/fuzz/${name}_fuzzer $file)"
  done
done
[ ${#failed[@]} -eq 0 ]
