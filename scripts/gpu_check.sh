#!/usr/bin/env bash
# The GPU check, in two halves, because the GPU machine reaches no package registry:
#
#   scripts/gpu_check.sh bundle [DIR]   here (no GPU needed): builds the CUDA backend for sm_90
#                                       and gathers holmes-train, test_cuda and the GEMM bench
#                                       with the shared libraries a plain CUDA image lacks into
#                                       DIR (default gpu-bundle/, ignored by git, < 64 MiB)
#   scripts/gpu_check.sh run [DIR]      there (on the GPU machine, DIR carried): every CUDA test
#                                       (a skip is a failure there), the NCCL groups on the one
#                                       GPU (libnccl from the image: 200 MiB, too big to carry),
#                                       the whole-model checks, the
#                                       bench on GPT-2 124M and 350M (B=16, T=1024); a short
#                                       table last; logs under $OUT when set
#
# With the device tool: run `bundle` here, then run(command="scripts/gpu_check.sh run",
# carry=["gpu-bundle"]). Env: HOLMES_JOBS (build jobs), HOLMES_CUDA_ARCHITECTURES (default 90),
# HOLMES_BENCH_STEPS (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
dir=${2:-gpu-bundle}

bundle() {
  local build=build-gpu
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOLMES_CUDA=ON \
    -DHOLMES_CUDA_ARCHITECTURES="${HOLMES_CUDA_ARCHITECTURES:-90}" >/dev/null
  cmake --build "$build" -j "${HOLMES_JOBS:-2}" --target holmes-train test_cuda holmes_gemm_bench
  rm -rf "$dir"
  mkdir -p "$dir/bin" "$dir/lib"
  cp "$build/holmes-train" "$build/test/test_cuda" "$build/cuda/holmes_gemm_bench" "$dir/bin/"
  # Every library the binaries load, except the C runtime and the driver, which any CUDA
  # image has (libcuda comes from the driver; cuBLASLt is opened at run time from the image).
  local skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libcuda\.)'
  for bin in "$dir"/bin/*; do
    ldd "$bin" | awk '/=> \// { print $1, $3 }' | while read -r name path; do
      [[ $name =~ $skip ]] && continue
      cp -L -n "$path" "$dir/lib/$name"
    done
  done
  local size
  size=$(du -sm "$dir" | cut -f1)
  echo "gpu_check: bundle $dir: $(ls "$dir/lib" | wc -l) libraries, ${size} MiB"
  [ "$size" -lt 64 ] || { echo "gpu_check: the bundle is ${size} MiB, over the 64 MiB that can travel" >&2; exit 1; }
}

run_checks() {
  [ -x "$dir/bin/holmes-train" ] || { echo "gpu_check: $dir/bin/holmes-train missing; run 'bundle' first" >&2; exit 2; }
  export LD_LIBRARY_PATH="$PWD/$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local logs=${OUT:-$(mktemp -d)}
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$logs/gpu.txt" || true
  # 1. every CUDA test; on a GPU machine a skip means the GPU was not usable
  local tests=pass
  "$dir/bin/test_cuda" --durations yes >"$logs/test_cuda.log" 2>&1 || tests=FAIL
  if grep -q HOLMES_SKIP "$logs/test_cuda.log"; then tests=FAIL; fi
  local summary
  summary=$(grep -E '^(All tests passed|test cases:)' "$logs/test_cuda.log" | tail -1)
  # 2. the whole model (its own line in the table; part of test_cuda above)
  local whole=pass
  "$dir/bin/test_cuda" "whole model*" >"$logs/whole_model.log" 2>&1 || whole=FAIL
  grep -q HOLMES_SKIP "$logs/whole_model.log" && whole=FAIL
  # 2b. the NCCL groups on this one GPU (docs/comm.md): size-1 groups on Socket and IB running
  # every op, a member that never joins, two members on one GPU; libnccl comes from the image
  local nccl=pass
  "$dir/bin/test_cuda" "[nccl]" >"$logs/nccl.log" 2>&1 || nccl=FAIL
  grep -q HOLMES_SKIP "$logs/nccl.log" && nccl=FAIL
  local nccl_lib
  nccl_lib=$(grep -m1 '^NCCL [0-9]' "$logs/nccl.log" || echo "libnccl not loaded (see nccl.log)")
  # 3. the bench: GPT-2 124M and 350M, fp32 kernels, B=16 T=1024
  local steps=${HOLMES_BENCH_STEPS:-10} rows=()
  for shape in "124M 12 768 12" "350M 24 1024 16"; do
    read -r name L C NH <<<"$shape"
    local line
    line=$("$dir/bin/holmes-train" bench --steps "$steps" --set job.device=cuda --set model.layers="$L" \
      --set model.hidden="$C" --set model.heads="$NH" --set model.vocab_size=50257 --set model.max_seq_len=1024 \
      --set train.micro_batch=16 --set train.global_batch=16 --set train.seq_len=1024 2>&1 |
      tee "$logs/bench_$name.log" | grep '^bench: tokens_per_s' || echo "bench: FAILED (see bench_$name.log)")
    rows+=("$(printf '%-6s %s' "$name" "$line")")
  done
  "$dir/bin/holmes_gemm_bench" 8192 768 50 >"$logs/gemm_bench.log" 2>&1 || true
  echo
  echo "gpu_check on $(head -1 "$logs/gpu.txt")"
  printf '%-24s %s\n' "CUDA tests (test_cuda)" "$tests: $summary" "whole model vs CPU" "$whole" \
    "NCCL groups, one GPU" "$nccl: $nccl_lib"
  for r in "${rows[@]}"; do printf 'bench %s\n' "$r"; done
  tail -1 "$logs/gemm_bench.log" | sed 's/^/gemm  /'
  [ "$tests" = pass ] && [ "$whole" = pass ] && [ "$nccl" = pass ]
}

case "$mode" in
  bundle) bundle ;;
  run) run_checks ;;
  *) echo "usage: scripts/gpu_check.sh bundle|run [DIR]" >&2; exit 2 ;;
esac
