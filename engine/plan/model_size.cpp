#include "engine/plan/model_size.hpp"

#include <algorithm>
#include <vector>

namespace holmes::plan {

int64_t GptShape::kv_channels() const {
  const int kv = kv_heads > 0 ? kv_heads : heads;
  return int64_t{kv} * (heads > 0 ? hidden / heads : 0);
}

int64_t GptShape::mlp() const { return ffn_hidden > 0 ? ffn_hidden : int64_t{4} * hidden; }

GptShape shape_of(const spec::ModelSection& m) {
  GptShape s;
  s.layers = m.layers;
  s.hidden = m.hidden;
  s.heads = m.heads;
  s.vocab = m.vocab_size;
  s.max_seq_len = m.max_seq_len;
  s.arch = m.arch;
  if (!m.is_llama()) return s;  // gpt2: KV = C, F = 4C, tied
  s.kv_heads = m.resolved_kv_heads();
  int64_t f = m.ffn_hidden;
  if (f == 0) {  // 2/3 of 4C, rounded up to ffn_multiple (model::GptConfig::default_ffn_hidden)
    const int64_t mult = std::max(m.ffn_multiple, 1);
    f = ((int64_t{8} * m.hidden + 2) / 3 + mult - 1) / mult * mult;
  }
  s.ffn_hidden = static_cast<int>(f);
  s.tie_embeddings = m.tie_embeddings;
  return s;
}

int64_t padded_vocab(int vocab, int tp) {
  int64_t multiple = std::max<int64_t>(128, int64_t{64} * tp);
  return (vocab + multiple - 1) / multiple * multiple;
}

int64_t block_params(const GptShape& s) {
  const int64_t c = s.hidden;
  // gpt2: ln1 2C, qkv 3C^2 + 3C, proj C^2 + C, ln2 2C, fc 4C^2 + 4C, fc-proj 4C^2 + C.
  if (!s.llama()) return 12 * c * c + 13 * c;
  // llama: q C^2, k and v C KV each, o C^2, gate and up C F each, down C F, two RMSNorms C.
  return 2 * c * c + 2 * c * s.kv_channels() + 3 * c * s.mlp() + 2 * c;
}

int64_t embedding_params(const GptShape& s, int tp) {
  const int64_t positions = s.llama() ? 0 : int64_t{s.max_seq_len} * s.hidden;
  return padded_vocab(s.vocab, tp) * s.hidden + positions;
}

int64_t final_norm_params(const GptShape& s) { return (s.llama() ? 1 : 2) * int64_t{s.hidden}; }

int64_t untied_head_params(const GptShape& s, int tp) {
  return s.llama() && !s.tie_embeddings ? padded_vocab(s.vocab, tp) * s.hidden : 0;
}

int64_t total_params(const GptShape& s, int tp) {
  return s.layers * block_params(s) + embedding_params(s, tp) + final_norm_params(s) + untied_head_params(s, tp);
}

int64_t model_params(const GptShape& s) {
  const int64_t vc = int64_t{s.vocab} * s.hidden;
  const int64_t embeddings = s.llama() ? vc * (s.tie_embeddings ? 1 : 2) : vc + int64_t{s.max_seq_len} * s.hidden;
  return s.layers * block_params(s) + embeddings + final_norm_params(s);
}

double block_forward_flops_per_token(const GptShape& s, int64_t t) {
  const double c = s.hidden;
  // Two FLOPs per weight of the block's matrices, biases and norms aside.
  const double weights =
      s.llama() ? 2 * c * c + 2 * c * double(s.kv_channels()) + 3 * c * double(s.mlp()) : 12.0 * c * c;
  return 2.0 * weights + 4.0 * double(t) * c;
}

double head_forward_flops_per_token(int64_t c, int64_t vp) { return 2.0 * double(c) * double(vp); }

double train_flops_per_token(const GptShape& s, int tp, int64_t seq_len) {
  double fwd = s.layers * block_forward_flops_per_token(s, seq_len) +
               head_forward_flops_per_token(s.hidden, padded_vocab(s.vocab, tp));
  return 3.0 * fwd;
}

namespace {

// The per-layer buffers of model::Gpt (model/gpt_buffers.hpp LayerBuf order) per micro-batch,
// and whether `mode` keeps each in the slot (model/gpt_activations.cpp kept_in_slot).
struct LayerBuffer {
  double bytes;
  bool kept;
};

std::vector<LayerBuffer> layer_buffers(const GptShape& s, int64_t t, int64_t b, int tp, int a, ActivationMode mode) {
  const double c = s.hidden, tokens = double(t) * double(b), qkv = (c + 2.0 * double(s.kv_channels())) / tp;
  const double f = double(s.mlp()) / tp, mlp_in = s.llama() ? 2 * f : f;
  const double mean = s.llama() ? 0 : 4;  // RMSNorm keeps no mean
  const bool fused = a == 2;              // bf16 attention is cuDNN's: softmax statistics only
  const double heads = double(s.heads) / tp * double(b);
  const double state = fused ? heads * double(t) * 4.0 : heads * double(t) * double(t) * 4.0;
  using R = spec::Recompute;
  const bool none = mode.recompute == R::kNone, sel = mode.recompute == R::kSelective;
  const double split = mode.split_backward ? tokens * a : 0;
  return {{tokens * a * c, none},       {tokens * (mean + 4), none},      {tokens * a * qkv, none || sel},
          {tokens * a * c / tp, none || (sel && fused)},                  {state, none || (sel && fused)},
          {tokens * a * c, none || sel}, {tokens * a * c, none},          {tokens * (mean + 4), none},
          {tokens * a * mlp_in, none || sel},                             {tokens * a * f, none},
          {tokens * a * c, true},
          // the GEMM output gradients a split backward keeps from B to W
          {split * (2 * c + mlp_in + qkv), true}};
}

}  // namespace

double block_activation_bytes(const GptShape& s, int64_t t, int64_t b, int tp, int act_bytes, ActivationMode mode) {
  double sum = 0;
  for (const LayerBuffer& l : layer_buffers(s, t, b, tp, act_bytes, mode))
    if (l.kept) sum += l.bytes;
  return sum;
}

double recompute_work_bytes(const GptShape& s, int64_t t, int64_t b, int tp, int act_bytes, ActivationMode mode) {
  double sum = 0;
  for (const LayerBuffer& l : layer_buffers(s, t, b, tp, act_bytes, mode))
    if (!l.kept) sum += l.bytes;
  return sum;
}

double stage_extra_activation_bytes(const GptShape& s, int64_t t, int64_t b, int tp, int a, ActivationMode mode,
                                    bool first, bool last) {
  const double c = s.hidden, tokens = double(t) * double(b);
  double bytes = tokens * a * c;                                  // the stage input
  if (a == 2 && !last) bytes += tokens * c * 2;                   // bf16 boundary copy of the output
  if (first && mode.split_backward) bytes += tokens * a * c;      // the embedding's W reads its gradient
  if (last) {
    const double stats = s.llama() ? 4 : 8;
    bytes += tokens * (a * c + stats + a * double(padded_vocab(s.vocab, tp)) / tp + 16);
  }
  return bytes;
}

double recompute_flops_per_token(const GptShape& s, int64_t t, int tp, int act_bytes, ActivationMode mode) {
  const double c = s.hidden;
  double replay = 0;
  if (mode.recompute == spec::Recompute::kSelective) {
    if (act_bytes != 2) replay = 4.0 * double(t) * c;  // an unfused attention: QK^T and the weighted sum
  } else if (mode.recompute == spec::Recompute::kFull) {
    replay = block_forward_flops_per_token(s, t) - 2.0 * c * double(s.mlp());  // all but the last GEMM
  }
  return replay * (mode.split_backward ? 2 : 1) / tp;
}

double stage_train_flops(const GptShape& s, int layers, bool last, int tp, int64_t seq_len, double tokens) {
  double fwd = layers * block_forward_flops_per_token(s, seq_len);
  if (last) fwd += head_forward_flops_per_token(s.hidden, padded_vocab(s.vocab, tp));
  return 3.0 * fwd * tokens / tp;
}

double stage_weight_grad_flops(const GptShape& s, int layers, bool last, int tp, int64_t seq_len, double tokens) {
  // The forward FLOPs of the block's matrices (its attention's 4 T C have no weights), again.
  double w = layers * (block_forward_flops_per_token(s, seq_len) - 4.0 * double(seq_len) * s.hidden);
  if (last) w += head_forward_flops_per_token(s.hidden, padded_vocab(s.vocab, tp));
  return w * tokens / tp;
}

}  // namespace holmes::plan
