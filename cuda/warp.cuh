// Warp-level helpers shared by the .cu files of cuda/. Blocks are whole warps (multiples of
// 32 threads) wherever these are used, so full-mask shuffles are valid.
#pragma once

namespace holmes::cuda {

constexpr int kWarpSize = 32;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace holmes::cuda
