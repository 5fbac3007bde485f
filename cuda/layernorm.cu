// LayerNorm kernels (layernorm.hpp), one template per kernel for fp32 and bf16 storage; all
// arithmetic in fp32. Rows are independent: one warp per row, lanes stride over the C
// channels in 16-byte packs (scalar when C or a pointer does not allow it) and combine with
// shuffles: two passes, mean then variance, as the CPU twin does.
//
// dweight and dbias sum over rows without atomics, in an order fixed by N and C alone: a
// first kernel sums each group of kGroupRows rows per column into a partial (in stream-ordered
// scratch, scratch.hpp), a second adds the groups' partials in group order into dweight and
// dbias. So the backward repeats bit for bit.
#include "cuda/check.hpp"
#include "cuda/layernorm.hpp"
#include "cuda/pack.cuh"
#include "cuda/scratch.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

int layernorm_group_rows(int N) {
  int rows = 64;
  while ((N + rows - 1) / rows > 65535) rows *= 2;  // groups are gridDim.y: at most 65535
  return rows;
}

namespace {

constexpr int kRowsPerBlock = 8;  // 256 threads: 8 warps, one row each
constexpr int kTileCols = 32;     // parameter-gradient blocks: 32 columns x 8 row lanes
constexpr int kTileRows = 8;
constexpr float kEps = 1e-5f;

template <class E, int kW>
__global__ void layernorm_forward_kernel(E* out, float* mean, float* rstd, const E* inp,
                                         const E* weight, const E* bias, int N, int C) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;  // whole warp leaves together: shuffles below stay full-warp
  const E* x = inp + std::size_t(row) * C;
  float sum = 0.0f;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float v[kW];
    load_vec<kW>(v, x + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) sum += v[k];
  }
  const float m = warp_sum(sum) / C;
  float var = 0.0f;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float v[kW];
    load_vec<kW>(v, x + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) var += (v[k] - m) * (v[k] - m);
  }
  const float s = rsqrtf(warp_sum(var) / C + kEps);
  E* y = out + std::size_t(row) * C;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float v[kW], w[kW], b[kW];
    load_vec<kW>(v, x + c);
    load_vec<kW>(w, weight + c);
    load_vec<kW>(b, bias + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) v[k] = (v[k] - m) * s * w[k] + b[k];
    store_vec<kW>(y + c, v);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dinp += rstd * (w dy - mean(w dy) - norm * mean(w dy norm)), one warp per row.
template <class E, int kW>
__global__ void layernorm_backward_rows_kernel(E* dinp, const E* dout, const E* inp,
                                               const E* weight, const float* mean,
                                               const float* rstd, int N, int C) {
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const std::size_t offset = std::size_t(row) * C;
  const E* x = inp + offset;
  const E* dy = dout + offset;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float xv[kW], g[kW], w[kW];
    load_vec<kW>(xv, x + c);
    load_vec<kW>(g, dy + c);
    load_vec<kW>(w, weight + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) {
      const float dnorm = w[k] * g[k];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * (xv[k] - m) * s;
    }
  }
  dnorm_mean = warp_sum(dnorm_mean) / C;
  dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
  E* dx = dinp + offset;
  for (int c = lane * kW; c < C; c += kWarpSize * kW) {
    float xv[kW], g[kW], w[kW], acc[kW];
    load_vec<kW>(xv, x + c);
    load_vec<kW>(g, dy + c);
    load_vec<kW>(w, weight + c);
    load_vec<kW>(acc, dx + c);
#pragma unroll
    for (int k = 0; k < kW; ++k) {
      const float norm = (xv[k] - m) * s;
      acc[k] += s * (w[k] * g[k] - dnorm_mean - norm * dnorm_norm_mean);
    }
    store_vec<kW>(dx + c, acc);
  }
}

