#include "model/gpt2/hf.hpp"

#include <fmt/format.h>

#include <cmath>

#include "model/gpt2/gpt2.hpp"

namespace holmes::model::gpt2 {

std::vector<std::string> Hf::tensor_names(const std::string& ours) const {
  const std::string n = ours == "wte" || ours == "wpe" ? ours + ".weight" : ours;
  return {"transformer." + n, n};
}

bool Hf::transposed(const ParamTensor& t) const {
  // The 2-D weights other than the embeddings are Linear (out, in) here, Conv1D in HF.
  return t.full_shape.size() == 2 && t.name != "wte" && t.name != "wpe";
}

std::string Hf::config_json(const GptConfig& cfg) const {
  // End-of-text is the last id of both tokenizers we know: the byte-level one (V = 257,
  // id 256) and GPT-2's BPE (V = 50257, id 50256). For any other vocabulary we cannot know.
  const bool known_eot = cfg.vocab == 257 || cfg.vocab == 50257;
  const std::string eot = known_eot ? fmt::format("{}", cfg.vocab - 1) : "null";
  // Dropout is 0: the model was trained without it (holmes-train has no dropout).
  return fmt::format(R"({{
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.0,
  "bos_token_id": {0},
  "embd_pdrop": 0.0,
  "eos_token_id": {0},
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": {1},
  "n_embd": {2},
  "n_head": {3},
  "n_inner": null,
  "n_layer": {4},
  "n_positions": {1},
  "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.0,
  "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true,
  "tie_word_embeddings": true,
  "torch_dtype": "float32",
  "use_cache": true,
  "vocab_size": {5}
}}
)",
                     eot, cfg.max_seq_len, cfg.hidden, cfg.heads, cfg.layers, cfg.vocab);
}

GptConfig Hf::read_config(const HfConfigKeys& c) const {
  const std::string act = c.text_or("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    c.refuse("activation_function", act, "gelu_new or gelu_pytorch_tanh (GPT-2's tanh GELU)");
  const double eps = c.number_or("layer_norm_epsilon", 1e-5);
  if (std::fabs(eps - 1e-5) > 1e-12) c.refuse("layer_norm_epsilon", fmt::format("{}", eps), "1e-05");
  const int C = static_cast<int>(c.integer("n_embd"));
  if (c.has("n_inner") && c.integer("n_inner") != 4 * C)
    c.refuse("n_inner", fmt::format("{}", c.integer("n_inner")), fmt::format("null or 4 x n_embd = {}", 4 * C));
  if (!c.boolean_or("tie_word_embeddings", true))
    c.refuse("tie_word_embeddings", "false", "true (GPT-2 ties its head)");
  return config(static_cast<int>(c.integer("n_layer")), C, static_cast<int>(c.integer("n_head")),
                static_cast<int>(c.integer("vocab_size")), static_cast<int>(c.integer("n_positions")));
}

std::vector<HfKeyPair> Hf::compared_keys(const GptConfig& hf, const GptConfig& job) const {
  auto pair = [](const char* hf_key, const char* job_key, auto a, auto b) {
    return HfKeyPair{hf_key, job_key, fmt::format("{}", a), fmt::format("{}", b)};
  };
  // n_positions: the learned position table has that many rows.
  return {pair("n_layer", "layers", hf.layers, job.layers), pair("n_embd", "hidden", hf.hidden, job.hidden),
          pair("n_head", "heads", hf.heads, job.heads), pair("vocab_size", "vocab_size", hf.vocab, job.vocab),
          pair("n_positions", "max_seq_len", hf.max_seq_len, job.max_seq_len)};
}

}  // namespace holmes::model::gpt2
