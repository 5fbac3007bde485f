#!/usr/bin/env bash
# Installs what is missing, builds, and trains the embedded default job: a small GPT-2 on a
# synthetic corpus holmes-train generates itself. Extra arguments go to holmes-train, e.g.
#   scripts/run.sh --set train.steps=100
#   scripts/run.sh --config configs/default.yaml --print-config
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build holmes-train  # only what runs: the tests build in scripts/test.sh
exec build/holmes-train "$@"
