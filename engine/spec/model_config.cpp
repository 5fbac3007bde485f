#include "engine/spec/model_config.hpp"

namespace holmes::spec {

model::GptConfig model_config(const ModelSection& m) {
  model::GptConfig cfg;
  if (m.is_llama()) {
    cfg.arch = model::Arch::kLlama;
    cfg.kv_heads = m.kv_heads;
    cfg.ffn_hidden = m.ffn_hidden;
    cfg.ffn_multiple = m.ffn_multiple;
    cfg.rope_theta = m.rope_theta;
    cfg.norm_eps = static_cast<float>(m.norm_eps);
    cfg.tie_embeddings = m.tie_embeddings;
  }
  cfg.layers = m.layers;
  cfg.hidden = m.hidden;
  cfg.heads = m.heads;
  cfg.vocab = m.vocab_size;
  cfg.max_seq_len = m.max_seq_len;
  cfg.finalize();
  return cfg;
}

}  // namespace holmes::spec
