// Element-wise CUDA kernels, named like their CPU twins in model/cpu: <op>_forward /
// <op>_backward, outputs first, then inputs, then sizes, then the stream. Each comes in fp32
// and bf16 (bf16 storage, fp32 arithmetic inside the kernel). All are asynchronous on
// `stream`; launch failures throw CudaError.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace holmes::cuda {

using bf16 = __nv_bfloat16;

// GELU, tanh approximation (as in GPT-2):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// out[N] = gelu(inp[N]).
void gelu_forward(float* out, const float* inp, std::size_t n, cudaStream_t stream = nullptr);
void gelu_forward(bf16* out, const bf16* inp, std::size_t n, cudaStream_t stream = nullptr);
// dinp[N] = gelu'(inp[N]) * dout[N]  (overwrites dinp; dinp may alias dout).
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n,
                   cudaStream_t stream = nullptr);
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::size_t n,
                   cudaStream_t stream = nullptr);

// out[N] = inp1[N] + inp2[N] (the residual stream). out may alias either input.
void residual_forward(float* out, const float* inp1, const float* inp2, std::size_t n,
                      cudaStream_t stream = nullptr);
void residual_forward(bf16* out, const bf16* inp1, const bf16* inp2, std::size_t n,
                      cudaStream_t stream = nullptr);

// da[N] += dout[N], db[N] += dout[N]; either may be null (the residual's backward).
void residual_backward(float* da, float* db, const float* dout, std::size_t n,
                       cudaStream_t stream = nullptr);
void residual_backward(bf16* da, bf16* db, const bf16* dout, std::size_t n,
                       cudaStream_t stream = nullptr);

// dbias[OC] += sum over rows of dout[rows, OC] (the bias gradient of a linear layer;
// accumulates so micro-batches add up). Sums in fp32, in a fixed order (deterministic).
void bias_backward(float* dbias, const float* dout, int rows, int oc,
                   cudaStream_t stream = nullptr);
void bias_backward(bf16* dbias, const bf16* dout, int rows, int oc, cudaStream_t stream = nullptr);
// bf16 activations, fp32 gradient (mixed precision).
void bias_backward(float* dbias, const bf16* dout, int rows, int oc, cudaStream_t stream = nullptr);

// out[N] = inp[N] converted: fp32 -> bf16 rounds to nearest even; bf16 -> fp32 is exact.
void convert(bf16* out, const float* inp, std::size_t n, cudaStream_t stream = nullptr);
void convert(float* out, const bf16* inp, std::size_t n, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
