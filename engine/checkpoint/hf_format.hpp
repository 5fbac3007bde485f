// Hugging Face checkpoints <-> holmes-train's model, both ways, for every architecture with a
// Hugging Face name map (model/hf_map.hpp; model/gpt2/hf.hpp: GPT2LMHeadModel, model/llama/
// hf.hpp: LlamaForCausalLM): its tensor names, which tensors HF stores transposed, its
// config.json. Vocabulary tensors hold the V real rows in HF (our padding rows are dropped on
// the way out and zero on the way in). config.json carries the sizes; reading it refuses what
// the model does not run (another model_type, and what the map refuses), naming the key.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.hpp"
#include "model/gpt_config.hpp"
#include "model/hf_map.hpp"
#include "model/param_layout.hpp"

namespace holmes::checkpoint {

// Pure conversion: the model `cfg` (finalized, tp = 1, one stage) with flat buffer `params`
// [ParamLayout(cfg).size()] -> HF tensors, in layout order, named by cfg's architecture's map.
// std::invalid_argument when the config is a shard or the buffer size does not match;
// holmes::UserError when the architecture has no Hugging Face map.
std::vector<HfTensor> to_hf(const model::GptConfig& cfg, std::span<const float> params);

// config.json of the HF model with this model's sizes (HfMap::config_json).
std::string hf_config_json(const model::GptConfig& cfg);

// The architecture's Hugging Face map; holmes::UserError naming model.arch when it has none.
const model::HfMap& hf_map(const model::GptConfig& cfg);
// What an export writes about the LM head: "lm_head tied to <the embedding's HF name>" or
// "<the head's HF name> untied".
std::string hf_head_note(const model::GptConfig& cfg);

inline constexpr const char* kHfConfigFile = "config.json";

// The model a Hugging Face folder's config.json describes (tp = 1, one stage, finalized).
// UserError naming the folder, the key, its value and what is accepted.
model::GptConfig read_hf_config(const std::string& dir);

// "" when `hf` (a folder's config) is the model `job` describes (the job spec's model.*), else
// every difference as "config.json KEY = X, the job's model.KEY = Y" joined by "; ".
// The keys compared are the map's (HfMap::compared_keys: gpt2's n_positions, the rows of its
// learned table; llama's max_position_embeddings is not, rotary positions carry no weights).
std::string hf_config_differences(const model::GptConfig& hf, const model::GptConfig& job);

// Our tensor `t` (of a model of cfg, any shard) in full: full_shape elements in our layout,
// vocabulary padding rows zero, read from `in` under its HF name(s). UserError naming the
// tensor when it is missing or its shape differs.
std::vector<float> read_hf_tensor(const SafetensorsReader& in, const model::GptConfig& cfg,
                                  const model::ParamTensor& t);

// Fills the shard buffer `params` (ParamLayout(shard)) from an HF folder: each element of
// each tensor from read_hf_tensor (shard.global()'s tensors).
void load_hf_shard(const SafetensorsReader& in, const model::GptConfig& shard, std::span<float> params);

// True when `dir` looks like a Hugging Face folder (config.json and safetensors weights).
bool is_hf_folder(const std::string& dir);

}  // namespace holmes::checkpoint
