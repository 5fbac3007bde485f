// Export of a trained model as Hugging Face GPT-2 (`GPT2LMHeadModel`): model.safetensors
// plus config.json, so the weights load in the ecosystem users already have.
//
// Our tensors (model/param_layout.hpp, tp = 1, one stage) map to HF names as
//   wte (Vp, C)                  -> transformer.wte.weight (V, C)   padding rows >= V dropped
//   wpe (max_seq_len, C)         -> transformer.wpe.weight (n_positions, C)
//   h.l.ln_1.{weight,bias} (C)   -> transformer.h.l.ln_1.{weight,bias}   (also ln_2, ln_f)
//   h.l.attn.c_attn.weight (3C, C), Linear (out, in)  -> transformer.h.l.attn.c_attn.weight (C, 3C)
//   h.l.attn.c_proj.weight (C, C)                     -> (C, C) transposed
//   h.l.mlp.c_fc.weight (4C, C)                       -> (C, 4C)
//   h.l.mlp.c_proj.weight (C, 4C)                     -> (4C, C)
// HF's Conv1D computes x @ W + b with W (in, out): the transpose of a Linear weight. Biases
// keep their shape. lm_head.weight is not written: GPT-2 ties it to wte (tie_word_embeddings)
// and HF's own save_pretrained drops it from safetensors files for the same reason.
//
// safetensors: u64 little-endian header length N, N bytes of JSON
//   {"__metadata__": {"format": "pt"}, "<name>": {"dtype": "F32", "shape": [...],
//    "data_offsets": [begin, end]}, ...}   (offsets relative to the end of the header)
// padded with spaces to a multiple of 8 bytes, then the raw little-endian tensors back to back.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.hpp"
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
// <output_dir>/final), a model.bin file, or a run's output_dir (final/model.bin, else the
// newest checkpoint under checkpoints/). UserError naming the
// path and what is accepted when it is none of these or is damaged.
FullModel load_full_model(const std::string& path);

// One tensor in HF naming and layout, row-major.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Pure conversion: the model `cfg` (finalized, tp = 1, one stage) with flat buffer `params`
// [ParamLayout(cfg).size()] -> HF GPT-2 tensors, in layout order. std::invalid_argument when
// the config is a shard or the buffer size does not match.
std::vector<HfTensor> to_hf_gpt2(const model::GptConfig& cfg, std::span<const float> params);

// The safetensors JSON header (without the 8-byte length), padded to a multiple of 8 bytes.
std::string safetensors_header(const std::vector<HfTensor>& tensors);
// The whole file: length, header, data. write_safetensors streams the same bytes.
std::string safetensors_bytes(const std::vector<HfTensor>& tensors);
void write_safetensors(std::ostream& out, const std::vector<HfTensor>& tensors);

// config.json of a GPT2LMHeadModel with this model's sizes, gelu_new, LayerNorm eps 1e-5.
std::string hf_gpt2_config_json(const model::GptConfig& cfg);

inline constexpr const char* kSafetensorsFile = "model.safetensors";
inline constexpr const char* kHfConfigFile = "config.json";

struct ExportResult {
  bool replaced_previous = false;  // out_dir held an earlier export that was overwritten
  size_t tensor_count = 0;
  uint64_t safetensors_bytes = 0;
};

// Writes model.safetensors and config.json into out_dir (created when missing). Refuses with
// a UserError when out_dir is a file or holds anything but a previous export. Each file is
// written under a temporary name and renamed, so a reader never sees half a file.
ExportResult write_hf_export(const model::GptConfig& cfg, std::span<const float> params, const std::string& out_dir);

}  // namespace holmes::tools
