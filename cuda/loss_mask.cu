// Loss-mask kernels (loss_mask.hpp).
#include "cuda/check.hpp"
#include "cuda/loss_mask.hpp"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void mask_losses_kernel(float* losses, const int* targets, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N && targets[n] < 0) losses[n] = 0.0f;
}

template <class E>
__global__ void mask_rows_kernel(E* dlogits, const int* targets, int Vl) {
  const int n = blockIdx.x;
  if (targets[n] >= 0) return;
  E* row = dlogits + (long long)n * Vl;
  for (int v = threadIdx.x; v < Vl; v += blockDim.x) row[v] = E(0.0f);
}

template <class E>
void mask_rows_impl(E* dlogits, const int* targets, int N, int Vl, cudaStream_t stream) {
  if (N <= 0 || Vl <= 0) return;
  mask_rows_kernel<E><<<N, kThreads, 0, stream>>>(dlogits, targets, Vl);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void mask_losses(float* losses, const int* targets, int N, cudaStream_t stream) {
  if (N <= 0) return;
  mask_losses_kernel<<<(N + kThreads - 1) / kThreads, kThreads, 0, stream>>>(losses, targets, N);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void mask_rows(float* dlogits, const int* targets, int N, int Vl, cudaStream_t stream) {
  mask_rows_impl(dlogits, targets, N, Vl, stream);
}

void mask_rows(__nv_bfloat16* dlogits, const int* targets, int N, int Vl, cudaStream_t stream) {
  mask_rows_impl(dlogits, targets, N, Vl, stream);
}

}  // namespace holmes::cuda
