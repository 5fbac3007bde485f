// Optimizer ops and reductions (optimizer.hpp). Grid-stride loops over 16-byte packs of four
// floats when every pointer is 16-byte aligned, with the n % 4 tail (or everything, when a
// pointer is not aligned) element by element; an element's arithmetic is the same on both
// paths, so results do not depend on alignment.
//
// The double reductions need no atomics: sum_squares_forward sums per thread, warp and block
// into one partial per block (the grid size is a function of n alone), then one block adds
// the partials in a fixed tree order. So the gradient norm, hence clipping, repeats bit for
// bit.
#include "cuda/check.hpp"
#include "cuda/optimizer.hpp"
#include "cuda/pack.cuh"
#include "cuda/scratch.hpp"

namespace holmes::cuda {

int sum_squares_blocks(std::size_t n) {
  constexpr std::size_t kMaxBlocks = 1024, kPerBlock = 256 * 16;  // 16 elements per thread
  const std::size_t blocks = (n + kPerBlock - 1) / kPerBlock;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

namespace {

constexpr int kThreads = 256;  // a multiple of the warp size
constexpr int kWarps = kThreads / 32;

int grid_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

__device__ __forceinline__ double warp_sum_double(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of `v` over the block, valid in thread 0.
__device__ double block_sum(double v) {
  __shared__ double partial[kWarps];
  v = warp_sum_double(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < kWarps ? partial[threadIdx.x] : 0.0;
  if (warp == 0) v = warp_sum_double(v);
  return v;
}

__device__ __forceinline__ std::size_t thread_index() {
  return blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_count() {
  return std::size_t{gridDim.x} * blockDim.x;
}

__device__ __forceinline__ void adamw_element(float& p, float& m, float& v, float g,
                                              const model::AdamWStep& s) {
  const float gi = g * s.grad_scale;
  m = s.beta1 * m + (1.0f - s.beta1) * gi;
  v = s.beta2 * v + (1.0f - s.beta2) * gi * gi;
  const float denom = sqrtf(v) * s.inv_sqrt_bc2 + s.eps;
  p = p * s.decay_factor - s.step_size * m / denom;
}

// kW = 4: packs of four floats (all pointers 16-byte aligned), then the tail one by one.
template <int kW>
__global__ void adamw_kernel(float* p, float* m, float* v, const float* g, std::size_t n,
                             model::AdamWStep s) {
  const std::size_t packs = n / kW;
  for (std::size_t q = thread_index(); q < packs; q += thread_count()) {
    const std::size_t i = q * kW;
    float pv[kW], mv[kW], vv[kW], gv[kW];
    load_vec<kW>(pv, p + i);
    load_vec<kW>(mv, m + i);
    load_vec<kW>(vv, v + i);
    load_vec<kW>(gv, g + i);
#pragma unroll
    for (int k = 0; k < kW; ++k) adamw_element(pv[k], mv[k], vv[k], gv[k], s);
    store_vec<kW>(p + i, pv);
    store_vec<kW>(m + i, mv);
    store_vec<kW>(v + i, vv);
  }
  for (std::size_t i = packs * kW + thread_index(); i < n; i += thread_count())
    adamw_element(p[i], m[i], v[i], g[i], s);
}

// partial[block] = the block's sum of x^2 (double); which thread reads which element is fixed
// by n and the grid, which sum_squares_blocks(n) fixes.
template <int kW>
__global__ void sum_squares_partial_kernel(double* partial, const float* x, std::size_t n) {
  double acc = 0.0;
  const std::size_t packs = n / kW;
  for (std::size_t q = thread_index(); q < packs; q += thread_count()) {
    float xv[kW];
    load_vec<kW>(xv, x + q * kW);
#pragma unroll
    for (int k = 0; k < kW; ++k) acc += static_cast<double>(xv[k]) * xv[k];
  }
  for (std::size_t i = packs * kW + thread_index(); i < n; i += thread_count())
    acc += static_cast<double>(x[i]) * x[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: *sq += the sum of partial[0..count), in a fixed order.
__global__ void sum_partials_kernel(double* sq, const double* partial, int count) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *sq += acc;
}

// One block: the mean needs no atomics and no second pass.
__global__ void mean_kernel(float* mean, const float* x, int N) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < N; i += blockDim.x) acc += x[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *mean = static_cast<float>(acc / N);
}

template <int kW>
__global__ void scale_kernel(float* x, float s, std::size_t n) {
  const std::size_t packs = n / kW;
  for (std::size_t q = thread_index(); q < packs; q += thread_count()) {
    float xv[kW];
    load_vec<kW>(xv, x + q * kW);
#pragma unroll
    for (int k = 0; k < kW; ++k) xv[k] *= s;
    store_vec<kW>(x + q * kW, xv);
  }
  for (std::size_t i = packs * kW + thread_index(); i < n; i += thread_count()) x[i] *= s;
}

constexpr int kW4 = kPack<float>;

}  // namespace

void adamw_update(float* params, float* m, float* v, const float* grads, std::size_t n,
                  const model::AdamWStep& s, cudaStream_t stream) {
  if (n == 0) return;
  if (is_aligned16(params) && is_aligned16(m) && is_aligned16(v) && is_aligned16(grads))
    adamw_kernel<kW4><<<grid_for(n / kW4), kThreads, 0, stream>>>(params, m, v, grads, n, s);
  else
    adamw_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(params, m, v, grads, n, s);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void sum_squares_forward(double* sq, const float* x, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const int blocks = sum_squares_blocks(n);
  StreamScratch scratch(sizeof(double) * blocks, stream);
  double* partial = scratch.at<double>(0);
  if (is_aligned16(x))
    sum_squares_partial_kernel<kW4><<<blocks, kThreads, 0, stream>>>(partial, x, n);
  else
    sum_squares_partial_kernel<1><<<blocks, kThreads, 0, stream>>>(partial, x, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(sq, partial, blocks);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  scratch.release();
}

void mean_forward(float* mean, const float* x, int N, cudaStream_t stream) {
  mean_kernel<<<1, kThreads, 0, stream>>>(mean, x, N);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void scale_forward(float* x, float s, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (is_aligned16(x))
    scale_kernel<kW4><<<grid_for(n / kW4), kThreads, 0, stream>>>(x, s, n);
  else
    scale_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(x, s, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
