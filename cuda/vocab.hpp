// The vocabulary-sharded ops on the GPU: token embedding and cross-entropy, with the names,
// argument order and write/accumulate contract of model/kernels.hpp (see there for the
// shapes and the three-pass vocabulary-parallel cross-entropy protocol). fp32 and bf16
// overloads: bf16 activations and weights, fp32 statistics, losses and weight gradients,
// fp32 arithmetic inside every kernel. Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

using bf16 = __nv_bfloat16;

// out (B,T,C) writes wte[tok - vocab_begin] (0 outside this vocabulary shard) + wpe[t]
// (wpe may be null).
void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
// dwte, dwpe accumulate (dwpe may be null). Deterministic: the gradients of positions that
// share a token are summed in a fixed order (no atomics), so a run repeats bit for bit. Takes
// a little stream-ordered scratch for the sort (scratch.hpp).
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
// Document masking: the position row of token (b, t) is pos[b*T + t] (pos (B,T) device
// memory); the backward sums dwpe's rows like dwte's (sorted by position, no atomics).
void embedding_forward(float* out, const int* tokens, const int* pos, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
void embedding_forward(bf16* out, const int* tokens, const int* pos, const bf16* wte, const bf16* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, const int* pos, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, const int* pos, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
// How the backward orders the sums: positions sorted by key row * N + position (row = the
// token's local id, Vl for another shard's token; N = B*T), so each dwte row adds its
// positions in position order. The key bits the radix sort looks at (host arithmetic,
// exposed for tests): the fewest with (Vl + 1) * N <= 2^bits.
int embedding_sort_bits(int N, int Vl);

// Pass 1: row_max (N) writes the max over this shard's valid logits (global id < V).
void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vocab_begin,
                              int V, cudaStream_t stream = nullptr);
void crossentropy_max_forward(float* row_max, const bf16* logits, int N, int Vl, int vocab_begin,
                              int V, cudaStream_t stream = nullptr);
// Pass 2: stats (N,2) writes [sum exp(logit - row_max), target logit or 0].
void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream = nullptr);
void crossentropy_stats_forward(float* stats, const bf16* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream = nullptr);
// Passes 1 and 2 in one read of each row (online softmax) when nothing is all-reduced
// between them (TP = 1): row_max and stats write what the two passes would.
void crossentropy_fused_forward(float* row_max, float* stats, const float* logits,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream = nullptr);
void crossentropy_fused_forward(float* row_max, float* stats, const bf16* logits,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream = nullptr);
// Pass 3: losses (N) writes log(stats[0]) + row_max - stats[1].
void crossentropy_forward(float* losses, const float* stats, const float* row_max, int N,
                          cudaStream_t stream = nullptr);
// dlogits (N,Vl) writes dloss * (softmax - onehot(target)), 0 in padded columns, one pass
// per row; may alias logits (in place: the probabilities are never stored).
void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                           const float* stats, const int* targets, float dloss, int N, int Vl,
                           int vocab_begin, int V, cudaStream_t stream = nullptr);
void crossentropy_backward(bf16* dlogits, const bf16* logits, const float* row_max,
                           const float* stats, const int* targets, float dloss, int N, int Vl,
                           int vocab_begin, int V, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
