#!/usr/bin/env bash
# Runs the test suite (scripts/test.sh) on a loaded machine: HOLMES_HOGS_PER_CORE (default 2)
# busy processes per core compete with it for the whole run, as other jobs do on a shared CI
# host. A test that fails here and not on an idle machine depends on timing, which no test
# may (docs: tests). Extra arguments go to ctest.
#   scripts/test_loaded.sh                 scripts/test_loaded.sh -L integration
set -euo pipefail
cd "$(dirname "$0")/.."
hogs=()
stop_hogs() { for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
n=$(( $(nproc) * ${HOLMES_HOGS_PER_CORE:-2} ))
for _ in $(seq "$n"); do
  nice -n 0 sh -c 'while :; do :; done' &
  hogs+=("$!")
done
echo "test_loaded: $n busy processes on $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
scripts/test.sh "$@"
