// Rotary position embedding on the GPU (model/kernels.hpp rope_forward / rope_backward):
// Hugging Face's rotate-half convention, the first H heads of HS channels of each (B*T) row
// `stride` elements apart, position t = row % T, angles from the fp32 cos_sin table (T', HS):
// [cos (HS/2) | sin (HS/2)] per position. fp32 and bf16 storage, fp32 arithmetic; one thread
// per channel pair, each reading its pair before writing it, so out may alias inp.
// Deterministic (no reductions). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

void rope_forward(float* out, const float* inp, const float* cos_sin, int B, int T, int H, int HS, int stride,
                  cudaStream_t stream = nullptr);
void rope_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, const float* cos_sin, int B, int T, int H, int HS,
                  int stride, cudaStream_t stream = nullptr);
// dinp = the inverse rotation of dout (the transpose of the forward's).
void rope_backward(float* dinp, const float* dout, const float* cos_sin, int B, int T, int H, int HS, int stride,
                   cudaStream_t stream = nullptr);
void rope_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const float* cos_sin, int B, int T, int H,
                   int HS, int stride, cudaStream_t stream = nullptr);

// Document masking: the row of token (b, t) turns by pos[b*T + t] (pos (B,T) device memory).
void rope_forward(float* out, const float* inp, const float* cos_sin, const int* pos, int B, int T, int H, int HS,
                  int stride, cudaStream_t stream = nullptr);
void rope_forward(__nv_bfloat16* out, const __nv_bfloat16* inp, const float* cos_sin, const int* pos, int B, int T,
                  int H, int HS, int stride, cudaStream_t stream = nullptr);
void rope_backward(float* dinp, const float* dout, const float* cos_sin, const int* pos, int B, int T, int H, int HS,
                   int stride, cudaStream_t stream = nullptr);
void rope_backward(__nv_bfloat16* dinp, const __nv_bfloat16* dout, const float* cos_sin, const int* pos, int B,
                   int T, int H, int HS, int stride, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
