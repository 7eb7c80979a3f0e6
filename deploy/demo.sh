#!/usr/bin/env bash
# The main job: installs dependencies, builds Sluice, runs a sample pipeline
# locally with `sluice run`, then starts a local dispatcher and two workers
# on 127.0.0.1 and serves a pipeline to `sluice read`, then the ImageNet
# training pipeline on a small folder of generated JPEGs, and the
# language-model pipeline on a generated corpus with a tokenizer it trains.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)" --target sluice dispatcherd workerd

echo "== sluice run config/pipelines/demo.yaml (local)"
build/cli/sluice run config/pipelines/demo.yaml

run_dir=$(mktemp -d)
pids=()
# Workers leave first, so that each can tell the dispatcher it is going.
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
  rm -rf "$run_dir"
}
trap cleanup EXIT

wait_for_file() {
  for _ in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "demo: timed out waiting for $1" >&2
  return 1
}

build/dispatcher/dispatcherd --port 0 --bind-address 127.0.0.1 --port-file "$run_dir/dispatcher.port" \
  --log-level warn &
pids+=($!)
wait_for_file "$run_dir/dispatcher.port"
port=$(cat "$run_dir/dispatcher.port")
for i in 1 2; do
  build/worker/workerd --dispatcher "127.0.0.1:$port" --port 0 --bind-address 127.0.0.1 \
    --port-file "$run_dir/worker$i.port" --log-level warn &
  pids+=($!)
  wait_for_file "$run_dir/worker$i.port"
done
echo "== dispatcher on 127.0.0.1:$port with 2 workers"
echo "== sluice read config/pipelines/service_demo.yaml --service grpc://127.0.0.1:$port"
build/cli/sluice read config/pipelines/service_demo.yaml --service "grpc://127.0.0.1:$port"

echo "== an ImageNet-style pipeline: 96 generated JPEGs in 4 class folders, decoded, cropped,"
echo "   flipped and normalized on the workers; one line per batch (shape, dtype, mean, labels)"
/usr/bin/python3 bench/make_image_folder.py --out "$run_dir/images" --images 96 --classes 4 >/dev/null
cat >"$run_dir/imagenet.yaml" <<'EOF'
pipeline:
  - image_folder: {root: images, shuffle: true, seed: 1}
  - map: {fn: decode_and_random_crop, size: [224, 224], num_parallel_calls: 2}
  - map: {fn: random_flip_left_right}
  - map: {fn: normalize, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], layout: CHW}
  - map: {fn: select, components: [image, label]}
  - batch: 32
  - distribute: {processing_mode: distributed_epoch}
EOF
build/cli/sluice read "$run_dir/imagenet.yaml" --service "grpc://127.0.0.1:$port" --summary

echo "== a language-model pipeline (config/pipelines/lm_pretrain.yaml): 4 generated JSON-lines files,"
echo "   tokenized by a SentencePiece model trained here (spm_train), packed into rows of 512 tokens;"
echo "   one line per batch of 8 rows (tokens, segment_ids, positions)"
/usr/bin/python3 bench/make_text_corpus.py --out "$run_dir/corpus" --files 4 --lines 200 >/dev/null
spm_train --input="$run_dir/corpus/train.txt" --model_prefix="$run_dir/tokenizer" --vocab_size=1000 \
  --model_type=bpe >"$run_dir/spm_train.log" 2>&1
cp config/pipelines/lm_pretrain.yaml "$run_dir/"
build/cli/sluice read "$run_dir/lm_pretrain.yaml" --service "grpc://127.0.0.1:$port" --summary
