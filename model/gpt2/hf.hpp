// GPT-2 as Hugging Face's GPT2LMHeadModel: tensors "transformer.<our name>" (GPT2Model files:
// the bare name), wte/wpe as "wte.weight"/"wpe.weight", Linear weights stored as Conv1D
// (in, out), the LM head tied (not stored); config.json with n_layer, n_embd, n_head,
// n_positions, gelu_new and LayerNorm eps 1e-5.
#pragma once

#include "model/hf_map.hpp"

namespace holmes::model::gpt2 {

class Hf final : public HfMap {
 public:
  const char* model_type() const override { return "gpt2"; }
  std::vector<std::string> classes() const override { return {"GPT2LMHeadModel", "GPT2Model"}; }
  std::vector<std::string> tensor_names(const std::string& ours) const override;
  bool transposed(const ParamTensor& t) const override;
  std::string config_json(const GptConfig& cfg) const override;
  GptConfig read_config(const HfConfigKeys& c) const override;
  std::vector<HfKeyPair> compared_keys(const GptConfig& hf, const GptConfig& job) const override;
};

}  // namespace holmes::model::gpt2
