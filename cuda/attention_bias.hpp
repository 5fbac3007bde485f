// The additive document mask of the cudnn attention method's kDocumentBias graph
// (cudnn_sdpa.hpp): one bf16 bias (B,1,T,T) per micro-batch, shared by every head and layer,
// built on the device from the document positions. Its CPU twin is document_bias_reference
// (attention_plan.hpp); parity: test/unit/cuda/document_mask_cudnn_test.cpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

// bias (B,T,T) writes, row (b, t): 0 for keys t - pos[b*T + t] .. t (the query's document up
// to itself), kBf16LowestBits (the lowest finite bf16) for every other key. pos (B,T) int32,
// 0 <= pos[b,t] <= t. One block per row, every element written once: deterministic.
// Asynchronous on `stream`; throws CudaError when the launch fails.
void document_bias(__nv_bfloat16* bias, const int* pos, int B, int T, cudaStream_t stream);

}  // namespace holmes::cuda
