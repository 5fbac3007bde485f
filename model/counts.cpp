#include "model/counts.hpp"

#include <algorithm>

#include "model/architecture.hpp"

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

BlockCounts block_counts(const GptConfig& cfg) { return cfg.architecture().block_counts(cfg); }

std::vector<LayerBuffer> layer_buffers(const GptConfig& cfg, int64_t N, const AttentionPlan& att) {
  return cfg.architecture().layer_buffers(cfg, N, att);
}

int64_t position_params(const GptConfig& cfg) {
  return cfg.architecture().role_names(cfg).positions.empty() ? 0 : int64_t{cfg.max_seq_len} * cfg.hidden;
}

NormKind final_norm(const GptConfig& cfg) { return cfg.architecture().final_norm(); }

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
