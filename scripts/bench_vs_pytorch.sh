#!/usr/bin/env bash
# Times holmes' CPU training step against PyTorch's on the same machine, same shapes, same
# thread count, fp32: forward + backward + grad-norm clip + AdamW. Prints tokens/s of both,
# the ratio and peak RSS. A benchmark, not a test: numbers depend on the machine and load.
# Usage: scripts/bench_vs_pytorch.sh [BUILD_DIR] [STEPS]
#   BUILD_DIR holds test/golden/holmes-model-bench (default: build); STEPS timed (default 5).
# Env: BENCH_THREADS (default: all cores) for both OpenMP and torch.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
steps=${2:-5}
bench=$build/test/golden/holmes-model-bench
if [ ! -x "$bench" ]; then
  echo "bench_vs_pytorch: $bench not found; build it: cmake --build $build --target holmes-model-bench" >&2
  exit 2
fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "bench_vs_pytorch: /usr/bin/python3 cannot import torch (apt install python3-torch)" >&2
  exit 2
fi
threads=${BENCH_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads BENCH_THREADS=$threads

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

run_shape() {  # name L C NH V B T
  local name=$1; shift
  local h t core
  h=$("$bench" "$@" "$steps" 1)
  # PyTorch runs on the same OpenBLAS; give it the core holmes uses so only the code differs.
  core=$(sed -n 's/^holmes: openblas core \([A-Za-z0-9]*\).*/\1/p' <<<"$h" | tr a-z A-Z)
  t=$(OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$core} /usr/bin/python3 "$src/test/golden/bench_torch.py" "$@" "$steps" 1)
  local ht tt
  ht=$(field tokens_per_s "$h"); tt=$(field tokens_per_s "$t")
  printf '%-22s holmes %8.1f tok/s %7.0f MB | torch %8.1f tok/s %7.0f MB | ratio %.2fx  (openblas %s, %s threads)\n' \
    "$name" "$ht" "$(field peak_rss_mb "$h")" "$tt" "$(field peak_rss_mb "$t")" \
    "$(awk -v a="$ht" -v b="$tt" 'BEGIN { print a / b }')" "${OPENBLAS_CORETYPE:-$core}" "$threads"
}

echo "bench_vs_pytorch: $steps timed steps after 1 warm-up, fp32, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
run_shape "gpt2-124M B=4 T=64" 12 768 12 50257 4 64
run_shape "small L=4 C=128 B=8" 4 128 4 50257 8 64
