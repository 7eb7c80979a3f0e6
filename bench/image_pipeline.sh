#!/usr/bin/env bash
# image_pipeline.sh: the ImageNet-style training input pipeline, side by side on
# the same cores in one go:
#   torchvision   ImageFolder + RandomResizedCrop + flip + normalize, DataLoader
#                 (bench/torchvision_baseline.py), the baseline
#   decode        bench/decode_baseline.cc: bare libjpeg-turbo decode, 1 thread
#                 and --workers threads, the physical reference
#   sluice-*      the same pipeline in Sluice: in-process fused ops (local),
#                 separate decode and crop ops (unfused), and through a local
#                 dispatcherd + workerd (service)
# and prints a table of images/s and the ratio to torchvision. A variant that
# fails is reported as "FAILED (see log)" and the run goes on.
#
#   bench/image_pipeline.sh [--images 2000] [--seconds 10] [--workers 2] ...
#   bench/image_pipeline.sh --help
#
# Run from the repository root (or set BUILD). Every step runs in its own
# process group under a time limit; the whole run is bounded by --time-limit,
# and on exit or Ctrl-C every process it started is killed.

set -euo pipefail

usage() {
  cat <<EOF
usage: $0 [options]
  --data-dir DIR     image folder cache (env SLUICE_IMAGE_DIR;
                     default \${TMPDIR:-/tmp}/sluice-imagenet-like); made once,
                     remade when --images/--classes differ
  --images N         images in the folder (default 2000)
  --classes N        classes (default 10)
  --workers N        DataLoader workers, Sluice num_parallel_calls, decode
                     threads (default 2)
  --seconds S        seconds per Sluice and decode run (default 10)
  --epochs N         torchvision timed epochs (default 1)
  --time-limit S     bound on the whole run, in seconds (default 1200)
  --variants LIST    comma-separated subset of
                     torchvision,decode,local,unfused,service,service_u8,
                     service_once
                     (default: all)
  --cpus LIST        run everything pinned to these cores (taskset -c LIST)
env: BUILD (default build), SLUICE (default \$BUILD/cli/sluice),
     PYTHON (default /usr/bin/python3), CXX (default g++)
EOF
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DATA_DIR=${SLUICE_IMAGE_DIR:-${TMPDIR:-/tmp}/sluice-imagenet-like}
IMAGES=2000
CLASSES=10
WORKERS=2
SECONDS_PER_RUN=10
EPOCHS=1
TIME_LIMIT=1200
VARIANTS=torchvision,decode,local,unfused,service,service_u8,service_once
CPUS=
BUILD=${BUILD:-build}
SLUICE=${SLUICE:-$BUILD/cli/sluice}
PYTHON=${PYTHON:-/usr/bin/python3}
CXX=${CXX:-g++}

ORIG_ARGS=("$@")
while (($#)); do
  case $1 in
    --data-dir) DATA_DIR=$2; shift 2 ;;
    --images) IMAGES=$2; shift 2 ;;
    --classes) CLASSES=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --time-limit) TIME_LIMIT=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
for n in IMAGES CLASSES WORKERS EPOCHS TIME_LIMIT; do
  [[ ${!n} =~ ^[0-9]+$ ]] || { echo "$n must be a whole number, got '${!n}'" >&2; exit 2; }
