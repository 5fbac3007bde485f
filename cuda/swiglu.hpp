// SwiGLU on the GPU (model/kernels.hpp swiglu_forward / swiglu_backward): inp (N,2F) rows are
// [gate (F) | up (F)], out (N,F) = silu(gate) * up. fp32 and bf16 storage, fp32 arithmetic,
// one thread per output element (deterministic). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

void swiglu_forward(float* out, const float* inp, int N, int F, cudaStream_t stream = nullptr);
void swiglu_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, int N, int F, cudaStream_t stream = nullptr);
// dinp (N,2F) writes [dgate | dup]; dout (N,F).
void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F, cudaStream_t stream = nullptr);
void swiglu_backward(__nv_bfloat16* dinp, const __nv_bfloat16* inp, const __nv_bfloat16* dout, int N, int F,
                     cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
