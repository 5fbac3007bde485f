#include "engine/spec/model_config.hpp"

#include "model/architecture.hpp"

namespace holmes::spec {

model::GptConfig raw_model_config(const ModelSection& m) {
  model::GptConfig cfg;
  cfg.arch = m.arch;
  cfg.layers = m.layers;
  cfg.hidden = m.hidden;
  cfg.heads = m.heads;
  cfg.vocab = m.vocab_size;
  cfg.max_seq_len = m.max_seq_len;
  // The options the architecture reads; the others keep the model's defaults, which its
  // finalize() requires or overrides.
  if (const model::Architecture* a = model::find_architecture(m.arch)) {
    const unsigned reads = a->options();
    if (reads & model::kKvHeads) cfg.kv_heads = m.kv_heads;
    if (reads & model::kFfnHidden) {
      cfg.ffn_hidden = m.ffn_hidden;
      cfg.ffn_multiple = m.ffn_multiple;
    }
    if (reads & model::kRopeTheta) cfg.rope_theta = m.rope_theta;
    if (reads & model::kNormEps) cfg.norm_eps = static_cast<float>(m.norm_eps);
    if (reads & model::kTieEmbeddings) cfg.tie_embeddings = m.tie_embeddings;
  }
  return cfg;
}

model::GptConfig model_config(const ModelSection& m) {
  model::GptConfig cfg = raw_model_config(m);
  cfg.finalize();
  return cfg;
}

}  // namespace holmes::spec
