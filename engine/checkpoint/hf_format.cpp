#include "engine/checkpoint/hf_format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "common/errors.hpp"
#include "model/architecture.hpp"

namespace holmes::checkpoint {

namespace fs = std::filesystem;

namespace {

// Linear weight (rows, cols) <-> Conv1D weight (cols, rows).
std::vector<float> transposed(const float* w, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = w[r * cols + c];
  return out;
}

void check_whole(const model::GptConfig& cfg, size_t params, size_t want) {
  if (cfg.tp_size != 1 || !cfg.has_embedding || !cfg.has_head || cfg.first_layer != 0 ||
      cfg.num_stage_layers() != cfg.layers)
    throw std::invalid_argument("to_hf: needs the whole model (tp = 1, one stage), got " + cfg.to_string());
  if (params != want)
    throw std::invalid_argument(fmt::format("to_hf: {} parameters given, the model {} has {}", params,
                                            cfg.to_string(), want));
}

}  // namespace

const model::HfMap& hf_map(const model::GptConfig& cfg) {
  const model::HfMap* map = cfg.architecture().hugging_face();
  if (map == nullptr)
    throw UserError(fmt::format("model.arch {} has no Hugging Face name map: its checkpoints cannot be exported to "
                                "or read from Hugging Face folders", cfg.arch));
  return *map;
}

std::string hf_head_note(const model::GptConfig& cfg) {
  const model::HfMap& map = hf_map(cfg);
  const model::RoleNames r = model::role_names(cfg);
  if (cfg.tie_embeddings) return "lm_head tied to " + map.tensor_names(r.embedding).front();
  return map.tensor_names(r.head).front() + " untied";
}

std::vector<HfTensor> to_hf(const model::GptConfig& cfg, std::span<const float> params) {
  const model::HfMap& map = hf_map(cfg);
  const model::ParamLayout layout(cfg);
  check_whole(cfg, params.size(), layout.size());
  std::vector<HfTensor> out;
  out.reserve(layout.tensors().size());
  for (const model::ParamTensor& t : layout.tensors()) {
    const float* p = params.data() + t.offset;
    HfTensor h{map.tensor_names(t.name).front(), t.full_shape, {}};
    if (t.vocab_rows) {
      h.shape = {cfg.vocab, cfg.hidden};  // the real vocabulary rows: [0, V) of (Vp, C)
      h.data.assign(p, p + static_cast<size_t>(cfg.vocab) * cfg.hidden);
    } else if (map.transposed(t)) {
      h.shape = {t.full_shape[1], t.full_shape[0]};
      h.data = transposed(p, t.full_shape[0], t.full_shape[1]);
    } else {
      h.data.assign(p, p + t.numel);
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::string hf_config_json(const model::GptConfig& cfg) { return hf_map(cfg).config_json(cfg); }

namespace {

// config.json as read, with the file for messages.
struct HfConfig final : model::HfConfigKeys {
  std::string file;
  YAML::Node root;

  [[noreturn]] void refuse(const std::string& key, const std::string& seen, const std::string& accepted) const override {
    throw UserError(fmt::format("{}: {} = {} is not supported; accepted: {}", file, key, seen, accepted));
  }
  bool has(const char* key) const override { return root[key] && !root[key].IsNull(); }
  template <class T>
  T get(const char* key) const {
    if (!has(key)) throw UserError(fmt::format("{}: key \"{}\" is missing", file, key));
    try {
      return root[key].as<T>();
    } catch (const YAML::Exception&) {
      throw UserError(fmt::format("{}: key \"{}\" = {} has the wrong type", file, key, YAML::Dump(root[key])));
    }
  }
  int64_t integer(const char* key) const override { return get<int>(key); }
  double number(const char* key) const override { return get<double>(key); }
  bool boolean(const char* key) const override { return get<bool>(key); }
  std::string text(const char* key) const override { return get<std::string>(key); }
  std::string dump(const char* key) const override { return YAML::Dump(root[key]); }

  // The architecture this file describes: by model_type, else by its one `architectures` entry.
  const model::Architecture* architecture() const {
    const std::string type = has("model_type") ? text("model_type") : "";
    std::string cls;
    if (type.empty() && root["architectures"] && root["architectures"].IsSequence() &&
        root["architectures"].size() == 1)
      cls = root["architectures"][0].as<std::string>();
    for (const model::Architecture* a : model::architectures()) {
      const model::HfMap* map = a->hugging_face();
      if (map == nullptr) continue;
      if (!type.empty() && type == map->model_type()) return a;
      for (const std::string& c : map->classes())
        if (!cls.empty() && c == cls) return a;
    }
    std::vector<std::string> accepted;
    for (const model::Architecture* a : model::architectures())
      if (const model::HfMap* map = a->hugging_face())
        accepted.push_back(fmt::format("{} ({})", map->model_type(), map->classes().front()));
    const std::string last = accepted.empty() ? "" : accepted.back();
    if (!accepted.empty()) accepted.pop_back();
    refuse("model_type", type.empty() ? "(missing)" : type,
           accepted.empty() ? last : fmt::format("{} or {}", fmt::join(accepted, ", "), last));
  }
};

}  // namespace

model::GptConfig read_hf_config(const std::string& dir) {
  HfConfig c;
  c.file = (fs::path(dir) / kHfConfigFile).string();
  if (!fs::is_regular_file(c.file))
    throw UserError(fmt::format("{}: missing (a Hugging Face checkpoint folder holds config.json)", c.file));
  try {
    c.root = YAML::LoadFile(c.file);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", c.file, e.what()));
  }
  if (!c.root.IsMap()) throw UserError(fmt::format("{}: not a JSON object", c.file));
  return c.architecture()->hugging_face()->read_config(c);
}

std::string hf_config_differences(const model::GptConfig& hf, const model::GptConfig& job) {
  std::vector<std::string> d;
  auto add = [&](const std::string& hf_key, const std::string& a, const std::string& job_key, const std::string& b) {
    if (a != b) d.push_back(fmt::format("config.json {} = {}, the job's model.{} = {}", hf_key, a, job_key, b));
  };
  if (hf.arch != job.arch) {
    add("model_type", hf.arch, "arch", job.arch);
    return fmt::format("{}", fmt::join(d, "; "));
  }
  for (const model::HfKeyPair& k : hf_map(hf).compared_keys(hf, job)) add(k.hf_key, k.hf_value, k.job_key, k.job_value);
  return fmt::format("{}", fmt::join(d, "; "));
}

std::vector<float> read_hf_tensor(const SafetensorsReader& in, const model::GptConfig& cfg,
                                  const model::ParamTensor& t) {
  const model::HfMap& map = hf_map(cfg);
  std::string name;
  for (const std::string& n : map.tensor_names(t.name))
    if (in.has(n)) {
      name = n;
      break;
    }
  if (name.empty())
    throw UserError(fmt::format("{}: has no tensor {} (holmes-train's {}); the config describes {}", in.source(),
                                map.tensor_names(t.name).front(), t.name, cfg.describe()));
  const int64_t rows = t.full_shape[0], cols = t.full_shape.size() > 1 ? t.full_shape[1] : 1;
  const bool conv1d = map.transposed(t);
  std::vector<int64_t> want = t.full_shape;
  if (t.vocab_rows) want[0] = cfg.vocab;
  if (conv1d) want = {cols, rows};
  if (in.shape(name) != want)
    throw UserError(fmt::format("{}: tensor {} has shape [{}], the config describes [{}]", in.source(), name,
                                fmt::join(in.shape(name), ", "), fmt::join(want, ", ")));
  std::vector<float> data = in.read(name);
  if (conv1d) return transposed(data.data(), cols, rows);
  if (t.vocab_rows) data.resize(static_cast<size_t>(rows * cols), 0.0f);  // padding rows: zero
  return data;
}

void load_hf_shard(const SafetensorsReader& in, const model::GptConfig& shard, std::span<float> params) {
  const model::ParamLayout layout(shard);
  if (params.size() != layout.size())
    throw std::invalid_argument(fmt::format("load_hf_shard: {} floats for a shard of {}", params.size(), layout.size()));
  for (const model::ParamTensor& t : layout.tensors()) {
    const std::vector<float> full = read_hf_tensor(in, shard, t);
    for (int64_t i = 0; i < static_cast<int64_t>(full.size()); ++i) {
      const int64_t off = t.tp_count == 1 ? static_cast<int64_t>(t.offset) + i : model::ParamLayout::shard_offset(t, i);
      if (off >= 0) params[static_cast<size_t>(off)] = full[static_cast<size_t>(i)];
    }
  }
}

bool is_hf_folder(const std::string& dir) {
  const fs::path p(dir);
  return fs::is_regular_file(p / kHfConfigFile) &&
         (fs::is_regular_file(p / kSafetensorsFile) || fs::is_regular_file(p / kSafetensorsIndexFile));
}

}  // namespace holmes::checkpoint
