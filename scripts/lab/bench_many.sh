#!/usr/bin/env bash
# Benches several lab scenarios in a row (each as bench.sh does: every case alternately, each
# predicted from the other cases' calibrations), then prints one row per scenario and the line
#   lab-many: scenarios K, holmes/megatron min X median Y, holmes/naive min X, prediction error median P% max Q%
# docs/lab.md. Generate scenarios with scripts/lab/gen.py.
#   scripts/lab/bench_many.sh SCENARIO.yaml... [--rounds N] [--out DIR] [--budget-s S]
# Builds holmes-train first (scripts/setup.sh) unless HOLMES_BIN names one. Needs root.
set -euo pipefail
here=$(dirname "$0")
if [ -z "${HOLMES_BIN:-}" ]; then
  "$here/../setup.sh" build holmes-train >/dev/null
fi
# SIGINT back to its default, the stop signals held until lab.py has its handlers (see run.sh).
exec env --default-signal=INT --block-signal=INT,TERM /usr/bin/python3 "$here/lab.py" bench-many "$@"
