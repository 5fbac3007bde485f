#!/usr/bin/env bash
# Runs one case of a lab scenario on an emulated cluster of network namespaces and tears it
# down (also on Ctrl-C or failure). docs/lab.md.
#   scripts/lab/run.sh SCENARIO.yaml CASE [--out DIR] [--no-calibrate]
# CASE: holmes | megatron | naive | fast | slow. Needs root, iproute2 and a built holmes-train
# (build/holmes-train, or HOLMES_BIN).
# SIGINT back to its default (a shell starts background jobs with it ignored, and a Ctrl-C
# ignored then is lost) and both stop signals blocked until lab.py has its handlers: one
# that arrives while Python starts waits for them (unblocked, it would stop Python inside its
# own start-up, "Fatal Python error", exit 1).
exec env --default-signal=INT --block-signal=INT,TERM /usr/bin/python3 "$(dirname "$0")/lab.py" run "$@"
