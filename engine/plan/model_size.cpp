#include "engine/plan/model_size.hpp"

namespace holmes::plan {

model::AttentionPlan presumed_attention(int act_bytes, int64_t b, int64_t t, int64_t heads) {
  model::AttentionPlan att;
  const int64_t rows = b * heads * t, probs = rows * t;
  att.probabilities = act_bytes != 2;
  att.state_floats = static_cast<size_t>(att.probabilities ? probs : rows);
  return att;
}

double document_bias_bytes(int64_t t, int64_t b, int act_bytes, ActivationMode mode) {
  return mode.document_mask && act_bytes == 2 ? 2.0 * double(b) * double(t) * double(t) : 0.0;
}

namespace {

model::ActivationPolicy policy_of(ActivationMode mode) {
  using R = spec::Recompute;
  const model::Recompute r = mode.recompute == R::kFull        ? model::Recompute::kFull
                             : mode.recompute == R::kSelective ? model::Recompute::kSelective
                                                               : model::Recompute::kNone;
  return {r, mode.split_backward, mode.document_mask};
}

// Bytes of one layer's buffers of the tensor-parallel shard t of `global` per micro-batch
// (b sequences of t tokens): those the slot keeps (kept) or the others.
double layer_bytes(const model::GptConfig& global, int64_t t, int64_t b, int tp, int a, ActivationMode mode,
                   bool kept) {
  const model::GptConfig shard = global.shard(tp, 0);
  const model::AttentionPlan att = presumed_attention(a, b, t, shard.local_heads());
  const model::ActivationPolicy policy = policy_of(mode);
  double sum = 0;
  for (const model::LayerBuffer& l : model::layer_buffers(shard, t * b, att)) {
    const bool in_slot = model::kept_in_slot(l, policy, att.probabilities);
    if (l.keep == model::Keep::kWeightGrad && !in_slot) continue;  // no split: no buffer at all
    if (in_slot == kept) sum += double(l.elems) * (l.fp32 ? 4 : a);
  }
  return sum;
}

}  // namespace

double block_activation_bytes(const model::GptConfig& global, int64_t t, int64_t b, int tp, int act_bytes,
                              ActivationMode mode) {
  return layer_bytes(global, t, b, tp, act_bytes, mode, true);
}

double recompute_work_bytes(const model::GptConfig& global, int64_t t, int64_t b, int tp, int act_bytes,
                            ActivationMode mode) {
  return layer_bytes(global, t, b, tp, act_bytes, mode, false);
}

double stage_extra_activation_bytes(const model::GptConfig& s, int64_t t, int64_t b, int tp, int a,
                                    ActivationMode mode, bool first, bool last) {
  const double c = s.hidden, tokens = double(t) * double(b);
  double bytes = tokens * a * c;                                  // the stage input
  if (a == 2 && !last) bytes += tokens * c * 2;                   // bf16 boundary copy of the output
  if (first && mode.split_backward) bytes += tokens * a * c;      // the embedding's W reads its gradient
  if (last) {
    const double stats = 4.0 * model::norm_stats(model::final_norm(s));
    bytes += tokens * (a * c + stats + a * double(padded_vocab(s.vocab, tp)) / tp + 16);
  }
  return bytes;
}

double recompute_flops_per_token(const model::GptConfig& s, int64_t t, int tp, int act_bytes, ActivationMode mode) {
  const double c = s.hidden;
  double replay = 0;
  if (mode.recompute == spec::Recompute::kSelective) {
    if (presumed_attention(act_bytes, 1, t, 1).probabilities)
      replay = 4.0 * double(t) * c;  // an unfused attention: QK^T and the weighted sum
  } else if (mode.recompute == spec::Recompute::kFull) {
    replay = block_forward_flops_per_token(s, t) - 2.0 * double(model::block_counts(s).replay_skipped);
  }
  return replay * (mode.split_backward ? 2 : 1) / tp;
}

}  // namespace holmes::plan
