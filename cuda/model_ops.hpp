// The remaining GPT ops on the GPU, fp32, with the names, argument order and write/accumulate
// contract of model/kernels.hpp (see there for the shapes and the vocabulary-parallel
// cross-entropy protocol). These are straightforward, correctness-first kernels: one warp
// or one thread per independent output, no tiling. Asynchronous on `stream`.
#pragma once

#include <cuda_runtime_api.h>

namespace holmes::cuda {

// out (B,T,C) writes wte[tok - vocab_begin] (0 outside this vocabulary shard) + wpe[t].
void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);
// dwte, dwpe accumulate (dwpe may be null). dwte rows of repeated tokens are summed with
// atomics, so their low bits depend on scheduling.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream = nullptr);

// Causal self-attention. qkv (B,T,3C), out (B,T,C) writes, att (B,NH,T,T) writes the softmax
// probabilities (0 above the diagonal).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream = nullptr);
// dqkv (B,T,3C) writes; scratch (B,NH,T,T) receives the pre-softmax score gradients.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH,
                        cudaStream_t stream = nullptr);

// Vocabulary-parallel cross-entropy, the three forward passes and the backward.
void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vocab_begin,
                              int V, cudaStream_t stream = nullptr);
void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream = nullptr);
void crossentropy_forward(float* losses, const float* stats, const float* row_max, int N,
                          cudaStream_t stream = nullptr);
// dlogits (N,Vl) writes; may alias logits.
void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                           const float* stats, const int* targets, float dloss, int N, int Vl,
                           int vocab_begin, int V, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
