#include "engine/plan/model_size.hpp"

#include <algorithm>

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

double block_activation_bytes(const GptShape& s, int64_t t, int64_t b, int tp, int act_bytes) {
  const double c = s.hidden, nh = s.heads, tokens = double(t) * double(b);
  if (!s.llama()) {
    double per_elem = 10.0 + 24.0 / tp + 5.0 * nh * double(t) / (c * tp);
    return tokens * c * per_elem * (act_bytes / 2.0);
  }
  const double kv = double(s.kv_channels()), f = double(s.mlp());
  const double per_token = act_bytes * (4 * c + (c + 2 * kv) / tp + c / tp + 3 * f / tp) + 8.0;
  const double heads = nh / tp * double(b);
  const double attention = act_bytes == 2 ? heads * double(t) * 4.0 : heads * double(t) * double(t) * 4.0;
  return tokens * per_token + attention;
}

double head_activation_bytes(const GptShape& s, int64_t t, int64_t b, int tp, int act_bytes) {
  return double(t) * double(b) * double(padded_vocab(s.vocab, tp)) / tp * (act_bytes + 4);
}

double stage_train_flops(const GptShape& s, int layers, bool last, int tp, int64_t seq_len, double tokens) {
  double fwd = layers * block_forward_flops_per_token(s, seq_len);
  if (last) fwd += head_forward_flops_per_token(s.hidden, padded_vocab(s.vocab, tp));
  return 3.0 * fwd * tokens / tp;
}

}  // namespace holmes::plan
