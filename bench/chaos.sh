#!/usr/bin/env bash
# Chaos rounds: for each round, a dispatcher (with a work dir) and two
# workers serve range(N) to `sluice read` in distributed_epoch mode; at a
# random moment a random daemon is killed with SIGKILL and started again
# (same port, same work dir). The round passes when the reader exits 0 and
# its output holds every element: exactly once when the dispatcher was the
# victim, at least once when a worker was. Stops by itself; only
# 127.0.0.1.
#
#   bash bench/chaos.sh BUILD_DIR [ROUNDS] [ELEMENTS] [exactly_once]
#
# With exactly_once, the job uses that option and every round must read
# each element exactly once, whichever daemon was killed.
#
# Prints one line per round and a summary; exits 1 if any round failed.
set -uo pipefail

build=${1:?usage: chaos.sh BUILD_DIR [ROUNDS] [ELEMENTS]}
rounds=${2:-20}
elements=${3:-100000}
exactly_once=false
[ "${4:-}" = "exactly_once" ] && exactly_once=true
dispatcherd="$build/dispatcher/dispatcherd"
workerd="$build/worker/workerd"
sluice="$build/cli/sluice"
for binary in "$dispatcherd" "$workerd" "$sluice"; do
  [ -x "$binary" ] || { echo "chaos: $binary is missing; build first" >&2; exit 2; }
done

run_dir=$(mktemp -d)
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$run_dir"' EXIT

# wait_for_file FILE LOG: waits up to 30 s for a daemon's port file.
wait_for_file() {
  for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.05; done
  echo "chaos: timed out waiting for $1; the daemon's log:" >&2
  tail -5 "$2" >&2
  return 1
}

# start_dispatcher PORT, start_worker I PORT: set dispatcher_pid/worker_pid[I].
start_dispatcher() {
  rm -f "$round_dir/dispatcher.port"
  "$dispatcherd" --port "$1" --bind-address 127.0.0.1 --port-file "$round_dir/dispatcher.port" \
    --work-dir "$round_dir/work" --worker-timeout-ms 2000 --log-level warn \
    >>"$round_dir/dispatcher.log" 2>&1 &
  dispatcher_pid=$!
  pids+=("$dispatcher_pid")
  wait_for_file "$round_dir/dispatcher.port" "$round_dir/dispatcher.log"
}
declare -a worker_pid
start_worker() {
  rm -f "$round_dir/worker$1.port"
  "$workerd" --dispatcher "127.0.0.1:$dispatcher_port" --port "$2" --bind-address 127.0.0.1 \
    --port-file "$round_dir/worker$1.port" --heartbeat-interval-ms 200 --buffer-elements 16 \
    --log-level warn >>"$round_dir/worker$1.log" 2>&1 &
  worker_pid[$1]=$!
  pids+=("${worker_pid[$1]}")
  wait_for_file "$round_dir/worker$1.port" "$round_dir/worker$1.log"
}

passed=0
for round in $(seq 1 "$rounds"); do
  round_dir="$run_dir/round$round"
  mkdir -p "$round_dir"
  start_dispatcher 0 || exit 2
  dispatcher_port=$(cat "$round_dir/dispatcher.port")
  start_worker 0 0 || exit 2
  start_worker 1 0 || exit 2
  printf 'pipeline:\n  - range: %d\n  - distribute: {processing_mode: distributed_epoch, exactly_once: %s}\n' \
    "$elements" "$exactly_once" >"$round_dir/pipeline.yaml"
  timeout 180 "$sluice" read "$round_dir/pipeline.yaml" --service "grpc://127.0.0.1:$dispatcher_port" \
    --processing-mode distributed_epoch >"$round_dir/out" 2>"$round_dir/read.err" &
  reader=$!

  # A random moment within the first 0.6 s (a read of 100000 takes about
  # a second on a 2-core machine), a random victim.
  sleep "0.$((RANDOM % 6))$((RANDOM % 10))"
  victim=$((RANDOM % 3))
  if [ "$victim" -eq 0 ]; then
    what="dispatcher"
    kill -KILL "$dispatcher_pid"
    wait "$dispatcher_pid" 2>/dev/null
    sleep "0.$((RANDOM % 5))"
    start_dispatcher "$dispatcher_port" || exit 2
  else
    index=$((victim - 1))
    what="worker$index"
    port=$(cat "$round_dir/worker$index.port")
    kill -KILL "${worker_pid[$index]}"
    wait "${worker_pid[$index]}" 2>/dev/null
    sleep "0.$((RANDOM % 5))"
    start_worker "$index" "$port" || exit 2
  fi
  killed_at=$(wc -l <"$round_dir/out")

  wait "$reader"
  reader_status=$?
  stop_all
  lines=$(wc -l <"$round_dir/out")
  distinct=$(sort -n -u "$round_dir/out" | wc -l)
  expected_sum=$((elements * (elements - 1) / 2))
  distinct_sum=$(sort -n -u "$round_dir/out" | awk '{s += $1} END {printf "%.0f", s}')
  verdict="FAIL"
  if [ "$reader_status" -eq 0 ] && [ "$distinct" -eq "$elements" ] && [ "$distinct_sum" -eq "$expected_sum" ]; then
    # The dispatcher's journal keeps every split's lease: no duplicates;
    # exactly_once drops those a worker's loss would cause.
    if { [ "$what" != "dispatcher" ] && [ "$exactly_once" = false ]; } || [ "$lines" -eq "$elements" ]; then
      verdict="pass"
      passed=$((passed + 1))
    fi
  fi
  echo "round $round: killed $what after $killed_at elements read; read $lines elements," \
    "$distinct distinct, $((lines - distinct)) repeated; reader exit $reader_status: $verdict"
  if [ "$verdict" = "FAIL" ]; then
    sed 's/^/  read: /' "$round_dir/read.err" | tail -5
    cp -r "$round_dir" "${TMPDIR:-/tmp}/sluice-chaos-failed-round$round" 2>/dev/null &&
      echo "  logs kept in ${TMPDIR:-/tmp}/sluice-chaos-failed-round$round"
  fi
done
echo "chaos: $passed of $rounds rounds passed ($elements elements each, exactly_once $exactly_once)"
[ "$passed" -eq "$rounds" ]
