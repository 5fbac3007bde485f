#!/usr/bin/env bash
# Runs every case of a lab scenario alternately (A B C ... A B C ...), predicts each case's
# step time with a calibration measured in the other cases, checks that all cases train to
# bit-identical losses, and ends with the one-line summary. docs/lab.md.
#   scripts/lab/bench.sh SCENARIO.yaml [--rounds N] [--out DIR]
# Builds holmes-train first (scripts/setup.sh) unless HOLMES_BIN names one. Needs root.
set -euo pipefail
here=$(dirname "$0")
if [ -z "${HOLMES_BIN:-}" ]; then
  "$here/../setup.sh" build holmes-train >/dev/null
fi
# SIGINT back to its default, the stop signals held until lab.py has its handlers (see run.sh).
exec env --default-signal=INT --block-signal=INT,TERM /usr/bin/python3 "$here/lab.py" bench "$@"
