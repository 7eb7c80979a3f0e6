#!/usr/bin/env bash
# The cost of `deterministic: true` (issue 20, section 3): a dispatcher and
# two workers on 127.0.0.1 serve range → bench.pace (each worker process
# passes at most PER_SECOND elements a second, bench/pace_plugin.cc) in
# distributed_epoch; `sluice bench` reads for SECONDS with deterministic
# false, then true, ROUNDS times in turn, first with two equal workers,
# then with the second worker paced at half speed. Both modes use
# exactly_once, so the figure is the cost of the order alone. Prints each
# run's elements/s and, per case, the ratio of the medians. Each run gets
# a fresh dispatcher and workers. Stops by itself.
#
#   bash bench/deterministic_order.sh BUILD_DIR [SECONDS] [PER_SECOND] [ROUNDS]
set -uo pipefail

build=${1:?usage: deterministic_order.sh BUILD_DIR [SECONDS] [PER_SECOND] [ROUNDS]}
seconds=${2:-8}
per_second=${3:-20000}
rounds=${4:-3}
dispatcherd="$build/dispatcher/dispatcherd"
workerd="$build/worker/workerd"
sluice="$build/cli/sluice"
plugin="$build/bench/libsluice_bench_pace.so"
for file in "$dispatcherd" "$workerd" "$sluice" "$plugin"; do
  [ -e "$file" ] || { echo "deterministic_order: $file is missing; build first" >&2; exit 2; }
done

source "$(dirname "$0")/daemons.sh"
run_dir=$(mktemp -d)
trap 'stop_all; rm -rf "$run_dir"' EXIT

# start_cluster SLOW_SCALE: a dispatcher and two workers, the second paced
# at SLOW_SCALE times the first's speed.
start_cluster() {
  stop_all
  rm -f "$run_dir"/*.port
  "$dispatcherd" --port 0 --port-file "$run_dir/dispatcher.port" --plugins "$plugin" --log-level warn \
    >>"$run_dir/dispatcher.log" 2>&1 &
  pids+=($!)
  wait_for_file "$run_dir/dispatcher.port" "$run_dir/dispatcher.log" || exit 2
  dispatcher="127.0.0.1:$(cat "$run_dir/dispatcher.port")"
  local scale
  for worker in 0 1; do
    scale=1
    [ "$worker" = 1 ] && scale=$1
    SLUICE_BENCH_PACE_SCALE=$scale "$workerd" --dispatcher "$dispatcher" --port 0 \
      --port-file "$run_dir/worker$worker.port" --plugins "$plugin" --log-level warn \
      >>"$run_dir/worker$worker.log" 2>&1 &
    pids+=($!)
    wait_for_file "$run_dir/worker$worker.port" "$run_dir/worker$worker.log" || exit 2
  done
}

# rate DETERMINISTIC: elements/s of one `sluice bench` run.
rate() {
  cat >"$run_dir/pipeline.yaml" <<YAML
pipeline:
  - range: 1000000000
  - map: {fn: bench.pace, per_second: $per_second}
  - distribute: {processing_mode: distributed_epoch, exactly_once: true, deterministic: $1}
YAML
  timeout $((seconds + 30)) "$sluice" bench "$run_dir/pipeline.yaml" --service "grpc://$dispatcher" --plugin "$plugin" \
    --seconds "$seconds" 2>>"$run_dir/bench.log" |
    sed -n 's/^elements: *[0-9]* (\([0-9.]*\) elements\/s)$/\1/p'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "deterministic_order: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$per_second elements/s per worker at full speed, $seconds s per run"
for case in "equal 1" "half 0.5"; do
  set -- $case
  : >"$run_dir/false" && : >"$run_dir/true"
  for round in $(seq 1 "$rounds"); do
    for mode in false true; do
      # A fresh cluster per run: an earlier job's task would go on filling
      # its buffer for a while, at the cost of the workers' pace.
      start_cluster "$2"
      r=$(rate "$mode")
      [ -n "$r" ] || { echo "deterministic_order: a run printed no rate:" >&2; tail -5 "$run_dir/bench.log" >&2; exit 1; }
      echo "$r" >>"$run_dir/$mode"
      echo "  $1 workers, round $round, deterministic: $mode: $r elements/s"
    done
  done
  off=$(median <"$run_dir/false")
  on=$(median <"$run_dir/true")
  echo "$1 workers: deterministic false $off, true $on elements/s (medians); true/false = $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a / b}')"
done
