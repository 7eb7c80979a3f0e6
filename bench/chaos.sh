#!/usr/bin/env bash
# Chaos rounds: for each round, a dispatcher (with a work dir) and two
# workers serve range(N) to `sluice read` in distributed_epoch mode; at a
# random moment a random daemon is killed with SIGKILL and started again
# (same port, same work dir). The round passes when the reader exits 0 and
# its output holds every element: exactly once when the dispatcher was the
# victim, at least once when a worker was. Stops by itself; only
# 127.0.0.1.
#
#   bash bench/chaos.sh BUILD_DIR [ROUNDS] [ELEMENTS] [exactly_once|restore_reader|deterministic]
#
# With exactly_once, the job uses that option and every round must read
# each element exactly once, whichever daemon was killed. restore_reader
# does too, and the reader saves its state every 1000 elements
# (--save-state --save-every); after the daemon's kill it is killed with
# SIGKILL at a random moment as well, and a new reader resumes from its
# last state (--restore): the elements the first printed up to that state,
# then the second's, must be each element exactly once. deterministic does
# what restore_reader does with `deterministic: true`, and the elements
# must come in order: exactly 0, 1, ..., N-1.
#
# Prints one line per round and a summary; exits 1 if any round failed.
set -uo pipefail

build=${1:?usage: chaos.sh BUILD_DIR [ROUNDS] [ELEMENTS]}
rounds=${2:-20}
elements=${3:-100000}
exactly_once=false
restore_reader=false
deterministic=false
[ "${4:-}" = "exactly_once" ] && exactly_once=true
[ "${4:-}" = "restore_reader" ] && exactly_once=true && restore_reader=true
[ "${4:-}" = "deterministic" ] && exactly_once=true && restore_reader=true && deterministic=true
save_every=1000
dispatcherd="$build/dispatcher/dispatcherd"
workerd="$build/worker/workerd"
sluice="$build/cli/sluice"
for binary in "$dispatcherd" "$workerd" "$sluice"; do
  [ -x "$binary" ] || { echo "chaos: $binary is missing; build first" >&2; exit 2; }
done

source "$(dirname "$0")/daemons.sh"
run_dir=$(mktemp -d)
trap 'stop_all; rm -rf "$run_dir"' EXIT
seq 0 $((elements - 1)) >"$run_dir/expected"

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
  printf 'pipeline:\n  - range: %d\n  - distribute: {processing_mode: distributed_epoch, exactly_once: %s, deterministic: %s}\n' \
    "$elements" "$exactly_once" "$deterministic" >"$round_dir/pipeline.yaml"
  read_flags=()
  $restore_reader && read_flags=(--save-state "$round_dir/state" --save-every "$save_every")
  timeout 180 "$sluice" read "$round_dir/pipeline.yaml" --service "grpc://127.0.0.1:$dispatcher_port" \
    --processing-mode distributed_epoch "${read_flags[@]}" >"$round_dir/out" 2>"$round_dir/read.err" &
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
  story="killed $what after $killed_at elements read"

  if $restore_reader; then
    # The reader too, at a random moment, then a new one from its state.
    sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
    # `timeout` runs the reader as its child: kill the reader itself.
    pkill -KILL -P "$reader" 2>/dev/null
    kill -KILL "$reader" 2>/dev/null
    wait "$reader" 2>/dev/null
    printed=$(wc -l <"$round_dir/out")
    story="$story, then the reader after $printed lines"
    if [ -s "$round_dir/state" ]; then restore_flags=(--restore "$round_dir/state"); else restore_flags=(); fi
    timeout 180 "$sluice" read "$round_dir/pipeline.yaml" --service "grpc://127.0.0.1:$dispatcher_port" \
      --processing-mode distributed_epoch "${restore_flags[@]}" >"$round_dir/out2" 2>>"$round_dir/read.err" &
    reader=$!
  fi

  wait "$reader"
  reader_status=$?
  stop_all
  if $restore_reader; then
    # The state is as of the last multiple of save_every saved: the last
    # one printed, or the one before when the kill fell between a line
    # and its save (or none yet). The round passes with either.
    last=$((printed / save_every * save_every))
    for saved in "$last" $((last - save_every)) 0; do
      [ "$saved" -ge 0 ] || continue
      { head -n "$saved" "$round_dir/out"; cat "$round_dir/out2"; } >"$round_dir/combined"
      if $deterministic; then
        cmp -s "$round_dir/combined" "$run_dir/expected" && break
        continue
      fi
      [ "$(sort -n -u "$round_dir/combined" | wc -l)" -eq "$elements" ] &&
        [ "$(wc -l <"$round_dir/combined")" -eq "$elements" ] && break
    done
    result="$round_dir/combined"
  else
    result="$round_dir/out"
  fi
  lines=$(wc -l <"$result")
  distinct=$(sort -n -u "$result" | wc -l)
  expected_sum=$((elements * (elements - 1) / 2))
  distinct_sum=$(sort -n -u "$result" | awk '{s += $1} END {printf "%.0f", s}')
  verdict="FAIL"
  if [ "$reader_status" -eq 0 ] && [ "$distinct" -eq "$elements" ] && [ "$distinct_sum" -eq "$expected_sum" ]; then
    # The dispatcher's journal keeps every split's lease: no duplicates;
    # exactly_once drops those a worker's loss would cause.
    if $deterministic && ! cmp -s "$result" "$run_dir/expected"; then
      story="$story; OUT OF ORDER"
    elif { [ "$what" != "dispatcher" ] && [ "$exactly_once" = false ]; } || [ "$lines" -eq "$elements" ]; then
      verdict="pass"
      passed=$((passed + 1))
    fi
  fi
  echo "round $round: $story; read $lines elements," \
    "$distinct distinct, $((lines - distinct)) repeated; reader exit $reader_status: $verdict"
  if [ "$verdict" = "FAIL" ]; then
    sed 's/^/  read: /' "$round_dir/read.err" | tail -5
    cp -r "$round_dir" "${TMPDIR:-/tmp}/sluice-chaos-failed-round$round" 2>/dev/null &&
      echo "  logs kept in ${TMPDIR:-/tmp}/sluice-chaos-failed-round$round"
  fi
done
echo "chaos: $passed of $rounds rounds passed ($elements elements each, exactly_once $exactly_once," \
  "restore_reader $restore_reader, deterministic $deterministic)"
[ "$passed" -eq "$rounds" ]
