// Llama as Hugging Face's LlamaForCausalLM: the same tensor names (ours are HF's) and the same
// Linear (out, in) layout; rotary embeddings in HF's rotate-half convention, so q_proj and
// k_proj need no permutation; lm_head.weight unless tie_word_embeddings. config.json refuses
// biases, rope_scaling and another activation.
#pragma once

#include "model/hf_map.hpp"

namespace holmes::model::llama {

class Hf final : public HfMap {
 public:
  const char* model_type() const override { return "llama"; }
  std::vector<std::string> classes() const override { return {"LlamaForCausalLM"}; }
  std::vector<std::string> tensor_names(const std::string& ours) const override { return {ours}; }
  std::string config_json(const GptConfig& cfg) const override;
  GptConfig read_config(const HfConfigKeys& c) const override;
  std::vector<HfKeyPair> compared_keys(const GptConfig& hf, const GptConfig& job) const override;
};

}  // namespace holmes::model::llama
