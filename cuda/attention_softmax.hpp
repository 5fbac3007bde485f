// The row kernels of attention.hpp's fallback method (its GEMMs run on cuBLASLt): the causal
// softmax over scores and its backward. One warp per (b, h, t) row of T columns; fp32
// arithmetic, fp32 or bf16 storage. Rows are independent and every element is written by one
// thread, so results are deterministic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

// att (rows, T) holds scaled scores; rewritten in place with the causal softmax of each row
// (row r is query t = r % T: columns <= t normalised, max subtracted first; columns > t = 0).
void causal_softmax_forward(float* att, long long rows, int T, cudaStream_t stream);
void causal_softmax_forward(__nv_bfloat16* att, long long rows, int T, cudaStream_t stream);

// The same over each query's document (data.document_mask): rows are (b, h, t) of B sequences
// and NH heads, row (b, h, t) normalises columns t - pos[b*T + t] .. t and zeroes the rest.
// pos (B,T) int32 in device memory. The backward needs no positions: the probabilities it
// reads are 0 outside each block, so are the gradients it writes there.
void document_softmax_forward(float* att, const int* pos, long long rows, int T, int NH, cudaStream_t stream);
void document_softmax_forward(__nv_bfloat16* att, const int* pos, long long rows, int T, int NH,
                              cudaStream_t stream);

// ds (rows, T) writes scale * p * (dp - sum_j p_j dp_j) for columns <= t, 0 above; p are the
// forward's probabilities, dp (fp32) the gradient of the probabilities. ds may alias dp (fp32).
void causal_softmax_backward(float* ds, const float* dp, const float* p, float scale,
                             long long rows, int T, cudaStream_t stream);
void causal_softmax_backward(__nv_bfloat16* ds, const float* dp, const __nv_bfloat16* p,
                             float scale, long long rows, int T, cudaStream_t stream);

}  // namespace holmes::cuda
