// Rotary embedding kernels (rope.hpp): a grid-stride loop over the B*T*H*(HS/2) channel pairs.
#include "cuda/check.hpp"
#include "cuda/pack.cuh"
#include "cuda/rope.hpp"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;

// dir = +1: the forward rotation; -1: its inverse (the backward).
// pos (B,T) or null: the row of token (b, t) turns by position pos[b*T + t], else t.
template <class E>
__global__ void rope_kernel(E* out, const E* inp, const float* cos_sin, const int* pos, int T, int H, int HS,
                            int stride, long long pairs, float dir) {
  const int half = HS / 2;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < pairs;
       i += (long long)gridDim.x * blockDim.x) {
    const int k = int(i % half);
    const long long rest = i / half;
    const int h = int(rest % H);
    const long long row = rest / H;
    const int t = pos != nullptr ? pos[row] : int(row % T);
    const float c = cos_sin[(long long)t * HS + k], s = dir * cos_sin[(long long)t * HS + half + k];
    const long long base = row * stride + (long long)h * HS;
    const float x0 = widen(inp[base + k]), x1 = widen(inp[base + half + k]);
    out[base + k] = narrow<E>(x0 * c - x1 * s);
    out[base + half + k] = narrow<E>(x1 * c + x0 * s);
  }
}

template <class E>
void rope_impl(E* out, const E* inp, const float* cos_sin, const int* pos, int B, int T, int H, int HS, int stride,
               float dir, cudaStream_t stream) {
  if (B <= 0 || T <= 0 || H <= 0 || HS < 2) return;
  const long long pairs = (long long)B * T * H * (HS / 2);
  const long long blocks = (pairs + kThreads - 1) / kThreads;
  rope_kernel<E><<<int(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(out, inp, cos_sin, pos, T, H, HS,
                                                                                  stride, pairs, dir);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void rope_forward(float* out, const float* inp, const float* cos_sin, int B, int T, int H, int HS, int stride,
                  cudaStream_t stream) {
  rope_impl(out, inp, cos_sin, nullptr, B, T, H, HS, stride, 1.0f, stream);
}
void rope_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, const float* cos_sin, int B, int T, int H, int HS,
                  int stride, cudaStream_t stream) {
  rope_impl(out, inp, cos_sin, nullptr, B, T, H, HS, stride, 1.0f, stream);
}
void rope_backward(float* dinp, const float* dout, const float* cos_sin, int B, int T, int H, int HS, int stride,
                   cudaStream_t stream) {
  rope_impl(dinp, dout, cos_sin, nullptr, B, T, H, HS, stride, -1.0f, stream);
}
void rope_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const float* cos_sin, int B, int T, int H,
                   int HS, int stride, cudaStream_t stream) {
  rope_impl(dinp, dout, cos_sin, nullptr, B, T, H, HS, stride, -1.0f, stream);
}
void rope_forward(float* out, const float* inp, const float* cos_sin, const int* pos, int B, int T, int H, int HS,
                  int stride, cudaStream_t stream) {
  rope_impl(out, inp, cos_sin, pos, B, T, H, HS, stride, 1.0f, stream);
}
void rope_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, const float* cos_sin, const int* pos, int B, int T,
                  int H, int HS, int stride, cudaStream_t stream) {
  rope_impl(out, inp, cos_sin, pos, B, T, H, HS, stride, 1.0f, stream);
}
void rope_backward(float* dinp, const float* dout, const float* cos_sin, const int* pos, int B, int T, int H, int HS,
                   int stride, cudaStream_t stream) {
  rope_impl(dinp, dout, cos_sin, pos, B, T, H, HS, stride, -1.0f, stream);
}
void rope_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const float* cos_sin, const int* pos, int B,
                   int T, int H, int HS, int stride, cudaStream_t stream) {
  rope_impl(dinp, dout, cos_sin, pos, B, T, H, HS, stride, -1.0f, stream);
}

}  // namespace holmes::cuda
