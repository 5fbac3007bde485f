#include "engine/tools/export.hpp"
#include "engine/spec/run_paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <stdexcept>

#include "common/errors.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/model_file.hpp"
#include "model/param_layout.hpp"

namespace holmes::tools {

namespace fs = std::filesystem;

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
  const std::vector<HfTensor> tensors = to_hf(cfg, params);
  r.tensor_count = tensors.size();
  // Config last: a folder with a config.json always has the matching weights beside it.
  write_then_rename(dir, kSafetensorsFile, [&](std::ostream& o) { write_safetensors(o, tensors); });
  write_then_rename(dir, kHfConfigFile, [&](std::ostream& o) { o << hf_config_json(cfg); });
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

// A Hugging Face folder's model in our layout (tp = 1, vocabulary padding rows zero).
FullModel read_hf_model(const std::string& dir) {
  const model::GptConfig cfg = checkpoint::read_hf_config(dir);
  const checkpoint::SafetensorsReader in(dir);
  FullModel m{cfg, std::vector<float>(model::ParamLayout(cfg).size()),
              fmt::format("Hugging Face checkpoint {} ({} safetensors file(s))", dir, in.files())};
  checkpoint::load_hf_shard(in, cfg, m.params);
  return m;
}

}  // namespace

FullModel load_full_model(const std::string& path) {
  const fs::path p(path);
  if (checkpoint::is_hf_folder(path)) return read_hf_model(path);
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
                              "<output_dir>/final), a model.bin file, a run's output_dir or a Hugging Face folder "
                              "(config.json + model.safetensors)", path,
                              checkpoint::describe_checkpoint_path(path), kCheckpointManifest));
}

}  // namespace holmes::tools
