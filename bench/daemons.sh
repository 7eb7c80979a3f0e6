# Shared by the benchmark scripts that start dispatcherd and workerd as
# background children (chaos.sh, deterministic_order.sh); sourced, not run.
# A script adds each child's pid to `pids` and calls stop_all when done (its
# EXIT trap too).

pids=()

# Kills (SIGKILL) and reaps every child in `pids`.
stop_all() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

# wait_for_file FILE [LOG]: waits up to 30 s for a daemon's port file; on
# time out prints the end of LOG and returns 1.
wait_for_file() {
  for _ in $(seq 1 600); do [ -s "$1" ] && return 0; sleep 0.05; done
  echo "$(basename "$0"): timed out waiting for $1" >&2
  [ -n "${2:-}" ] && tail -5 "$2" >&2
  return 1
}
