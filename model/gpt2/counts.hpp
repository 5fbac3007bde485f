// GPT-2's counts, pure functions of a (shard) config: one block's parameters and GEMM
// weights, its per-layer buffers and its gradient scratch, with the indices its block code
// (block.cpp) uses. Legend of model/gpt_config.hpp: N = B*T rows, Cl = C/tp, Fl = 4C/tp.
#pragma once

#include <cstdint>
#include <vector>

#include "model/counts.hpp"
#include "model/gpt_config.hpp"

namespace holmes::model::gpt2 {

// The 12 tensors of a layer in layout order (layer_tensors in gpt2.cpp has the shapes).
enum Tensor { kLn1W, kLn1B, kQkvW, kQkvB, kAttProjW, kAttProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB, kTensors };

// The per-layer buffers, in the order of layer_buffers.
enum Buffer {
  kLn1, kLn1Mean, kLn1Rstd,  // (N,C) ln_1's output, (N) its mean and rstd
  kQkv,                      // (N,3Cl)
  kAtty, kAtt,               // (N,Cl) attention's output, its state (AttentionPlan::state_floats)
  kRes2,                     // (N,C) residual stream after attention
  kLn2, kLn2Mean, kLn2Rstd,  // ln_2
  kFch, kFchGelu,            // (N,Fl) c_fc's output and its GELU
  kRes3,                     // (N,C) the block output
  kGradRes3, kGradFch, kGradRes2, kGradQkv,  // GEMM output gradients B leaves for W
  kBuffers
};

enum Scratch { kDatty, kScratchBuffers };  // (N,Cl) attention output's gradient

inline BlockCounts block_counts(const GptConfig& c) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp();
  BlockCounts b;
  // ln_1 2C, c_attn 3Cl C + 3Cl, attn c_proj C Cl + C, ln_2 2C, c_fc Fl C + Fl, mlp c_proj C Fl + C.
  b.params = 2 * C + 3 * Cl * C + 3 * Cl + C * Cl + C + 2 * C + Fl * C + Fl + C * Fl + C;
  b.gemm_weights = 3 * Cl * C + Cl * C + 2 * Fl * C;
  b.gemm_in_channels = C + Cl + C + Fl;      // c_attn, attn c_proj, c_fc, mlp c_proj
  b.gemm_out_channels = 3 * Cl + C + Fl + C;
  b.replay_skipped = C * Fl;  // mlp c_proj: the backward reads not its output
  b.attention_channels = Cl;
  b.tp_sums = 4;  // attention and MLP outputs forward, the two LayerNorms' input gradients backward
  return b;
}

inline std::vector<LayerBuffer> layer_buffers(const GptConfig& c, int64_t N, const AttentionPlan& att) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp();
  using K = Keep;
  std::vector<LayerBuffer> b(kBuffers);
  b[kLn1] = {N * C, false, K::kReplayed};
  b[kLn1Mean] = b[kLn1Rstd] = {N, true, K::kReplayed};
  b[kQkv] = {N * 3 * Cl, false, K::kSelective};
  b[kAtty] = {N * Cl, false, K::kAttention};
  b[kAtt] = {static_cast<int64_t>(att.state_floats), true, K::kAttention};
  b[kRes2] = {N * C, false, K::kSelective};
  b[kLn2] = {N * C, false, K::kReplayed};
  b[kLn2Mean] = b[kLn2Rstd] = {N, true, K::kReplayed};
  b[kFch] = {N * Fl, false, K::kSelective};
  b[kFchGelu] = {N * Fl, false, K::kReplayed};
  b[kRes3] = {N * C, false, K::kOutput};
  b[kGradRes3] = b[kGradRes2] = {N * C, false, K::kWeightGrad, true};
  b[kGradFch] = {N * Fl, false, K::kWeightGrad};
  b[kGradQkv] = {N * 3 * Cl, false, K::kWeightGrad};
  return b;
}

inline std::vector<int64_t> gradient_scratch(const GptConfig& c, int64_t N) { return {N * c.local_channels()}; }

}  // namespace holmes::model::gpt2
