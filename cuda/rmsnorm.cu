// RMSNorm kernels (rmsnorm.hpp), one template per kernel for fp32 and bf16 storage; all
// arithmetic in fp32. One warp per row, lanes stride over the C channels in 16-byte packs
// (scalar when C or a pointer does not allow it) and combine with shuffles, as layernorm.cu.
//
// dweight sums over rows without atomics in an order fixed by N and C alone: a first kernel
// sums each group of rows per column into a partial (stream-ordered scratch), a second adds
// the groups' partials in group order into dweight. So the backward repeats bit for bit.
#include "cuda/check.hpp"
#include "cuda/layernorm.hpp"
#include "cuda/pack.cuh"
#include "cuda/rmsnorm.hpp"
#include "cuda/scratch.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

namespace {

constexpr int kRowsPerBlock = 8;  // 256 threads: 8 warps, one row each
constexpr int kTileCols = 32;     // weight-gradient blocks: 32 columns x 8 row lanes
constexpr int kTileRows = 8;
constexpr int kFinalLanes = 32;

template <class E, int kW>
__global__ void rmsnorm_forward_kernel(E* out, float* rstd, const E* inp, const E* weight, int N, int C,
                                       float eps) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;  // whole warp leaves together: shuffles below stay full-warp
  const E* x = inp + std::size_t(row) * C;
  float sq = 0.0f;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float v[kW];
    load_vec<kW>(v, x + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) sq += v[k] * v[k];
  }
  const float s = rsqrtf(warp_sum(sq) / C + eps);
  E* y = out + std::size_t(row) * C;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float v[kW], w[kW];
    load_vec<kW>(v, x + c);
    load_vec<kW>(w, weight + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) v[k] = v[k] * s * w[k];
    store_vec<kW>(y + c, v);
  }
  if (lane == 0) rstd[row] = s;
}

// dinp += rstd * (w dy - norm * mean(w dy norm)), norm = x * rstd; one warp per row.
template <class E, int kW>
__global__ void rmsnorm_backward_rows_kernel(E* dinp, const E* dout, const E* inp, const E* weight,
                                             const float* rstd, int N, int C) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const std::size_t offset = std::size_t(row) * C;
  const E* x = inp + offset;
  const E* dy = dout + offset;
  const float s = rstd[row];
  float dot = 0.0f;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float xv[kW], g[kW], w[kW];
    load_vec<kW>(xv, x + c);
    load_vec<kW>(g, dy + c);
    load_vec<kW>(w, weight + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) dot += w[k] * g[k] * xv[k] * s;
  }
  dot = warp_sum(dot) / C;
  E* dx = dinp + offset;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float xv[kW], g[kW], w[kW], acc[kW];
    load_vec<kW>(xv, x + c);
    load_vec<kW>(g, dy + c);
    load_vec<kW>(w, weight + c);
    load_vec<kW>(acc, dx + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) acc[k] += s * (w[k] * g[k] - xv[k] * s * dot);
    store_vec<kW>(dx + c, acc);
  }
}

// Block (kTileCols, kTileRows): columns [blockIdx.x * kTileCols, +kTileCols) of row group
// blockIdx.y. Each row lane sums its rows in order, then row lane 0 adds the lanes in order
// and writes partial[g][c].
template <class E>
__global__ void rmsnorm_weight_partial_kernel(float* partial, const E* dout, const E* inp, const float* rstd, int N,
                                              int C, int group_rows) {
  __shared__ float sw[kTileRows][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileCols + tx;
  const int g = blockIdx.y;
  const int r0 = g * group_rows, r1 = min(N, r0 + group_rows);
  float dw = 0.0f;
  if (c < C) {
    for (int r = r0 + ty; r < r1; r += kTileRows) {
      const std::size_t i = std::size_t(r) * C + c;
      dw += widen(inp[i]) * rstd[r] * widen(dout[i]);
    }
  }
  sw[ty][tx] = dw;
  __syncthreads();
  if (ty != 0 || c >= C) return;
  float w = 0.0f;
#pragma unroll
  for (int k = 0; k < kTileRows; ++k) w += sw[k][tx];
  partial[std::size_t(g) * C + c] = w;
}

// dweight[c] += sum over groups of partial[g][c]: lane ty sums groups ty, ty + 32, ... in
// order, then lane 0 adds the 32 lane sums in lane order.
__global__ void rmsnorm_weight_final_kernel(float* dweight, const float* partial, int groups, int C) {
  __shared__ float sw[kFinalLanes][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileCols + tx;
  float w = 0.0f;
  if (c < C)
    for (int g = ty; g < groups; g += kFinalLanes) w += partial[std::size_t(g) * C + c];
  sw[ty][tx] = w;
  __syncthreads();
  if (ty != 0 || c >= C) return;
  w = 0.0f;
  for (int k = 0; k < kFinalLanes; ++k) w += sw[k][tx];
  dweight[c] += w;
}

int row_blocks(int N) { return (N + kRowsPerBlock - 1) / kRowsPerBlock; }

template <class E>
void forward_impl(E* out, float* rstd, const E* inp, const E* weight, int N, int C, float eps, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  constexpr int kW = kPack<E>;
  const bool packed = C % kW == 0 && is_aligned16(out) && is_aligned16(inp) && is_aligned16(weight);
  if (packed)
    rmsnorm_forward_kernel<E, kW><<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(out, rstd, inp, weight,
                                                                                           N, C, eps);
  else
    rmsnorm_forward_kernel<E, 1><<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(out, rstd, inp, weight,
                                                                                          N, C, eps);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void backward_impl(E* dinp, float* dweight, const E* dout, const E* inp, const E* weight, const float* rstd, int N,
                   int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  constexpr int kW = kPack<E>;
  const bool packed = C % kW == 0 && is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) &&
                      is_aligned16(weight);
  if (packed)
    rmsnorm_backward_rows_kernel<E, kW>
        <<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(dinp, dout, inp, weight, rstd, N, C);
  else
    rmsnorm_backward_rows_kernel<E, 1>
        <<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(dinp, dout, inp, weight, rstd, N, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());

  const int group_rows = layernorm_group_rows(N);  // the same grouping rule: groups fit gridDim.y
  const int groups = (N + group_rows - 1) / group_rows;
  StreamScratch scratch(sizeof(float) * std::size_t(C) * groups, stream);
  float* partial = scratch.at<float>(0);
  const dim3 grid((C + kTileCols - 1) / kTileCols, groups), block(kTileCols, kTileRows);
  rmsnorm_weight_partial_kernel<<<grid, block, 0, stream>>>(partial, dout, inp, rstd, N, C, group_rows);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  rmsnorm_weight_final_kernel<<<(C + kTileCols - 1) / kTileCols, dim3(kTileCols, kFinalLanes), 0, stream>>>(
      dweight, partial, groups, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  scratch.release();
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                     cudaStream_t stream) {
  forward_impl(out, rstd, inp, weight, N, C, eps, stream);
}
void rmsnorm_forward(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* inp, const __nv_bfloat16* weight, int N,
                     int C, float eps, cudaStream_t stream) {
  forward_impl(out, rstd, inp, weight, N, C, eps, stream);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C, cudaStream_t stream) {
  backward_impl(dinp, dweight, dout, inp, weight, rstd, N, C, stream);
}
void rmsnorm_backward(__nv_bfloat16* dinp, float* dweight, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                      const __nv_bfloat16* weight, const float* rstd, int N, int C, cudaStream_t stream) {
  backward_impl(dinp, dweight, dout, inp, weight, rstd, N, C, stream);
}

}  // namespace holmes::cuda
