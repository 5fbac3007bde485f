// Optimizer ops and reductions (optimizer.hpp). Grid-stride loops; the double reductions sum
// per thread, then per warp with shuffles, then per block in shared memory, and one
// atomicAdd (double, sm_60+) per block, so their last bits depend on the block order.
#include "cuda/check.hpp"
#include "cuda/optimizer.hpp"

namespace holmes::cuda {

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

__global__ void adamw_kernel(float* p, float* m, float* v, const float* g, std::size_t n, model::AdamWStep s) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const float gi = g[i] * s.grad_scale;
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) * s.inv_sqrt_bc2 + s.eps;
    p[i] = p[i] * s.decay_factor - s.step_size * mi / denom;
  }
}

__global__ void sum_squares_kernel(double* sq, const float* x, std::size_t n) {
  double acc = 0.0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    acc += static_cast<double>(x[i]) * x[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) atomicAdd(sq, acc);
}

// One block: the mean needs no atomics and no second pass.
__global__ void mean_kernel(float* mean, const float* x, int N) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < N; i += blockDim.x) acc += x[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *mean = static_cast<float>(acc / N);
}

__global__ void scale_kernel(float* x, float s, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    x[i] *= s;
}

}  // namespace

void adamw_update(float* params, float* m, float* v, const float* grads, std::size_t n, const model::AdamWStep& s,
                  cudaStream_t stream) {
  if (n == 0) return;
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(params, m, v, grads, n, s);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void sum_squares_forward(double* sq, const float* x, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  sum_squares_kernel<<<grid_for(n), kThreads, 0, stream>>>(sq, x, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void mean_forward(float* mean, const float* x, int N, cudaStream_t stream) {
  mean_kernel<<<1, kThreads, 0, stream>>>(mean, x, N);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void scale_forward(float* x, float s, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, s, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
