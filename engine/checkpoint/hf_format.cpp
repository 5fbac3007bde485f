#include "engine/checkpoint/hf_format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "common/errors.hpp"

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

// GPT-2's 2-D weights other than the embeddings are Linear (out, in) here, Conv1D in HF.
bool is_conv1d(const model::ParamTensor& t) {
  return t.full_shape.size() == 2 && t.name != "wte" && t.name != "wpe";
}

// HF names of our tensor, the preferred first: GPT2LMHeadModel files say transformer.<name>,
// GPT2Model files (many published GPT-2s) the bare name.
std::vector<std::string> hf_names(const model::GptConfig& cfg, const std::string& ours) {
  if (cfg.is_llama()) return {ours};
  const std::string n = ours == "wte" || ours == "wpe" ? ours + ".weight" : ours;
  return {"transformer." + n, n};
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

std::vector<HfTensor> to_hf(const model::GptConfig& cfg, std::span<const float> params) {
  const model::ParamLayout layout(cfg);
  check_whole(cfg, params.size(), layout.size());
  std::vector<HfTensor> out;
  out.reserve(layout.tensors().size());
  for (const model::ParamTensor& t : layout.tensors()) {
    const float* p = params.data() + t.offset;
    HfTensor h{hf_names(cfg, t.name).front(), t.full_shape, {}};
    if (t.vocab_rows) {
      h.shape = {cfg.vocab, cfg.hidden};  // the real vocabulary rows: [0, V) of (Vp, C)
      h.data.assign(p, p + static_cast<size_t>(cfg.vocab) * cfg.hidden);
    } else if (!cfg.is_llama() && is_conv1d(t)) {
      h.shape = {t.full_shape[1], t.full_shape[0]};
      h.data = transposed(p, t.full_shape[0], t.full_shape[1]);
    } else {
      h.data.assign(p, p + t.numel);
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<HfTensor> to_hf_gpt2(const model::GptConfig& cfg, std::span<const float> params) {
  if (cfg.is_llama()) throw std::invalid_argument("to_hf_gpt2: the model is a llama: " + cfg.to_string());
  return to_hf(cfg, params);
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

std::string hf_config_json(const model::GptConfig& cfg) {
  if (!cfg.is_llama()) return hf_gpt2_config_json(cfg);
  // The byte-level tokenizer's end-of-text (V = 257, id 256) is the one id we know.
  const std::string eot = cfg.vocab == 257 ? "256" : "null";
  return fmt::format(R"({{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": {0},
  "eos_token_id": {0},
  "head_dim": {1},
  "hidden_act": "silu",
  "hidden_size": {2},
  "initializer_range": 0.02,
  "intermediate_size": {3},
  "max_position_embeddings": {4},
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": {5},
  "num_hidden_layers": {6},
  "num_key_value_heads": {7},
  "pretraining_tp": 1,
  "rms_norm_eps": {8:.9g},
  "rope_scaling": null,
  "rope_theta": {9:.17g},
  "tie_word_embeddings": {10},
  "torch_dtype": "float32",
  "use_cache": true,
  "vocab_size": {11}
}}
)",
                     eot, cfg.head_size(), cfg.hidden, cfg.ffn_hidden, cfg.max_seq_len, cfg.heads, cfg.layers,
                     cfg.kv_heads, cfg.norm_eps, cfg.rope_theta, cfg.tie_embeddings ? "true" : "false", cfg.vocab);
}

namespace {

// config.json as read, with the folder for messages.
struct HfConfig {
  std::string file;
  YAML::Node root;

  [[noreturn]] void refuse(const std::string& key, const std::string& seen, const std::string& accepted) const {
    throw UserError(fmt::format("{}: {} = {} is not supported; accepted: {}", file, key, seen, accepted));
  }
  bool has(const char* key) const { return root[key] && !root[key].IsNull(); }
  template <class T>
  T get(const char* key) const {
    if (!has(key)) throw UserError(fmt::format("{}: key \"{}\" is missing", file, key));
    try {
      return root[key].as<T>();
    } catch (const YAML::Exception&) {
      throw UserError(fmt::format("{}: key \"{}\" = {} has the wrong type", file, key, YAML::Dump(root[key])));
    }
  }
  template <class T>
  T get_or(const char* key, T fallback) const { return has(key) ? get<T>(key) : fallback; }
  std::string model_type() const {
    if (has("model_type")) return get<std::string>("model_type");
    if (root["architectures"] && root["architectures"].IsSequence() && root["architectures"].size() == 1) {
      const std::string a = root["architectures"][0].as<std::string>();
      if (a == "GPT2LMHeadModel" || a == "GPT2Model") return "gpt2";
      if (a == "LlamaForCausalLM") return "llama";
    }
    return "";
  }
};

model::GptConfig gpt2_of(const HfConfig& c) {
  const std::string act = c.get_or<std::string>("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    c.refuse("activation_function", act, "gelu_new or gelu_pytorch_tanh (GPT-2's tanh GELU)");
  const double eps = c.get_or<double>("layer_norm_epsilon", 1e-5);
  if (std::fabs(eps - 1e-5) > 1e-12) c.refuse("layer_norm_epsilon", fmt::format("{}", eps), "1e-05");
  const int C = c.get<int>("n_embd");
  if (c.has("n_inner") && c.get<int>("n_inner") != 4 * C)
    c.refuse("n_inner", fmt::format("{}", c.get<int>("n_inner")), fmt::format("null or 4 x n_embd = {}", 4 * C));
  if (!c.get_or<bool>("tie_word_embeddings", true)) c.refuse("tie_word_embeddings", "false", "true (GPT-2 ties its head)");
  return model::GptConfig::gpt2(c.get<int>("n_layer"), C, c.get<int>("n_head"), c.get<int>("vocab_size"),
                                c.get<int>("n_positions"));
}

model::GptConfig llama_of(const HfConfig& c) {
  const std::string act = c.get_or<std::string>("hidden_act", "silu");
  if (act != "silu") c.refuse("hidden_act", act, "silu (SwiGLU)");
  for (const char* bias : {"attention_bias", "mlp_bias"})
    if (c.get_or<bool>(bias, false)) c.refuse(bias, "true", "false (the llama architecture has no biases)");
  if (c.has("rope_scaling"))
    c.refuse("rope_scaling", YAML::Dump(c.root["rope_scaling"]), "null (plain rotary embeddings, rope_theta only)");
  const int C = c.get<int>("hidden_size"), NH = c.get<int>("num_attention_heads");
  if (c.has("head_dim") && NH > 0 && c.get<int>("head_dim") != C / NH)
    c.refuse("head_dim", fmt::format("{}", c.get<int>("head_dim")), fmt::format("hidden_size / num_attention_heads = {}", C / NH));
  model::GptConfig g;
  g.arch = model::Arch::kLlama;
  g.layers = c.get<int>("num_hidden_layers");
  g.hidden = C;
  g.heads = NH;
  g.kv_heads = c.get_or<int>("num_key_value_heads", NH);
  g.ffn_hidden = c.get<int>("intermediate_size");
  g.vocab = c.get<int>("vocab_size");
  g.max_seq_len = c.get<int>("max_position_embeddings");
  g.rope_theta = c.get_or<double>("rope_theta", 10000.0);
  g.norm_eps = static_cast<float>(c.get_or<double>("rms_norm_eps", 1e-6));
  g.tie_embeddings = c.get_or<bool>("tie_word_embeddings", false);
  g.finalize();
  return g;
}

}  // namespace

model::GptConfig read_hf_config(const std::string& dir) {
  HfConfig c{(fs::path(dir) / kHfConfigFile).string(), {}};
  if (!fs::is_regular_file(c.file))
    throw UserError(fmt::format("{}: missing (a Hugging Face checkpoint folder holds config.json)", c.file));
  try {
    c.root = YAML::LoadFile(c.file);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", c.file, e.what()));
  }
  if (!c.root.IsMap()) throw UserError(fmt::format("{}: not a JSON object", c.file));
  const std::string type = c.model_type();
  if (type == "gpt2") return gpt2_of(c);
  if (type == "llama") return llama_of(c);
  c.refuse("model_type", type.empty() ? "(missing)" : type, "gpt2 (GPT2LMHeadModel) or llama (LlamaForCausalLM)");
}

std::string hf_config_differences(const model::GptConfig& hf, const model::GptConfig& job) {
  std::vector<std::string> d;
  auto cmp = [&](const char* hf_key, const auto& a, const char* job_key, const auto& b) {
    if (a != b) d.push_back(fmt::format("config.json {} = {}, the job's model.{} = {}", hf_key, a, job_key, b));
  };
  if (hf.is_llama() != job.is_llama()) {
    cmp("model_type", std::string(hf.is_llama() ? "llama" : "gpt2"), "arch", std::string(model::arch_name(job.arch)));
    return fmt::format("{}", fmt::join(d, "; "));
  }
  const bool llama = hf.is_llama();
  cmp(llama ? "num_hidden_layers" : "n_layer", hf.layers, "layers", job.layers);
  cmp(llama ? "hidden_size" : "n_embd", hf.hidden, "hidden", job.hidden);
  cmp(llama ? "num_attention_heads" : "n_head", hf.heads, "heads", job.heads);
  cmp("vocab_size", hf.vocab, "vocab_size", job.vocab);
  if (!llama) {
    cmp("n_positions", hf.max_seq_len, "max_seq_len", job.max_seq_len);
  } else {
    cmp("num_key_value_heads", hf.kv_heads, "kv_heads", job.kv_heads);
    cmp("intermediate_size", hf.ffn_hidden, "ffn_hidden", job.ffn_hidden);
    cmp("rope_theta", hf.rope_theta, "rope_theta", job.rope_theta);
    cmp("rms_norm_eps", hf.norm_eps, "norm_eps", job.norm_eps);
    cmp("tie_word_embeddings", hf.tie_embeddings, "tie_embeddings", job.tie_embeddings);
  }
  return fmt::format("{}", fmt::join(d, "; "));
}

std::vector<float> read_hf_tensor(const SafetensorsReader& in, const model::GptConfig& cfg,
                                  const model::ParamTensor& t) {
  std::string name;
  for (const std::string& n : hf_names(cfg, t.name))
    if (in.has(n)) {
      name = n;
      break;
    }
  if (name.empty())
    throw UserError(fmt::format("{}: has no tensor {} (holmes-train's {}); the config describes {}", in.source(),
                                hf_names(cfg, t.name).front(), t.name, cfg.describe()));
  const int64_t rows = t.full_shape[0], cols = t.full_shape.size() > 1 ? t.full_shape[1] : 1;
  const bool conv1d = !cfg.is_llama() && is_conv1d(t);
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
