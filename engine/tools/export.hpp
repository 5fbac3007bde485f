// Export of a trained model as Hugging Face GPT-2 (`GPT2LMHeadModel`) or Llama
// (`LlamaForCausalLM`): model.safetensors plus config.json, so the weights load in the
// ecosystem users already have; and the reading of a whole model from wherever holmes-train or
// Hugging Face left one (eval, sample, export take the same paths). The tensor names, layouts
// and config.json of both architectures, both ways, are engine/checkpoint/hf_format.hpp; the
// safetensors format is engine/checkpoint/safetensors.hpp.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/hf_format.hpp"
#include "model/gpt_config.hpp"

namespace holmes::tools {

// A whole model: the global config (tp = 1, one stage) and its flat parameter buffer in
// ParamLayout order (padded vocabulary rows included).
struct FullModel {
  model::GptConfig config;
  std::vector<float> params;
  std::string source;  // what was read, for messages ("checkpoint DIR at step S", "weights FILE")
  checkpoint::RunTokenizer tokenizer;  // from a checkpoint's manifest; hash 0 = not recorded
};

// Reads a model from `path`: a checkpoint folder (step-XXXXXXXX/ with its manifest), a
// checkpoint.dir (its newest complete step), a folder holding model.bin (a run's
// <output_dir>/final), a model.bin file, a run's output_dir (final/model.bin, else the
// newest checkpoint under checkpoints/), or a Hugging Face folder (config.json with
// model.safetensors or its sharded index; GPT2LMHeadModel or LlamaForCausalLM). UserError
// naming the path and what is accepted when it is none of these or is damaged.
FullModel load_full_model(const std::string& path);

using checkpoint::HfTensor;
using checkpoint::hf_config_json;
using checkpoint::kHfConfigFile;
using checkpoint::kSafetensorsFile;
using checkpoint::safetensors_bytes;
using checkpoint::safetensors_header;
using checkpoint::to_hf;
using checkpoint::write_safetensors;

struct ExportResult {
  bool replaced_previous = false;  // out_dir held an earlier export that was overwritten
  size_t tensor_count = 0;
  uint64_t safetensors_bytes = 0;
};

// Writes model.safetensors and config.json (by cfg.arch) into out_dir (created when missing). Refuses with
// a UserError when out_dir is a file or holds anything but a previous export. Each file is
// written under a temporary name and renamed, so a reader never sees half a file.
ExportResult write_hf_export(const model::GptConfig& cfg, std::span<const float> params, const std::string& out_dir);

}  // namespace holmes::tools
