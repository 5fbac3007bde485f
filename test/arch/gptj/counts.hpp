// gptj's counts (pure): one block's parameters and GEMM weights, its per-layer buffers and its
// gradient scratch, with the indices its block (block.cpp) uses. Legend of
// model/gpt_config.hpp: N = B*T rows, Cl = C/tp, Fl = 4C/tp.
#pragma once

#include <cstdint>
#include <vector>

#include "model/counts.hpp"
#include "model/gpt_config.hpp"

namespace holmes::test::gptj {

using model::AttentionPlan;
using model::BlockCounts;
using model::GptConfig;
using model::Keep;
using model::LayerBuffer;

// The 10 tensors of a layer in layout order; q, k and v are adjacent, one (3Cl, C) matrix at kQ.
enum Tensor { kLnW, kLnB, kQ, kK, kV, kOut, kFcInW, kFcInB, kFcOutW, kFcOutB, kTensors };

enum Buffer {
  kLn, kLnMean, kLnRstd,  // (N,C) ln_1's output, (N) its mean and rstd: both branches read it
  kQkv,                   // (N,3Cl) with q and k rotated
  kAtty, kAtt,            // (N,Cl) attention's output, its state
  kFch, kFchGelu,         // (N,Fl) fc_in's output and its GELU
  kOutput,                // (N,C) the block output
  kGradOut, kGradFch, kGradQkv,  // GEMM output gradients B leaves for W (kGradOut: both projections')
  kBuffers
};

enum Scratch { kDatty, kDlnAttention, kScratchBuffers };  // (N,Cl), (N,C) attention's part of d(ln_1)

inline BlockCounts block_counts(const GptConfig& c) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp();
  BlockCounts b;
  // ln_1 2C, q k v 3 Cl C, out C Cl, fc_in Fl C + Fl, fc_out C Fl + C.
  b.params = 2 * C + 3 * Cl * C + C * Cl + Fl * C + Fl + C * Fl + C;
  b.gemm_weights = 3 * Cl * C + C * Cl + 2 * Fl * C;
  b.gemm_in_channels = C + Cl + C + Fl;  // q k v, out, fc_in, fc_out
  b.gemm_out_channels = 3 * Cl + C + Fl + C;
  b.replay_skipped = C * Cl + C * Fl;  // both output projections: only the block output reads them
  b.attention_channels = Cl;
  b.tp_sums = 2;  // the added outputs forward, the two branches' d(ln_1) backward
  return b;
}

inline std::vector<LayerBuffer> layer_buffers(const GptConfig& c, int64_t N, const AttentionPlan& att) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp();
  std::vector<LayerBuffer> b(kBuffers);
  b[kLn] = {N * C, false, Keep::kReplayed};
  b[kLnMean] = b[kLnRstd] = {N, true, Keep::kReplayed};
  b[kQkv] = {N * 3 * Cl, false, Keep::kSelective};
  b[kAtty] = {N * Cl, false, Keep::kAttention};
  b[kAtt] = {static_cast<int64_t>(att.state_floats), true, Keep::kAttention};
  b[kFch] = {N * Fl, false, Keep::kSelective};
  b[kFchGelu] = {N * Fl, false, Keep::kReplayed};
  b[kOutput] = {N * C, false, Keep::kOutput};
  b[kGradOut] = {N * C, false, Keep::kWeightGrad, true};
  b[kGradFch] = {N * Fl, false, Keep::kWeightGrad};
  b[kGradQkv] = {N * 3 * Cl, false, Keep::kWeightGrad};
  return b;
}

inline std::vector<int64_t> gradient_scratch(const GptConfig& c, int64_t N) {
  return {N * c.local_channels(), N * c.hidden};
}

}  // namespace holmes::test::gptj
