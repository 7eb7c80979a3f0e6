#!/usr/bin/env bash
# text_pipeline.sh: tokens per second of json_lines -> tokenize ->
# pack_sequences(2048) -> batch, locally and through the service, beside
# the same work in Python and SentencePiece's encoder alone, in one run
# (bench/text_pipeline.py says what each variant includes). Arguments go to
# text_pipeline.py; the whole run is bounded to 20 minutes.
#
#   bench/text_pipeline.sh [--files 8] [--lines 4000] [--workers 2]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake --build "$BUILD" --target sluice_python tokenize_baseline dispatcherd workerd >/dev/null
export BUILD PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 1200 /usr/bin/python3 bench/text_pipeline.py "$@"
