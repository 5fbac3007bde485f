#include "model/llama/hf.hpp"

#include <fmt/format.h>

namespace holmes::model::llama {

std::string Hf::config_json(const GptConfig& cfg) const {
  // The byte-level tokenizer's end-of-text (V = 257, id 256) is the one id we know.
  const std::string eot = cfg.vocab == 257 ? "256" : "null";
  return fmt::format(R"({{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": {0},
  "eos_token_id": {0},
  "head_dim": {1},
  "hidden_act": "silu",
  "hidden_size": {2},
  "initializer_range": 0.02,
  "intermediate_size": {3},
  "max_position_embeddings": {4},
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": {5},
  "num_hidden_layers": {6},
  "num_key_value_heads": {7},
  "pretraining_tp": 1,
  "rms_norm_eps": {8:.9g},
  "rope_scaling": null,
  "rope_theta": {9:.17g},
  "tie_word_embeddings": {10},
  "torch_dtype": "float32",
  "use_cache": true,
  "vocab_size": {11}
}}
)",
                     eot, cfg.head_size(), cfg.hidden, cfg.ffn_hidden, cfg.max_seq_len, cfg.heads, cfg.layers,
                     cfg.kv_heads, cfg.norm_eps, cfg.rope_theta, cfg.tie_embeddings ? "true" : "false", cfg.vocab);
}

GptConfig Hf::read_config(const HfConfigKeys& c) const {
  const std::string act = c.text_or("hidden_act", "silu");
  if (act != "silu") c.refuse("hidden_act", act, "silu (SwiGLU)");
  for (const char* bias : {"attention_bias", "mlp_bias"})
    if (c.boolean_or(bias, false)) c.refuse(bias, "true", "false (the llama architecture has no biases)");
  if (c.has("rope_scaling"))
    c.refuse("rope_scaling", c.dump("rope_scaling"), "null (plain rotary embeddings, rope_theta only)");
  const int C = static_cast<int>(c.integer("hidden_size")), NH = static_cast<int>(c.integer("num_attention_heads"));
  if (c.has("head_dim") && NH > 0 && c.integer("head_dim") != C / NH)
    c.refuse("head_dim", fmt::format("{}", c.integer("head_dim")),
             fmt::format("hidden_size / num_attention_heads = {}", C / NH));
  GptConfig g;
  g.arch = "llama";
  g.layers = static_cast<int>(c.integer("num_hidden_layers"));
  g.hidden = C;
  g.heads = NH;
  g.kv_heads = static_cast<int>(c.integer_or("num_key_value_heads", NH));
  g.ffn_hidden = static_cast<int>(c.integer("intermediate_size"));
  g.vocab = static_cast<int>(c.integer("vocab_size"));
  g.max_seq_len = static_cast<int>(c.integer("max_position_embeddings"));
  g.rope_theta = c.number_or("rope_theta", 10000.0);
  g.norm_eps = static_cast<float>(c.number_or("rms_norm_eps", 1e-6));
  g.tie_embeddings = c.boolean_or("tie_word_embeddings", false);
  g.finalize();
  return g;
}

std::vector<HfKeyPair> Hf::compared_keys(const GptConfig& hf, const GptConfig& job) const {
  auto pair = [](const char* hf_key, const char* job_key, auto a, auto b) {
    return HfKeyPair{hf_key, job_key, fmt::format("{}", a), fmt::format("{}", b)};
  };
  // max_position_embeddings is not compared: rotary positions carry no weights.
  return {pair("num_hidden_layers", "layers", hf.layers, job.layers),
          pair("hidden_size", "hidden", hf.hidden, job.hidden),
          pair("num_attention_heads", "heads", hf.heads, job.heads),
          pair("vocab_size", "vocab_size", hf.vocab, job.vocab),
          pair("num_key_value_heads", "kv_heads", hf.kv_heads, job.kv_heads),
          pair("intermediate_size", "ffn_hidden", hf.ffn_hidden, job.ffn_hidden),
          pair("rope_theta", "rope_theta", hf.rope_theta, job.rope_theta),
          pair("rms_norm_eps", "norm_eps", hf.norm_eps, job.norm_eps),
          pair("tie_word_embeddings", "tie_embeddings", hf.tie_embeddings, job.tie_embeddings)};
}

}  // namespace holmes::model::llama
