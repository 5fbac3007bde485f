// Causal self-attention on the GPU (the attention ops of model/kernels.hpp).
//
// Attention is an object, not free functions, because its fast methods carry state: a cuDNN
// handle, graphs built once per shape, a workspace. One object per stream. Methods:
//   - cudnn:    cuDNN 9 fused scaled-dot-product attention (flash forward and backward,
//               causal, bf16, grouped-query heads) through the graph API of cudnn_graph.h;
//               Q, K, V read in place from the qkv buffer (rows [q NH heads | k KVH heads |
//               v KVH heads]) with strides; the forward keeps the softmax statistics
//               (B,NH,T) for the backward. Document-masked micro-batches keep each query's
//               document up to itself in the same graphs (plan's document_mask, below).
//   - fallback: no cuDNN engine needed: batched cuBLASLt GEMMs for QK^T and PV read with
//               strides (one batch over the KVH key/value heads per query head of a group),
//               and a softmax kernel; keeps the probabilities. With KVH < NH, dK and dV add
//               the group's query heads one GEMM after another (beta = 1), in the activation
//               precision.
//   - exact:    the reference kernels below (one warp per query row), fp32 only.
// plan() chooses once per (precision, max shape): for bf16, cuDNN when it offers an engine for
// the forward and the backward, else the fallback; for fp32, the fallback too (cuDNN has no
// fp32 attention; the exact kernels are the slow reference, chosen only when forced). It says
// which, and why cuDNN was not taken, in AttentionPlan::method (logged at start-up). The
// environment variable HOLMES_ATTENTION=cudnn|fallback|exact forces a method (docs/cuda.md); a
// forced method that cannot serve the precision or shape makes plan() throw.
// What `att` and `scratch` hold per method: attention_plan.hpp (attention_sizes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <memory>

#include "cuda/attention_plan.hpp"
#include "model/kernels.hpp"

namespace holmes::cuda {

using bf16 = __nv_bfloat16;

class Attention {
 public:
  using Method = AttentionMethod;  // kAuto, kCudnn, kFallback, kExact
  // force != kAuto pins a method (tests; an unavailable one makes plan() throw); it takes
  // precedence over HOLMES_ATTENTION.
  explicit Attention(cudaStream_t stream, Method force = Method::kAuto);
  ~Attention();
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;

  // See model::Kernels::plan_attention. Must be called before forward/backward in a
  // precision; shapes up to (B, T) may follow. document_mask: micro-batches may carry document
  // positions; the cudnn method then takes the first of cuDNN's document-masked graphs
  // (cudnn_sdpa.hpp SdpaMask: the bound from the positions, else a bias built from them, whose
  // (B,T,T) bf16 buffer this object allocates here) that has engines in both directions, beside
  // the causal graph for micro-batches without positions; auto falls back to the fallback
  // method (its softmax kernel masks per document) and a forced cudnn is refused when none has.
  model::AttentionPlan plan(DType p, int B, int T, int C, int NH, int KVH, bool document_mask = false);
  Method method(DType p) const;  // kAuto until plan() ran for p

  // The contracts of model::Kernels::attention_forward / attention_backward; pos (B,T) the
  // document positions of the document-masked ops (null: causal over the whole sequence).
  void forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int KVH,
               const int* pos = nullptr);
  void forward(bf16* out, float* att, const bf16* qkv, int B, int T, int C, int NH, int KVH,
               const int* pos = nullptr);
  void backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                const float* att, int B, int T, int C, int NH, int KVH, const int* pos = nullptr);
  void backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                const float* att, int B, int T, int C, int NH, int KVH, const int* pos = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The exact method's kernels (fp32): out (B,T,C) writes, att (B,NH,T,T) writes the softmax
// probabilities (0 above the diagonal); dqkv (B,T,(NH+2KVH)*HS) writes, scratch (B,NH,T,T)
// receives the pre-softmax score gradients.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                       int KVH, cudaStream_t stream = nullptr);
// The same over each query's document: keys t - pos[b,t] .. t (pos (B,T) device memory).
void attention_forward(float* out, float* att, const float* qkv, const int* pos, int B, int T, int C, int NH,
                       int KVH, cudaStream_t stream = nullptr);
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, int KVH,
                        cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
