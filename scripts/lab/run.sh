#!/usr/bin/env bash
# Runs one case of a lab scenario on an emulated cluster of network namespaces and tears it
# down (also on Ctrl-C or failure). docs/lab.md.
#   scripts/lab/run.sh SCENARIO.yaml CASE [--out DIR] [--no-calibrate]
# CASE: holmes | megatron | naive | fast | slow. Needs root, iproute2 and a built holmes-train
# (build/holmes-train, or HOLMES_BIN).
# SIGINT back to its default before Python starts: a shell starts background jobs with it
# ignored, and a Ctrl-C ignored then would be lost before lab.py installs its handler.
exec env --default-signal=INT /usr/bin/python3 "$(dirname "$0")/lab.py" run "$@"
