#!/usr/bin/env bash
# Installs the Debian packages holmes-train needs (idempotent: nothing happens when they are
# all present) and builds it: Release, two jobs, CUDA backend when the toolkit is found.
#   scripts/setup.sh [BUILD_DIR]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

packages=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev libcli11-dev libfmt-dev catch2 libgloo-dev libopenblas-openmp-dev
  python3 python3-torch python3-numpy   # golden and export tests compare against PyTorch
  iproute2 procps                        # network-namespace tests, process inspection
  python3-yaml                           # scripts/lab reads scenario files
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOLMES_CUDA="${HOLMES_CUDA:-AUTO}"
cmake --build "$build" -j "${HOLMES_JOBS:-2}"