// Block (kTileCols, kTileRows): columns [blockIdx.x * kTileCols, +kTileCols) of row group
// blockIdx.y. Each row lane sums its rows in order, then row lane 0 adds the lanes in order
// and writes partial[g][c] (dweight) and partial[g][C + c] (dbias).
template <class E>
__global__ void layernorm_params_partial_kernel(float* partial, const E* dout, const E* inp,
                                                const float* mean, const float* rstd, int N, int C,
                                                int group_rows) {
  __shared__ float sw[kTileRows][kTileCols], sb[kTileRows][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileCols + tx;
  const int g = blockIdx.y;
  const int r0 = g * group_rows, r1 = min(N, r0 + group_rows);
  float dw = 0.0f, db = 0.0f;
  if (c < C) {
    for (int r = r0 + ty; r < r1; r += kTileRows) {
      const std::size_t i = std::size_t(r) * C + c;
      const float d = widen(dout[i]);
      dw += (widen(inp[i]) - mean[r]) * rstd[r] * d;
      db += d;
    }
  }
  sw[ty][tx] = dw;
  sb[ty][tx] = db;
  __syncthreads();
  if (ty != 0 || c >= C) return;
  float w = 0.0f, b = 0.0f;
#pragma unroll
  for (int k = 0; k < kTileRows; ++k) {
    w += sw[k][tx];
    b += sb[k][tx];
  }
  float* p = partial + std::size_t(g) * 2 * C;
  p[c] = w;
  p[C + c] = b;
}

// dweight[c] += sum over groups of partial[g][c]; dbias likewise. A block takes 32 columns;
// its lane ty sums groups ty, ty + 32, ... in order, then lane 0 adds the 32 lane sums in lane
// order: a fixed order for given (groups, C), so repeated runs are bit-identical.
constexpr int kFinalLanes = 32;
__global__ void layernorm_params_final_kernel(float* dweight, float* dbias, const float* partial,
                                              int groups, int C) {
  __shared__ float sw[kFinalLanes][kTileCols], sb[kFinalLanes][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kTileCols + tx;
  float w = 0.0f, b = 0.0f;
  if (c < C) {
    for (int g = ty; g < groups; g += kFinalLanes) {
      w += partial[std::size_t(g) * 2 * C + c];
      b += partial[std::size_t(g) * 2 * C + C + c];
    }
  }
  sw[ty][tx] = w;
  sb[ty][tx] = b;
  __syncthreads();
  if (ty != 0 || c >= C) return;
  w = b = 0.0f;
  for (int k = 0; k < kFinalLanes; ++k) {
    w += sw[k][tx];
    b += sb[k][tx];
  }
  dweight[c] += w;
  dbias[c] += b;
}

int row_blocks(int N) { return (N + kRowsPerBlock - 1) / kRowsPerBlock; }

template <class E>
void forward_impl(E* out, float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                  int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  constexpr int kW = kPack<E>;
  const bool packed = C % kW == 0 && is_aligned16(out) && is_aligned16(inp) &&
                      is_aligned16(weight) && is_aligned16(bias);
  if (packed) {
    layernorm_forward_kernel<E, kW><<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(
        out, mean, rstd, inp, weight, bias, N, C);
  } else {
    layernorm_forward_kernel<E, 1><<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(
        out, mean, rstd, inp, weight, bias, N, C);
  }
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void backward_impl(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp,
                   const E* weight, const float* mean, const float* rstd, int N, int C,
                   cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  constexpr int kW = kPack<E>;
  const bool packed = C % kW == 0 && is_aligned16(dinp) && is_aligned16(dout) &&
                      is_aligned16(inp) && is_aligned16(weight);
  if (packed) {
    layernorm_backward_rows_kernel<E, kW>
        <<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(dinp, dout, inp, weight, mean,
                                                                  rstd, N, C);
  } else {
    layernorm_backward_rows_kernel<E, 1>
        <<<row_blocks(N), kRowsPerBlock * kWarpSize, 0, stream>>>(dinp, dout, inp, weight, mean,
                                                                  rstd, N, C);
  }
  HOLMES_CUDA_CHECK(cudaGetLastError());

  const int group_rows = layernorm_group_rows(N);
  const int groups = (N + group_rows - 1) / group_rows;
  StreamScratch scratch(sizeof(float) * 2 * std::size_t(C) * groups, stream);
  float* partial = scratch.at<float>(0);
  const dim3 grid((C + kTileCols - 1) / kTileCols, groups), block(kTileCols, kTileRows);
  layernorm_params_partial_kernel<<<grid, block, 0, stream>>>(partial, dout, inp, mean, rstd, N, C,
                                                              group_rows);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  layernorm_params_final_kernel<<<(C + kTileCols - 1) / kTileCols, dim3(kTileCols, kFinalLanes), 0,
                                  stream>>>(dweight, dbias, partial, groups, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  scratch.release();
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, cudaStream_t stream) {
  forward_impl(out, mean, rstd, inp, weight, bias, N, C, stream);
}
void layernorm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                       const __nv_bfloat16* weight, const __nv_bfloat16* bias, int N, int C,
                       cudaStream_t stream) {
  forward_impl(out, mean, rstd, inp, weight, bias, N, C, stream);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C, cudaStream_t stream) {
  backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, stream);
}
void layernorm_backward(__nv_bfloat16* dinp, float* dweight, float* dbias,
                        const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                        const __nv_bfloat16* weight, const float* mean, const float* rstd, int N,
                        int C, cudaStream_t stream) {
  backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, stream);
}

}  // namespace holmes::cuda