done
[[ $SECONDS_PER_RUN =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "--seconds must be a number" >&2; exit 2; }

# Pin by re-running this script under taskset: every child inherits the cores.
if [[ -n $CPUS && -z ${IMAGE_PIPELINE_PINNED:-} ]]; then
  IMAGE_PIPELINE_PINNED=1 exec taskset -c "$CPUS" "$0" "${ORIG_ARGS[@]}"
fi

# Logs and pipeline files stay after the run, for "see log".
RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sluice-image-pipeline.XXXXXX")
SECONDS=0  # bash counts up from here; the time limit is against it

# ---- process control -------------------------------------------------------

# Process groups started in the background (each job is its own group, so
# killing the group takes its children too: DataLoader workers, daemons).
GROUPS_STARTED=()

kill_group() {  # pgid
  kill -TERM -- "-$1" 2>/dev/null || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    kill -0 -- "-$1" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL -- "-$1" 2>/dev/null || true
}

cleanup() {
  local g
  for g in ${GROUPS_STARTED[@]+"${GROUPS_STARTED[@]}"}; do kill_group "$g"; done
  GROUPS_STARTED=()
}
trap cleanup EXIT
trap 'echo "interrupted; stopping children" >&2; exit 130' INT TERM HUP

# start_group LOG CMD...: runs CMD (a command or shell function) in the
# background, in a new process group, output to LOG; sets STARTED_PID.
start_group() {
  local log=$1
  shift
  set -m  # only so that the job gets its own process group
  "$@" </dev/null >"$log" 2>&1 &
  STARTED_PID=$!
  set +m
  GROUPS_STARTED+=("$STARTED_PID")
}

forget_group() {
  local g kept=()
  for g in ${GROUPS_STARTED[@]+"${GROUPS_STARTED[@]}"}; do [[ $g == "$1" ]] || kept+=("$g"); done
  GROUPS_STARTED=(${kept[@]+"${kept[@]}"})
}

# run_bounded NAME LIMIT CMD...: runs CMD with output to $RUN_DIR/NAME.log for
# at most LIMIT seconds (less if the run's time limit comes first); returns
# its exit status, 124 when it was stopped for time.
run_bounded() {
  local name=$1 limit=$2
  shift 2
  local log=$RUN_DIR/$name.log left=$((TIME_LIMIT - SECONDS))
  if ((left <= 0)); then
    echo "skipped: the run's time limit (${TIME_LIMIT}s) is spent" >"$log"
    return 124
  fi
  ((limit <= left)) || limit=$left
  start_group "$log" "$@"
  local pid=$STARTED_PID deadline=$((SECONDS + limit)) rc=0 timed_out=
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      timed_out=1
      kill_group "$pid"
      echo "image_pipeline.sh: stopped after ${limit}s" >>"$log"
      break
    fi
    sleep 0.25
  done
  wait "$pid" || rc=$?
  forget_group "$pid"
  [[ -z $timed_out ]] || rc=124
  return "$rc"
}

# ---- results ---------------------------------------------------------------

NAMES=()
RATES=()  # images/s, or empty for a failed variant
LOGS=()
BASELINE=

record() {  # name rate-or-empty log
  NAMES+=("$1")
  RATES+=("$2")
  LOGS+=("$3")
  if [[ -n $2 ]]; then
    echo "  $1: $2 images/s"
  else
    echo "  $1: FAILED (see $3)" >&2
    tail -n 3 "$3" | sed 's/^/    | /' >&2 || true
  fi
}

# The last "elements: N (R elements/s)" of a sluice bench log; elements are
# rows (images) once batched. Empty when missing or zero.
sluice_rate() {
  tr '\r' '\n' <"$1" | sed -n 's/^elements: *[0-9]* (\([0-9.]*\) elements\/s).*/\1/p' | tail -n 1 |
    awk '$1 > 0 { print $1 }'
}

wanted() { [[ ,$VARIANTS, == *,$1,* ]]; }

# ---- Sluice variants ---------------------------------------------------------
# Each function writes its pipeline to $RUN_DIR and runs `sluice bench` on it;
# the harness runs it in the background with a time limit and parses the
# "elements: N (R elements/s)" line. Like the torchvision baseline, each
# reads one epoch of the folder (or stops after --seconds), start-up included.

# Writes $RUN_DIR/NAME.yaml: the folder (files shuffled), the DECODE steps (YAML
# lines), a random flip, normalize to CHW float32, batches of 64, then the
# TAIL lines; and runs `sluice bench` on it. Every step that costs CPU runs
# on $WORKERS threads (torchvision's side gets $WORKERS worker processes).
bench_pipeline() {
  local name=$1 decode=$2 tail=${3:-} normalize_in=${4:-pipeline}
  local pipeline=$RUN_DIR/$name.yaml
  local normalize="  - map: {fn: normalize, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float32, layout: CHW, num_parallel_calls: $WORKERS}"
  {
    echo "pipeline:"
    # The file order shuffled, as DataLoader(shuffle=True) shuffles indices.
    echo "  - image_folder: {root: \"$DATA_DIR\", shuffle: true, seed: 1}"
    echo "  - prefetch: 16"
    echo "$decode"
    echo "  - map: {fn: random_flip_left_right, num_parallel_calls: $WORKERS}"
    [[ $normalize_in == pipeline ]] && echo "$normalize"
    echo "  - batch: {batch_size: 64, num_parallel_calls: $WORKERS}"
    echo "  - prefetch: 2"
    [[ -n $tail ]] && echo "$tail"
    if [[ $normalize_in == reader ]]; then
      echo "$normalize"
      echo "  - prefetch: 2"
    fi
  } >"$pipeline"
  "$SLUICE" bench "$pipeline" --seconds "$SECONDS_PER_RUN"
}

FUSED="  - map: {fn: decode_and_random_crop, size: [224, 224], num_parallel_calls: $WORKERS}"

run_sluice_local() { bench_pipeline local "$FUSED"; }

# Decode whole, then RandomResizedCrop's window and the resize (scale and
# ratio default to torchvision's).
run_sluice_unfused() {
  bench_pipeline unfused "  - map: {fn: decode_image, channels: 3, num_parallel_calls: $WORKERS}
  - map: {fn: random_resized_crop, size: [224, 224], num_parallel_calls: $WORKERS}"
}

# Needs a dispatcher at 127.0.0.1:$SERVICE_PORT with a worker (start_service).
# `distribute` after the batch: the worker does all the image work and sends
# finished batches; the reading process only receives them.
run_sluice_service() {
  bench_pipeline service "$FUSED" \
    "  - distribute: {processing_mode: distributed_epoch, service: \"grpc://127.0.0.1:$SERVICE_PORT\"}"
}

# The same, but the worker sends uint8 crops and the reading process runs
# normalize (once per batch) after `distribute`: a quarter of the bytes
# cross the connection, for about 1.3 ms of the reader's CPU per batch of 64.
# The same transforms on the same cores; only where normalize runs differs.
run_sluice_service_u8() {
  bench_pipeline service_u8 "$FUSED" \
    "  - distribute: {processing_mode: distributed_epoch, service: \"grpc://127.0.0.1:$SERVICE_PORT\"}" reader
}

# The service variant read exactly once (and so savable): the worker runs its
# pipeline once per split, each split one batch of 64 files.
run_sluice_service_once() {
  bench_pipeline service_once "$FUSED" \
    "  - distribute: {processing_mode: distributed_epoch, service: \"grpc://127.0.0.1:$SERVICE_PORT\", exactly_once: true}"
}

# ---- service daemons -------------------------------------------------------

SERVICE_PORT=

wait_port_file() {  # file pid log: prints the port, or fails after 20 s
  local i
  for ((i = 0; i < 100; i++)); do
    if [[ -s $1 ]]; then cat "$1"; return 0; fi
    kill -0 "$2" 2>/dev/null || { echo "exited before writing $1" >>"$3"; return 1; }
    sleep 0.2
  done
  echo "no port file $1 after 20 s" >>"$3"
  return 1
}

# Starts dispatcherd and one workerd from $BUILD on 127.0.0.1; they are killed
# with the other process groups on exit (or by stop_service).
DAEMONS=()
start_service() {
  local log=$RUN_DIR/service-daemons.log
  : >"$log"
  rm -f "$RUN_DIR/dispatcher.port" "$RUN_DIR/worker.port"  # a previous variant's
  local d=$BUILD/dispatcher/dispatcherd w=$BUILD/worker/workerd
  for b in "$d" "$w"; do
    [[ -x $b ]] || { echo "missing $b (build it first)" >>"$log"; return 1; }
  done
  start_group "$RUN_DIR/dispatcherd.log" "$d" --port 0 --port-file "$RUN_DIR/dispatcher.port" \
    --bind-address 127.0.0.1 --log-level warn
  DAEMONS+=("$STARTED_PID")
  SERVICE_PORT=$(wait_port_file "$RUN_DIR/dispatcher.port" "$STARTED_PID" "$log") || return 1
  start_group "$RUN_DIR/workerd.log" "$w" --dispatcher "127.0.0.1:$SERVICE_PORT" --port 0 \
    --port-file "$RUN_DIR/worker.port" --bind-address 127.0.0.1 --heartbeat-interval-ms 100 --log-level warn
  DAEMONS+=("$STARTED_PID")
  wait_port_file "$RUN_DIR/worker.port" "$STARTED_PID" "$log" >/dev/null || return 1
  sleep 0.5  # a heartbeat or two: the worker is registered before the job starts
  echo "dispatcher 127.0.0.1:$SERVICE_PORT, worker 127.0.0.1:$(cat "$RUN_DIR/worker.port")" >>"$log"
}

stop_service() {  # the worker first, so that it can say goodbye to the dispatcher
  local i
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    kill_group "${DAEMONS[$i]}"
    forget_group "${DAEMONS[$i]}"
  done
  DAEMONS=()
}

# ---- the run ---------------------------------------------------------------

echo "run dir (logs, pipelines): $RUN_DIR"
echo "cores: $(nproc) available${CPUS:+ (pinned to $CPUS)}; workers $WORKERS; time limit ${TIME_LIMIT}s"

# (a) The image folder; nothing to compare without it.
echo "== image folder: $DATA_DIR ($IMAGES images, $CLASSES classes)"
if ! run_bounded make-image-folder 600 "$PYTHON" "$HERE/make_image_folder.py" \
  --out "$DATA_DIR" --images "$IMAGES" --classes "$CLASSES"; then
  echo "making the image folder failed (see $RUN_DIR/make-image-folder.log):" >&2
  tail -n 5 "$RUN_DIR/make-image-folder.log" >&2
  exit 1
fi
sed 's/^/  /' "$RUN_DIR/make-image-folder.log"

# (b) torchvision.
if wanted torchvision; then
  echo "== torchvision (${EPOCHS} epoch(s), $WORKERS workers)"
  log=$RUN_DIR/torchvision.log
  run_bounded torchvision 900 "$PYTHON" "$HERE/torchvision_baseline.py" "$DATA_DIR" \
    --workers "$WORKERS" --epochs "$EPOCHS" || true
  BASELINE=$(sed -n 's/^torchvision images\/s: \([0-9.]*\) .*/\1/p' "$log" | tail -n 1)
  record torchvision "$BASELINE" "$log"
fi

# (c) Bare decode, 1 thread and $WORKERS threads.
if wanted decode; then
  echo "== decode baseline (${SECONDS_PER_RUN}s each)"
  bin=$RUN_DIR/decode_baseline
  if run_bounded decode-compile 300 "$CXX" -std=c++20 -O2 "$HERE/decode_baseline.cc" -ljpeg -lpthread -o "$bin"; then
    threads=(1)
    ((WORKERS == 1)) || threads+=("$WORKERS")
    for t in "${threads[@]}"; do
      log=$RUN_DIR/decode-$t.log
      run_bounded "decode-$t" $((${SECONDS_PER_RUN%.*} + 120)) "$bin" "$DATA_DIR" \
        --seconds "$SECONDS_PER_RUN" --threads "$t" || true
      record "decode, $t thread(s) (reference)" \
        "$(sed -n 's/^decode images\/s ([0-9]* threads*): \([0-9.]*\) .*/\1/p' "$log" | tail -n 1)" "$log"
    done
  else
    record "decode (reference)" "" "$RUN_DIR/decode-compile.log"
  fi
fi

# (d) Sluice.
sluice_limit=$((${SECONDS_PER_RUN%.*} + 60))  # the run plus start-up and file listing
for v in local unfused service service_u8 service_once; do
  wanted "$v" || continue
  echo "== sluice-$v (${SECONDS_PER_RUN}s)"
  log=$RUN_DIR/sluice-$v.log
  if [[ ! -x $SLUICE ]]; then
    echo "missing $SLUICE (build it first, or set SLUICE)" >"$log"
    record "sluice-$v" "" "$log"
    continue
  fi
  if ((SECONDS >= TIME_LIMIT)); then
    echo "skipped: the run's time limit (${TIME_LIMIT}s) is spent" >"$log"
    record "sluice-$v" "" "$log"
    continue
  fi
  if [[ $v == service* ]] && ! start_service; then
    cp "$RUN_DIR/service-daemons.log" "$log"
    record "sluice-$v" "" "$log"
    stop_service
    continue
  fi
  run_bounded "sluice-$v" "$sluice_limit" "run_sluice_$v" || true
  [[ $v == service* ]] && stop_service
  record "sluice-$v" "$(sluice_rate "$log")" "$log"
  # Start-up (through the service: a job, its task, the first batch's
  # transfer) is part of an epoch's time; shown to tell it from the pace.
  first=$(tr '\r' '\n' <"$log" | sed -n 's/^first: *\([0-9.]*\) s.*/\1/p' | tail -n 1)
  if [[ -n $first ]]; then echo "    first batch after $first s"; fi
done

# ---- table -----------------------------------------------------------------

echo
echo "$IMAGES images ($DATA_DIR), $WORKERS workers, $(nproc) cores; total ${SECONDS}s"
printf '%-34s %-18s %s\n' variant images/s "vs torchvision"
for i in "${!NAMES[@]}"; do
  rate=${RATES[$i]}
  if [[ -z $rate ]]; then
    printf '%-34s %-18s %s\n' "${NAMES[$i]}" "FAILED (see log)" "${LOGS[$i]}"
    continue
  fi
  ratio=-
  [[ -z $BASELINE ]] || ratio=$(awk -v r="$rate" -v b="$BASELINE" 'BEGIN { printf "%.2fx", r / b }')
  printf '%-34s %-18s %s\n' "${NAMES[$i]}" "$(awk -v r="$rate" 'BEGIN { printf "%.1f", r }')" "$ratio"
done
