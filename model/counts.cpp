#include "model/counts.hpp"

#include <algorithm>

namespace holmes::model {

bool kept_in_slot(const LayerBuffer& b, const ActivationPolicy& policy, bool attention_probabilities) {
  if (b.keep == Keep::kWeightGrad) return policy.split_backward;
  switch (policy.recompute) {
    case Recompute::kNone: return true;
    case Recompute::kFull: return b.keep == Keep::kOutput;
    case Recompute::kSelective:
      if (b.keep == Keep::kAttention) return !attention_probabilities;
      return b.keep == Keep::kSelective || b.keep == Keep::kOutput;
  }
  return true;
}

namespace {

// GPT-2 and Llama blocks: pre-norm, fused q/k/v GEMM, attention, output GEMM; pre-norm, MLP
// in (gpt2 c_fc of Fl; llama gate | up, 2 Fl), activation, MLP out. Their per-layer buffers in
// the order the blocks index them (model/gpt_buffers.hpp LayerBuf).
BlockCounts decoder_block_counts(const GptConfig& c) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), QKV = c.local_qkv();
  const bool llama = c.is_llama();
  BlockCounts b;
  // gpt2: ln1 2C, qkv 3Cl C + 3Cl, proj C Cl + C, ln2 2C, fc Fl C + Fl, fc-proj C Fl + C;
  // llama: two RMSNorms C, q k v (Cl + 2 KVl) C, o C Cl, gate and up 2 Fl C, down C Fl.
  b.params = llama ? 2 * C + QKV * C + C * Cl + 3 * Fl * C : 4 * C + QKV * C + QKV + C * Cl + C + 2 * Fl * C + Fl + C;
  b.gemm_weights = QKV * C + Cl * C + (llama ? 3 : 2) * Fl * C;
  b.replay_skipped = C * Fl;  // the MLP's last GEMM: the backward never reads its output
  b.attention_channels = Cl;
  b.tp_sums = 4;  // attention out and MLP out forward, the two norms' input gradients backward
  return b;
}

std::vector<LayerBuffer> decoder_layer_buffers(const GptConfig& c, int64_t N, const AttentionPlan& att) {
  const int64_t C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), QKV = c.local_qkv();
  const bool llama = c.is_llama();
  const int64_t means = llama ? 0 : N, mlp_in = llama ? 2 * Fl : Fl;
  using K = Keep;
  return {{N * C, false, K::kReplayed},       {means, true, K::kReplayed},          {N, true, K::kReplayed},
          {N * QKV, false, K::kSelective},    {N * Cl, false, K::kAttention},
          {static_cast<int64_t>(att.state_floats), true, K::kAttention},          {N * C, false, K::kSelective},
          {N * C, false, K::kReplayed},       {means, true, K::kReplayed},          {N, true, K::kReplayed},
          {N * mlp_in, false, K::kSelective}, {N * Fl, false, K::kReplayed},       {N * C, false, K::kOutput},
          {N * C, false, K::kWeightGrad, true}, {N * mlp_in, false, K::kWeightGrad}, {N * C, false, K::kWeightGrad, true},
          {N * QKV, false, K::kWeightGrad}};
}

}  // namespace

BlockCounts block_counts(const GptConfig& cfg) { return decoder_block_counts(cfg); }

std::vector<LayerBuffer> layer_buffers(const GptConfig& cfg, int64_t N, const AttentionPlan& att) {
  return decoder_layer_buffers(cfg, N, att);
}

int64_t position_params(const GptConfig& cfg) { return cfg.is_llama() ? 0 : int64_t{cfg.max_seq_len} * cfg.hidden; }

NormKind final_norm(const GptConfig& cfg) { return cfg.is_llama() ? NormKind::kRmsNorm : NormKind::kLayerNorm; }

int64_t padded_vocab(int64_t vocab, int tp) {
  const int64_t multiple = std::max<int64_t>(128, int64_t{64} * tp);
  return (vocab + multiple - 1) / multiple * multiple;
}

int64_t block_params(const GptConfig& global) { return block_counts(global).params; }

int64_t embedding_params(const GptConfig& global, int tp) {
  return padded_vocab(global.vocab, tp) * global.hidden + position_params(global);
}

int64_t final_norm_params(const GptConfig& global) {
  return (final_norm(global) == NormKind::kLayerNorm ? 2 : 1) * int64_t{global.hidden};  // weight (and bias)
}

int64_t untied_head_params(const GptConfig& global, int tp) {
  return global.tie_embeddings ? 0 : padded_vocab(global.vocab, tp) * global.hidden;
}

int64_t total_params(const GptConfig& global, int tp) {
  return global.layers * block_params(global) + embedding_params(global, tp) + final_norm_params(global) +
         untied_head_params(global, tp);
}

int64_t model_params(const GptConfig& global) {
  const int64_t vc = int64_t{global.vocab} * global.hidden;
  return global.layers * block_params(global) + vc * (global.tie_embeddings ? 1 : 2) + position_params(global) +
         final_norm_params(global);
}

double block_forward_flops_per_token(const GptConfig& global, int64_t t) {
  const BlockCounts b = block_counts(global);
  return 2.0 * double(b.gemm_weights) + 4.0 * double(t) * double(b.attention_channels);
}

double head_forward_flops_per_token(int64_t c, int64_t vp) { return 2.0 * double(c) * double(vp); }

double train_flops_per_token(const GptConfig& global, int tp, int64_t seq_len) {
  const double fwd = global.layers * block_forward_flops_per_token(global, seq_len) +
                     head_forward_flops_per_token(global.hidden, padded_vocab(global.vocab, tp));
  return 3.0 * fwd;
}

double stage_train_flops(const GptConfig& global, int layers, bool last, int tp, int64_t seq_len, double tokens) {
  double fwd = layers * block_forward_flops_per_token(global, seq_len);
  if (last) fwd += head_forward_flops_per_token(global.hidden, padded_vocab(global.vocab, tp));
  return 3.0 * fwd * tokens / tp;
}

double stage_weight_grad_flops(const GptConfig& global, int layers, bool last, int tp, int64_t seq_len,
                               double tokens) {
  // The forward FLOPs of the block's GEMMs (attention's 4 T C have no weights), again.
  double w = layers * (block_forward_flops_per_token(global, seq_len) - 4.0 * double(seq_len) * global.hidden);
  if (last) w += head_forward_flops_per_token(global.hidden, padded_vocab(global.vocab, tp));
  return w * tokens / tp;
}

double shard_train_flops(const GptConfig& cfg, int B, int T) {
  const BlockCounts b = block_counts(cfg);
  const double N = static_cast<double>(B) * T, C = cfg.hidden;
  double fwd = cfg.num_stage_layers() * (2 * N * double(b.gemm_weights) + 4.0 * B * T * T * double(b.attention_channels));
  if (cfg.has_head) fwd += 2 * N * C * cfg.local_vocab();
  return 3 * fwd;  // backward costs twice the forward
}

}  // namespace holmes::model
