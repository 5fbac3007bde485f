// RMSNorm on the GPU with the contract of model/kernels.hpp: out = x * rstd * weight,
// rstd = 1 / sqrt(mean(x^2) + eps) (fp32, kept for backward). fp32 and bf16 overloads (bf16
// activations and weight, fp32 rstd and weight gradient, fp32 arithmetic). Deterministic:
// dweight sums over rows in a fixed order (groups of layernorm_group_rows(N) rows, then the
// groups in order, as layernorm.hpp; no atomics). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

// out (N,C) writes; rstd (N) writes.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                     cudaStream_t stream = nullptr);
void rmsnorm_forward(__nv_bfloat16* out, float* rstd, const __nv_bfloat16* inp, const __nv_bfloat16* weight, int N,
                     int C, float eps, cudaStream_t stream = nullptr);

// dinp (N,C) ACCUMULATES (the residual stream's gradient); dweight (C) accumulates. dout, inp
// (N,C); rstd (N) from the forward.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C, cudaStream_t stream = nullptr);
void rmsnorm_backward(__nv_bfloat16* dinp, float* dweight, const __nv_bfloat16* dout, const __nv_bfloat16* inp,
                      const __nv_bfloat16* weight, const float* rstd, int N, int C, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
