#include "cuda/attention_softmax.hpp"

#include <cmath>

#include "cuda/check.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarpSize;

__device__ __forceinline__ float load(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, long long i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, long long i, float v) {
  p[i] = __float2bfloat16(v);  // round to nearest even
}

// Whole warps leave together (one row per warp), so the full-mask shuffles stay valid.
// pos (B,T) or null: row (b, h, t) keeps columns t - pos[b,t] .. t (its document's), else 0 .. t.
template <class Tp>
__global__ void causal_softmax_kernel(Tp* att, const int* pos, long long rows, int T, int NH) {
  const long long row = blockIdx.x * (long long)kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= rows) return;
  const int t = int(row % T);
  const int lo = pos != nullptr ? t - pos[row / ((long long)NH * T) * T + t] : 0;
  Tp* a = att + row * T;
  float mx = -INFINITY;
  for (int j = lo + lane; j <= t; j += kWarpSize) mx = fmaxf(mx, load(a, j));
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lo + lane; j <= t; j += kWarpSize) sum += expf(load(a, j) - mx);
  const float inv = 1.0f / warp_sum(sum);
  // Each lane rewrites only the columns it read itself.
  for (int j = lane; j < T; j += kWarpSize)
    store(a, j, j >= lo && j <= t ? expf(load(a, j) - mx) * inv : 0.0f);
}

template <class Tp>
__global__ void causal_softmax_backward_kernel(Tp* ds, const float* dp, const Tp* p, float scale,
                                               long long rows, int T) {
  const long long row = blockIdx.x * (long long)kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= rows) return;
  const int t = int(row % T);
  const long long base = row * T;
  float dot = 0.0f;
  for (int j = lane; j <= t; j += kWarpSize) dot += load(p, base + j) * dp[base + j];
  dot = warp_sum(dot);
  for (int j = lane; j < T; j += kWarpSize) {
    const float v = j <= t ? load(p, base + j) * (dp[base + j] - dot) * scale : 0.0f;
    store(ds, base + j, v);  // after this lane's own read of dp[base + j] (ds may alias dp)
  }
}

int blocks_for(long long rows) { return int((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

template <class Tp>
void softmax_forward(Tp* att, const int* pos, long long rows, int T, int NH, cudaStream_t stream) {
  if (rows <= 0 || T <= 0) return;
  causal_softmax_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(att, pos, rows, T, NH);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class Tp>
void softmax_backward(Tp* ds, const float* dp, const Tp* p, float scale, long long rows, int T,
                      cudaStream_t stream) {
  if (rows <= 0 || T <= 0) return;
  causal_softmax_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(ds, dp, p, scale,
                                                                            rows, T);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void causal_softmax_forward(float* att, long long rows, int T, cudaStream_t stream) {
  softmax_forward(att, static_cast<const int*>(nullptr), rows, T, 1, stream);
}
void causal_softmax_forward(__nv_bfloat16* att, long long rows, int T, cudaStream_t stream) {
  softmax_forward(att, static_cast<const int*>(nullptr), rows, T, 1, stream);
}
void document_softmax_forward(float* att, const int* pos, long long rows, int T, int NH, cudaStream_t stream) {
  softmax_forward(att, pos, rows, T, NH, stream);
}
void document_softmax_forward(__nv_bfloat16* att, const int* pos, long long rows, int T, int NH,
                              cudaStream_t stream) {
  softmax_forward(att, pos, rows, T, NH, stream);
}
void causal_softmax_backward(float* ds, const float* dp, const float* p, float scale,
                             long long rows, int T, cudaStream_t stream) {
  softmax_backward(ds, dp, p, scale, rows, T, stream);
}
void causal_softmax_backward(__nv_bfloat16* ds, const float* dp, const __nv_bfloat16* p,
                             float scale, long long rows, int T, cudaStream_t stream) {
  softmax_backward(ds, dp, p, scale, rows, T, stream);
}

}  // namespace holmes::cuda
