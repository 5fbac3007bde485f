#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite with ctest (unit tests of
# every folder, integration tests that drive the binary). Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit          scripts/test.sh -R bad_specs
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure -j "${HOLMES_JOBS:-2}" --timeout 900 "$@"
