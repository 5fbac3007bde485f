// LayerNorm on the GPU with the contract of model/kernels.hpp (fp32): eps 1e-5, biased
// variance, mean/rstd kept for backward. Asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace holmes::cuda {

// out (N,C) writes (x - mean) * rstd * weight + bias; mean, rstd (N) write.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, cudaStream_t stream = nullptr);

// dinp (N,C) ACCUMULATES (it is the residual stream's gradient); dweight, dbias (C)
// accumulate. dout, inp (N,C); mean, rstd (N) from the forward.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
