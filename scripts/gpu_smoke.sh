#!/usr/bin/env bash
# GPU smoke test, for a machine WITH an NVIDIA GPU: builds the CUDA backend (HOLMES_CUDA=ON),
# runs the CUDA unit tests and fails if any of them skipped (on a GPU machine a skip means the
# runtime did not see the GPU), then prints GEMM throughput. CPU-only machines use scripts/test.sh.
#
#   scripts/gpu_smoke.sh [build-dir]        default build dir: build-gpu
# Env: HOLMES_JOBS (build jobs, default: all cores), HOLMES_CUDA_ARCHITECTURES (default 90).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
jobs=${HOLMES_JOBS:-$(nproc)}
archs=${HOLMES_CUDA_ARCHITECTURES:-90}

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || true
else
  echo "gpu_smoke: nvidia-smi not found; the tests below will tell whether a GPU is usable"
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DHOLMES_CUDA=ON \
  -DHOLMES_CUDA_ARCHITECTURES="$archs"
cmake --build "$build" -j "$jobs" --target test_cuda holmes_gemm_bench holmes-train

log=$(mktemp)
trap 'rm -f "$log"' EXIT
ctest --test-dir "$build" -L cuda --output-on-failure --timeout 300 | tee "$log"
if grep -q "(Skipped)" "$log"; then
  echo "gpu_smoke: FAILED: CUDA tests were skipped, so no GPU was usable" >&2
  exit 1
fi

# The binary must not need libcuda at load time (it still starts on CPU-only nodes).
if ldd "$build/holmes-train" | grep -q "libcuda\.so"; then
  echo "gpu_smoke: FAILED: holmes-train links libcuda.so directly" >&2
  exit 1
fi

"$build/cuda/holmes_gemm_bench" "${HOLMES_BENCH_BT:-8192}" "${HOLMES_BENCH_C:-768}" 50
echo "gpu_smoke: OK"
