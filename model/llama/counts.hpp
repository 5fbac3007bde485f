// Llama's counts, pure functions of a (shard) config: one block's parameters and GEMM
// weights, its per-layer buffers and its gradient scratch, with the indices its block code
// (block.cpp) uses. Legend of model/gpt_config.hpp: N = B*T rows, QKV = Cl + 2 KVl, Fl = F/tp.
#pragma once

#include <cstdint>
#include <vector>

#include "model/counts.hpp"
#include "model/gpt_config.hpp"

namespace holmes::model::llama {

// The 9 tensors of a layer in layout order: q_proj, k_proj and v_proj are adjacent, so they are
// one (QKV, C) matrix at kQ; gate_proj and up_proj likewise one (2Fl, C) matrix at kGate whose
// output rows are [gate | up], SwiGLU's input.
enum Tensor { kNorm1W, kQ, kK, kV, kO, kNorm2W, kGate, kUp, kDown, kTensors };

// The per-layer buffers, in the order of layer_buffers.
enum Buffer {
  kNorm1, kNorm1Rstd,  // (N,C) input_layernorm's output, (N) its rstd
  kQkv,                // (N,QKV) with q and k rotated
  kAtty, kAtt,         // (N,Cl) attention's output, its state (AttentionPlan::state_floats)
  kRes2,               // (N,C) residual stream after attention
  kNorm2, kNorm2Rstd,  // post_attention_layernorm
  kGateUp, kSwiglu,    // (N,2Fl) [gate | up], (N,Fl) SwiGLU's output
  kRes3,               // (N,C) the block output
  kGradRes3, kGradGateUp, kGradRes2, kGradQkv,  // GEMM output gradients B leaves for W
  kBuffers
};

enum Scratch { kDatty, kDswiglu, kScratchBuffers };  // (N,Cl) attention output's, (N,Fl) SwiGLU output's gradient

inline BlockCounts block_counts(const GptConfig& c) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), QKV = c.local_qkv();
  BlockCounts b;
  // two RMSNorms C, q k v QKV C, o C Cl, gate and up 2 Fl C, down C Fl.
  b.params = 2 * C + QKV * C + C * Cl + 3 * Fl * C;
  b.gemm_weights = QKV * C + Cl * C + 3 * Fl * C;
  b.gemm_in_channels = C + Cl + C + Fl;  // q k v, o, gate and up (one GEMM), down
  b.gemm_out_channels = QKV + C + 2 * Fl + C;
  b.replay_skipped = C * Fl;  // down_proj: the backward reads not its output
  b.attention_channels = Cl;
  b.tp_sums = 4;  // attention and MLP outputs forward, the two RMSNorms' input gradients backward
  return b;
}

inline std::vector<LayerBuffer> layer_buffers(const GptConfig& c, int64_t N, const AttentionPlan& att) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), QKV = c.local_qkv();
  using K = Keep;
  std::vector<LayerBuffer> b(kBuffers);
  b[kNorm1] = b[kNorm2] = {N * C, false, K::kReplayed};
  b[kNorm1Rstd] = b[kNorm2Rstd] = {N, true, K::kReplayed};
  b[kQkv] = {N * QKV, false, K::kSelective};
  b[kAtty] = {N * Cl, false, K::kAttention};
  b[kAtt] = {static_cast<int64_t>(att.state_floats), true, K::kAttention};
  b[kRes2] = {N * C, false, K::kSelective};
  b[kGateUp] = {N * 2 * Fl, false, K::kSelective};
  b[kSwiglu] = {N * Fl, false, K::kReplayed};
  b[kRes3] = {N * C, false, K::kOutput};
  b[kGradRes3] = b[kGradRes2] = {N * C, false, K::kWeightGrad, true};
  b[kGradGateUp] = {N * 2 * Fl, false, K::kWeightGrad};
  b[kGradQkv] = {N * QKV, false, K::kWeightGrad};
  return b;
}

inline std::vector<int64_t> gradient_scratch(const GptConfig& c, int64_t N) {
  return {N * c.local_channels(), N * c.local_mlp()};
}

}  // namespace holmes::model::llama
