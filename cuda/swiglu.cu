// SwiGLU kernels (swiglu.hpp): grid-stride loops over the N*F outputs.
#include "cuda/check.hpp"
#include "cuda/pack.cuh"
#include "cuda/swiglu.hpp"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;

int grid_for(long long n) {
  const long long blocks = (n + kThreads - 1) / kThreads;
  return int(blocks < 65535 ? (blocks ? blocks : 1) : 65535);
}

template <class E>
__global__ void swiglu_forward_kernel(E* out, const E* inp, int F, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / F, j = i % F;
    const float g = widen(inp[row * 2 * F + j]), u = widen(inp[row * 2 * F + F + j]);
    out[i] = narrow<E>(g / (1.0f + expf(-g)) * u);
  }
}

template <class E>
__global__ void swiglu_backward_kernel(E* dinp, const E* inp, const E* dout, int F, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / F, j = i % F;
    const float g = widen(inp[row * 2 * F + j]), u = widen(inp[row * 2 * F + F + j]);
    const float dy = widen(dout[i]), s = 1.0f / (1.0f + expf(-g));
    // d silu(g) / dg = s (1 + g (1 - s))
    dinp[row * 2 * F + j] = narrow<E>(dy * u * s * (1.0f + g * (1.0f - s)));
    dinp[row * 2 * F + F + j] = narrow<E>(dy * g * s);
  }
}

template <class E>
void forward_impl(E* out, const E* inp, int N, int F, cudaStream_t stream) {
  const long long n = (long long)N * F;
  if (n <= 0) return;
  swiglu_forward_kernel<E><<<grid_for(n), kThreads, 0, stream>>>(out, inp, F, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void backward_impl(E* dinp, const E* inp, const E* dout, int N, int F, cudaStream_t stream) {
  const long long n = (long long)N * F;
  if (n <= 0) return;
  swiglu_backward_kernel<E><<<grid_for(n), kThreads, 0, stream>>>(dinp, inp, dout, F, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void swiglu_forward(float* out, const float* inp, int N, int F, cudaStream_t stream) {
  forward_impl(out, inp, N, F, stream);
}
void swiglu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int N, int F, cudaStream_t stream) {
  forward_impl(out, inp, N, F, stream);
}
void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F, cudaStream_t stream) {
  backward_impl(dinp, inp, dout, N, F, stream);
}
void swiglu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* inp, const __nv_bfloat16* dout, int N, int F,
                     cudaStream_t stream) {
  backward_impl(dinp, inp, dout, N, F, stream);
}

}  // namespace holmes::cuda
