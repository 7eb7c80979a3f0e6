#!/usr/bin/env bash
# The main job: installs dependencies, builds Sluice and runs the sample
# pipeline in config/pipelines/demo.yaml locally with `sluice run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh
echo "== sluice inspect config/pipelines/demo.yaml"
build/cli/sluice inspect config/pipelines/demo.yaml
echo "== sluice run config/pipelines/demo.yaml"
build/cli/sluice run config/pipelines/demo.yaml
