#include "engine/tools/export.hpp"
#include "engine/spec/run_paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "common/errors.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/model_file.hpp"
#include "model/param_layout.hpp"

namespace holmes::tools {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; the tensors are written as they lie in memory");

namespace {

// Linear weight (rows, cols) -> Conv1D weight (cols, rows).
std::vector<float> transposed(const float* w, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = w[r * cols + c];
  return out;
}

// Our 2-D weights other than the embeddings are Linear (out, in); HF stores them as Conv1D.
bool is_linear_weight(const model::ParamTensor& t) {
  return t.full_shape.size() == 2 && t.name != "wte" && t.name != "wpe";
}

std::string hf_name(const std::string& ours) {
  if (ours == "wte" || ours == "wpe") return "transformer." + ours + ".weight";
  return "transformer." + ours;
}

std::string json_shape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

}  // namespace

std::vector<HfTensor> to_hf_gpt2(const model::GptConfig& cfg, std::span<const float> params) {
  if (cfg.tp_size != 1 || !cfg.has_embedding || !cfg.has_head || cfg.first_layer != 0 ||
      cfg.num_stage_layers() != cfg.layers)
    throw std::invalid_argument("to_hf_gpt2: needs the whole model (tp = 1, one stage), got " + cfg.to_string());
  const model::ParamLayout layout(cfg);
  if (params.size() != layout.size())
    throw std::invalid_argument(fmt::format("to_hf_gpt2: {} parameters given, the model {} has {}", params.size(),
                                            cfg.to_string(), layout.size()));
  std::vector<HfTensor> out;
  out.reserve(layout.tensors().size());
  for (const model::ParamTensor& t : layout.tensors()) {
    const float* p = params.data() + t.offset;
    HfTensor h{hf_name(t.name), t.full_shape, {}};
    if (t.name == "wte") {
      h.shape = {cfg.vocab, cfg.hidden};  // the real vocabulary rows: [0, V) of (Vp, C)
      h.data.assign(p, p + static_cast<size_t>(cfg.vocab) * cfg.hidden);
    } else if (is_linear_weight(t)) {
      h.shape = {t.full_shape[1], t.full_shape[0]};
      h.data = transposed(p, t.full_shape[0], t.full_shape[1]);
    } else {
      h.data.assign(p, p + t.numel);
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::string safetensors_header(const std::vector<HfTensor>& tensors) {
  std::string json = R"({"__metadata__": {"format": "pt"})";
  uint64_t offset = 0;
  for (const HfTensor& t : tensors) {
    const uint64_t bytes = t.data.size() * sizeof(float);
    json += fmt::format(R"(, "{}": {{"dtype": "F32", "shape": {}, "data_offsets": [{}, {}]}})", t.name,
                        json_shape(t.shape), offset, offset + bytes);
    offset += bytes;
  }
  json += "}";
  // 8 + header length a multiple of 8 keeps every tensor 8-byte aligned in a mapped file.
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

void write_safetensors(std::ostream& out, const std::vector<HfTensor>& tensors) {
  const std::string header = safetensors_header(tensors);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const HfTensor& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size() * sizeof(float)));
}

std::string safetensors_bytes(const std::vector<HfTensor>& tensors) {
  std::ostringstream s(std::ios::binary);
  write_safetensors(s, tensors);
  return std::move(s).str();
}

std::string hf_gpt2_config_json(const model::GptConfig& cfg) {
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

namespace {

std::string tmp_name(const char* file) { return std::string(".") + file + ".holmes-tmp"; }

// True when `dir` holds a previous export (nothing but our files); false when it is missing
// or empty; UserError otherwise.
bool check_out_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return false;
  if (!fs::is_directory(dir))
    throw UserError(fmt::format("--out {}: exists and is not a folder; give a new or empty folder", dir.string()));
  const std::vector<std::string> ours = {kSafetensorsFile, kHfConfigFile, tmp_name(kSafetensorsFile),
                                         tmp_name(kHfConfigFile), "tokenizer.json", "tokenizer.model",
                                         tmp_name("tokenizer.json")};  // model_tokenizer.hpp
  bool any = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    any = true;
    const std::string name = e.path().filename().string();
    if (std::find(ours.begin(), ours.end(), name) == ours.end())
      throw UserError(fmt::format("--out {}: folder is not empty and is not a previous export (it holds '{}'; an "
                                  "export holds only {} and {}); give a new or empty folder",
                                  dir.string(), name, kSafetensorsFile, kHfConfigFile));
  }
  // Weights without our config.json may be another tool's; only leftovers of a crashed export
  // (temporary names) or a complete export are ours to replace.
  if (fs::exists(dir / kSafetensorsFile) && !fs::is_regular_file(dir / kHfConfigFile))
    throw UserError(fmt::format("--out {}: holds a {} but no {}, so it is not a previous export; give a new or "
                                "empty folder", dir.string(), kSafetensorsFile, kHfConfigFile));
  return any;
}

template <typename WriteFn>
void write_then_rename(const fs::path& dir, const char* file, WriteFn&& write) {
  const fs::path tmp = dir / tmp_name(file);
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
  write(out);
  out.close();
  if (!out) throw std::runtime_error(fmt::format("{}: writing failed (disk full?)", tmp.string()));
  fs::rename(tmp, dir / file);
}

}  // namespace

ExportResult write_hf_export(const model::GptConfig& cfg, std::span<const float> params, const std::string& out_dir) {
  const fs::path dir(out_dir);
  ExportResult r;
  r.replaced_previous = check_out_dir(dir);
  fs::create_directories(dir);
  const std::vector<HfTensor> tensors = to_hf_gpt2(cfg, params);
  r.tensor_count = tensors.size();
  // Config last: a folder with a config.json always has the matching weights beside it.
  write_then_rename(dir, kSafetensorsFile, [&](std::ostream& o) { write_safetensors(o, tensors); });
  write_then_rename(dir, kHfConfigFile, [&](std::ostream& o) { o << hf_gpt2_config_json(cfg); });
  r.safetensors_bytes = fs::file_size(dir / kSafetensorsFile);
  return r;
}

namespace {

constexpr const char* kCheckpointManifest = "manifest.json";  // in every step folder (checkpoint.hpp)

// Every parameter of the checkpoint's global model, reassembled from its slices into one
// ParamLayout buffer (whatever tp x pp x dp plan saved it).
FullModel read_checkpoint_model(const std::string& dir) {
  const checkpoint::CheckpointInfo info = checkpoint::open_checkpoint(dir);
  const model::ParamLayout layout(info.model);
  FullModel m{info.model, std::vector<float>(layout.size()),
              fmt::format("checkpoint {} (step {})", info.dir, info.step), info.tokenizer};
  for (const model::ParamTensor& t : layout.tensors()) {
    const std::vector<float> full = checkpoint::read_full_tensor(info, t.name);
    if (full.size() != t.numel)
      throw UserError(fmt::format("{}: tensor {} has {} elements, the model {} needs {}", info.dir, t.name,
                                  full.size(), info.model.to_string(), t.numel));
    std::copy(full.begin(), full.end(), m.params.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  return m;
}

FullModel read_weights_model(const fs::path& file) {
  checkpoint::ModelWeights w = checkpoint::load_model_weights(file.string());
  const size_t want = model::ParamLayout(w.config).size();
  if (w.params.size() != want)
    throw UserError(fmt::format("{}: holds {} parameters but its header describes a model of {} ({})", file.string(),
                                w.params.size(), want, w.config.to_string()));
  return FullModel{w.config, std::move(w.params), "weights " + file.string()};
}

}  // namespace

FullModel load_full_model(const std::string& path) {
  const fs::path p(path);
  if (fs::is_regular_file(p)) return read_weights_model(p);
  if (fs::is_regular_file(p / spec::RunPaths::kModelFile)) return read_weights_model(p / spec::RunPaths::kModelFile);
  // A run's job.output_dir: its final weights first (a sharded run writes none).
  const std::string final_model = spec::RunPaths::folder(path).final_model;
  if (!fs::exists(p / kCheckpointManifest) && fs::is_regular_file(final_model)) return read_weights_model(final_model);
  // A step folder, a checkpoint.dir or an output folder's checkpoints.
  if (const auto located = checkpoint::locate_checkpoint(path)) {
    for (const auto& s : located->skipped) fmt::print(stderr, "holmes-train: skipping incomplete checkpoint {}\n", s);
    return read_checkpoint_model(located->dir);
  }
  throw UserError(fmt::format("--checkpoint {}: {}; expected a checkpoint folder (step-XXXXXXXX with {}), a "
                              "checkpoint.dir holding complete step folders, a folder holding model.bin (a run's "
                              "<output_dir>/final), a model.bin file or a run's output_dir", path,
                              checkpoint::describe_checkpoint_path(path), kCheckpointManifest));
}

}  // namespace holmes::tools
