#include "engine/plan/model_size.hpp"

#include <algorithm>

namespace holmes::plan {

int64_t padded_vocab(int vocab, int tp) {
  int64_t multiple = std::max<int64_t>(128, int64_t{64} * tp);
  return (vocab + multiple - 1) / multiple * multiple;
}

int64_t block_params(int64_t c) {
  // ln1 2C, qkv 3C^2 + 3C, proj C^2 + C, ln2 2C, fc 4C^2 + 4C, fc-proj 4C^2 + C.
  return 12 * c * c + 13 * c;
}

int64_t embedding_params(const GptShape& s, int tp) {
  return padded_vocab(s.vocab, tp) * s.hidden + int64_t{s.max_seq_len} * s.hidden;
}

int64_t final_norm_params(int64_t hidden) { return 2 * hidden; }

int64_t total_params(const GptShape& s, int tp) {
  return s.layers * block_params(s.hidden) + embedding_params(s, tp) + final_norm_params(s.hidden);
}

int64_t model_params(const GptShape& s) {
  return s.layers * block_params(s.hidden) + int64_t{s.vocab} * s.hidden + int64_t{s.max_seq_len} * s.hidden +
         final_norm_params(s.hidden);
}

double block_forward_flops_per_token(int64_t c, int64_t t) {
  return 24.0 * double(c) * double(c) + 4.0 * double(t) * double(c);
}

double head_forward_flops_per_token(int64_t c, int64_t vp) { return 2.0 * double(c) * double(vp); }

double train_flops_per_token(const GptShape& s, int tp, int64_t seq_len) {
  double fwd = s.layers * block_forward_flops_per_token(s.hidden, seq_len) +
               head_forward_flops_per_token(s.hidden, padded_vocab(s.vocab, tp));
  return 3.0 * fwd;
}

double block_activation_bytes(const GptShape& s, int64_t t, int64_t b, int tp, int act_bytes) {
  double c = s.hidden, nh = s.heads;
  double per_elem = 10.0 + 24.0 / tp + 5.0 * nh * double(t) / (c * tp);
  return double(t) * double(b) * c * per_elem * (act_bytes / 2.0);
}

double head_activation_bytes(const GptShape& s, int64_t t, int64_t b, int tp, int act_bytes) {
  return double(t) * double(b) * double(padded_vocab(s.vocab, tp)) / tp * (act_bytes + 4);
}

double stage_train_flops(const GptShape& s, int layers, bool last, int tp, int64_t seq_len, double tokens) {
  double fwd = layers * block_forward_flops_per_token(s.hidden, seq_len);
  if (last) fwd += head_forward_flops_per_token(s.hidden, padded_vocab(s.vocab, tp));
  return 3.0 * fwd * tokens / tp;
}

}  // namespace holmes::plan
