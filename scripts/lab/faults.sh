#!/usr/bin/env bash
# Runs one case of a lab scenario without and with the scenario's faults (docs/lab.md
# "Faults"): goodput, time to detect and to recover, tokens lost, final validation loss.
#   scripts/lab/faults.sh SCENARIO.yaml CASE [--out DIR] [--recovery relaunch|elastic|replan] [--set KEY=VALUE]...
# Needs root, iproute2 and a built holmes-train (build/holmes-train, or HOLMES_BIN). The
# signals as in run.sh.
exec env --default-signal=INT --block-signal=INT,TERM /usr/bin/python3 "$(dirname "$0")/lab.py" faults "$@"
