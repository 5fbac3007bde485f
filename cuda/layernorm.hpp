// LayerNorm on the GPU with the contract of model/kernels.hpp: eps 1e-5, biased variance,
// mean/rstd (fp32) kept for backward. fp32 and bf16 overloads (bf16 activations and weights,
// fp32 statistics and weight gradients, fp32 arithmetic). Deterministic: dweight and dbias
// are summed over rows in a fixed order (groups of layernorm_group_rows(N) rows, then the
// groups in order; no atomics), using a little stream-ordered scratch (scratch.hpp).
// Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

// out (N,C) writes (x - mean) * rstd * weight + bias; mean, rstd (N) write.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, cudaStream_t stream = nullptr);
void layernorm_forward(__nv_bfloat16* out, float* mean, float* rstd, const __nv_bfloat16* inp,
                       const __nv_bfloat16* weight, const __nv_bfloat16* bias, int N, int C,
                       cudaStream_t stream = nullptr);

// dinp (N,C) ACCUMULATES (it is the residual stream's gradient); dweight, dbias (C)
// accumulate. dout, inp (N,C); mean, rstd (N) from the forward.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C, cudaStream_t stream = nullptr);
void layernorm_backward(__nv_bfloat16* dinp, float* dweight, float* dbias, const __nv_bfloat16* dout,
                        const __nv_bfloat16* inp, const __nv_bfloat16* weight, const float* mean,
                        const float* rstd, int N, int C, cudaStream_t stream = nullptr);

// Rows per partial-sum group of the backward's dweight/dbias reduction: 64, doubled until
// there are at most 65535 groups. A function of N alone, so the summation order is too
// (host arithmetic, exposed for tests).
int layernorm_group_rows(int N);

}  // namespace holmes::cuda
