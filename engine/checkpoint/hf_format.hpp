// Hugging Face checkpoints <-> holmes-train's model, both ways and for both architectures:
//   gpt2  <-> GPT2LMHeadModel: ours (model/param_layout.hpp) -> transformer.<name>; Linear
//             weights (out, in) <-> HF Conv1D (in, out), transposed; lm_head tied (not stored).
//   llama <-> LlamaForCausalLM: the same names (ours are HF's) and the same Linear (out, in)
//             layout; rotary embeddings in HF's rotate-half convention, so q_proj and k_proj
//             need no permutation; lm_head.weight unless tie_word_embeddings.
// Vocabulary tensors hold the V real rows in HF (our padding rows are dropped on the way out
// and zero on the way in). config.json carries the sizes; reading it refuses what the model
// does not run (another model_type, biases, rope_scaling, another activation), naming the key.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"

namespace holmes::checkpoint {

// Pure conversion: the model `cfg` (finalized, tp = 1, one stage) with flat buffer `params`
// [ParamLayout(cfg).size()] -> HF tensors, in layout order (GPT2LMHeadModel or
// LlamaForCausalLM by cfg.arch). std::invalid_argument when the config is a shard or the
// buffer size does not match.
std::vector<HfTensor> to_hf(const model::GptConfig& cfg, std::span<const float> params);
std::vector<HfTensor> to_hf_gpt2(const model::GptConfig& cfg, std::span<const float> params);

// config.json of the HF model with this model's sizes (GPT2LMHeadModel: gelu_new, LayerNorm
// eps 1e-5; LlamaForCausalLM: silu, RMSNorm eps, rope_theta, num_key_value_heads, no biases).
std::string hf_config_json(const model::GptConfig& cfg);
std::string hf_gpt2_config_json(const model::GptConfig& cfg);

inline constexpr const char* kHfConfigFile = "config.json";

// The model a Hugging Face folder's config.json describes (tp = 1, one stage, finalized).
// UserError naming the folder, the key, its value and what is accepted.
model::GptConfig read_hf_config(const std::string& dir);

// "" when `hf` (a folder's config) is the model `job` describes (the job spec's model.*), else
// every difference as "config.json KEY = X, the job's model.KEY = Y" joined by "; ".
// model.max_seq_len: gpt2 must match n_positions (its learned table); llama may differ
// (rotary positions carry no weights).
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
