// Hugging Face checkpoints in and out (engine/checkpoint/hf_format.hpp, safetensors.hpp): the
// export's tensors read back into the same model bit for bit for gpt2 and llama (tied and
// untied, whole and as a tp=2 shard), the dtypes published models use (bf16, fp16), GPT-2
// files without the transformer. prefix, sharded folders with an index, and config.json
// values the model does not run refused by key. The PyTorch comparison of the numbers is
// test/integration/hf_roundtrip.sh.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "engine/checkpoint/hf_format.hpp"
#include "model/param_layout.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes;
using namespace holmes::checkpoint;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("holmes_hf_test_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Distinct values everywhere, vocabulary padding rows zero (as the model keeps them).
std::vector<float> distinct_params(const model::GptConfig& c) {
  const model::ParamLayout layout(c);
  std::vector<float> p(layout.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::sin(0.001f * float(i)) + 0.0001f * float(i % 97);
  for (const auto& t : layout.tensors())
    if (t.vocab_rows)
      std::fill(p.begin() + t.offset + size_t(c.vocab) * c.hidden, p.begin() + t.offset + t.numel, 0.0f);
  return p;
}

void write_folder(const fs::path& dir, const std::string& config, const std::vector<HfTensor>& tensors) {
  std::ofstream(dir / kHfConfigFile) << config;
  std::ofstream out(dir / kSafetensorsFile, std::ios::binary);
  write_safetensors(out, tensors);
}

model::GptConfig llama(bool tied) {
  model::GptConfig c = model::llama::config(2, 32, 4, 2, 48, 300, 64);
  c.tie_embeddings = tied;
  c.rope_theta = 10000;
  c.finalize();
  return c;
}

// One raw safetensors file with a single tensor of `dtype` holding `raw` bytes.
void write_raw(const fs::path& file, const std::string& name, const char* dtype, std::vector<int64_t> shape,
               const std::string& raw) {
  std::string json = fmt::format(R"({{"{}":{{"dtype":"{}","shape":[{}],"data_offsets":[0,{}]}}}})", name, dtype,
                                 fmt::join(shape, ","), raw.size());
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t n = json.size();
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << json << raw;
}

}  // namespace

TEST_CASE("hf: export then import gives the same model bit for bit, gpt2 and llama", "[hf]") {
  for (const model::GptConfig& c : {model::gpt2::config(2, 32, 4, 300, 64), llama(false), llama(true)}) {
    INFO(c.describe());
    const std::vector<float> p = distinct_params(c);
    const fs::path dir = fresh_dir("roundtrip");
    write_folder(dir, hf_config_json(c), to_hf(c, p));
    CHECK(is_hf_folder(dir.string()));
    const model::GptConfig back = read_hf_config(dir.string());
    CHECK(hf_config_differences(back, c).empty());
    CHECK(back.padded_vocab == c.padded_vocab);
    std::vector<float> got(p.size(), -1.0f);
    const SafetensorsReader in(dir.string());
    load_hf_shard(in, back, got);
    CHECK(std::memcmp(got.data(), p.data(), p.size() * sizeof(float)) == 0);
    // Llama's tensors are HF's own names and Linear layout: q_proj is our matrix as it lies.
    if (c.arch == "llama") {
      const model::ParamLayout layout(c);
      const model::ParamTensor& q = layout.at("model.layers.1.self_attn.q_proj.weight");
      const std::vector<float> hq = in.read(q.name);
      CHECK(std::memcmp(hq.data(), p.data() + q.offset, q.numel * sizeof(float)) == 0);
      CHECK(in.has("lm_head.weight") == !c.tie_embeddings);
      CHECK(in.shape("model.embed_tokens.weight") == std::vector<int64_t>{300, 32});  // V rows, not Vp
    }
  }
}

TEST_CASE("hf: a tp=2 shard reads its slices of the folder", "[hf]") {
  const model::GptConfig c = llama(false);
  const std::vector<float> p = distinct_params(c);
  const fs::path dir = fresh_dir("shard");
  write_folder(dir, hf_config_json(c), to_hf(c, p));
  const SafetensorsReader in(dir.string());
  for (int r = 0; r < 2; ++r) {
    const model::GptConfig shard = c.shard(2, r, r, 1);  // rank r of tp 2, pipeline stage r of 2
    const model::ParamLayout layout(shard), whole(c);
    std::vector<float> got(layout.size(), -1.0f);
    load_hf_shard(in, shard, got);
    int bad = 0;
    for (const auto& t : layout.tensors()) {
      const model::ParamTensor& w = whole.at(t.name);
      int64_t full = 1;
      for (int64_t d : t.full_shape) full *= d;
      for (int64_t i = 0; i < full; ++i) {
        const int64_t off = model::ParamLayout::shard_offset(t, i);
        if (off < 0) continue;
        // The shard pads the vocabulary for tp = 2 like the whole model for tp = 1 here.
        const float want = i < int64_t(w.numel) ? p[w.offset + i] : 0.0f;
        bad += got[off] != want;
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("hf: bf16 and fp16 tensors widen exactly, GPT-2 files without the transformer. prefix load", "[hf]") {
  const fs::path dir = fresh_dir("dtypes");
  const uint16_t bf16[] = {0x3f80, 0xc040, 0x0001, 0x7f80};  // 1, -3, smallest subnormal, +inf
  const uint16_t f16[] = {0x3c00, 0xc200, 0x0001, 0x7bff};   // 1, -3, 2^-24, 65504
  write_raw(dir / "bf16.safetensors", "x", "BF16", {2, 2}, std::string(reinterpret_cast<const char*>(bf16), 8));
  write_raw(dir / "f16.safetensors", "y", "F16", {4}, std::string(reinterpret_cast<const char*>(f16), 8));
  const std::vector<float> b = SafetensorsReader((dir / "bf16.safetensors").string()).read("x");
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -3.0f);
  CHECK(b[2] == std::ldexp(1.0f, -133));
  CHECK(std::isinf(b[3]));
  const std::vector<float> h = SafetensorsReader((dir / "f16.safetensors").string()).read("y");
  CHECK(h == std::vector<float>{1.0f, -3.0f, std::ldexp(1.0f, -24), 65504.0f});
  write_raw(dir / "i8.safetensors", "z", "I8", {2}, "ab");
  CHECK_THROWS_WITH(SafetensorsReader((dir / "i8.safetensors").string()).read("z"),
                    Catch::Contains("'z' is I8") && Catch::Contains("F32, BF16, F16"));
  // A GPT-2 saved as GPT2Model: bare names (wte.weight, h.0...).
  const model::GptConfig g = model::gpt2::config(1, 16, 2, 257, 32);
  const std::vector<float> p = distinct_params(g);
  std::vector<HfTensor> ts = to_hf(g, p);
  for (HfTensor& t : ts) t.name = t.name.substr(std::string("transformer.").size());
  const fs::path bare = fresh_dir("bare");
  write_folder(bare, hf_config_json(g), ts);
  std::vector<float> got(p.size());
  load_hf_shard(SafetensorsReader(bare.string()), read_hf_config(bare.string()), got);
  CHECK(got == p);
}

TEST_CASE("hf: a sharded folder (two files + index) reads as one, a wrong index is named", "[hf]") {
  const model::GptConfig c = llama(false);
  const std::vector<float> p = distinct_params(c);
  std::vector<HfTensor> ts = to_hf(c, p);
  const fs::path dir = fresh_dir("sharded");
  const size_t half = ts.size() / 2;
  std::string map;
  for (int part = 0; part < 2; ++part) {
    const std::string file = fmt::format("model-{:05d}-of-00002.safetensors", part + 1);
    std::vector<HfTensor> mine(ts.begin() + (part ? half : 0), part ? ts.end() : ts.begin() + half);
    std::ofstream out(dir / file, std::ios::binary);
    write_safetensors(out, mine);
    for (const HfTensor& t : mine) map += fmt::format("{}\"{}\": \"{}\"", map.empty() ? "" : ", ", t.name, file);
  }
  std::ofstream(dir / kSafetensorsIndexFile) << "{\"metadata\": {}, \"weight_map\": {" << map << "}}";
  std::ofstream(dir / kHfConfigFile) << hf_config_json(c);
  CHECK(is_hf_folder(dir.string()));
  const SafetensorsReader in(dir.string());
  CHECK(in.files() == 2);
  std::vector<float> got(p.size());
  load_hf_shard(in, read_hf_config(dir.string()), got);
  CHECK(got == p);
  std::ofstream(dir / kSafetensorsIndexFile)
      << "{\"weight_map\": {\"lm_head.weight\": \"model-00001-of-00002.safetensors\"}}";
  CHECK_THROWS_WITH(SafetensorsReader(dir.string()), Catch::Contains("lm_head.weight") &&
                                                         Catch::Contains("does not hold it"));
}

TEST_CASE("hf: config.json values the model does not run are refused by key, differences name both sides", "[hf]") {
  const fs::path dir = fresh_dir("config");
  auto refused = [&](const std::string& json) {
    std::ofstream(dir / kHfConfigFile) << json;
    try {
      read_hf_config(dir.string());
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string base = R"("model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 64)";
  CHECK(refused("{" + base + "}") == "accepted");
  CHECK_THAT(refused("{" + base + R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})"),
             Catch::Contains("rope_scaling") && Catch::Contains("not supported"));
  CHECK_THAT(refused("{" + base + R"(, "attention_bias": true})"), Catch::Contains("attention_bias = true"));
  CHECK_THAT(refused("{" + base + R"(, "hidden_act": "gelu"})"), Catch::Contains("hidden_act = gelu"));
  CHECK_THAT(refused(R"({"model_type": "mistral"})"), Catch::Contains("model_type = mistral") &&
                                                          Catch::Contains("gpt2") && Catch::Contains("llama"));
  CHECK_THAT(refused(R"({"model_type": "llama", "hidden_size": 64})"), Catch::Contains("\"num_attention_heads\" is missing"));
  std::ofstream(dir / kHfConfigFile) << "{" + base + "}";
  const model::GptConfig hf = read_hf_config(dir.string());
  CHECK(hf.kv_heads == 4);         // num_key_value_heads defaults to the heads
  CHECK(hf.norm_eps == 1e-6f);      // transformers' default rms_norm_eps
  CHECK(hf.rope_theta == 10000.0);  // and rope_theta
  model::GptConfig job = hf;
  job.kv_heads = 2;
  job.ffn_hidden = 96;
  job.finalize();
  CHECK(hf_config_differences(hf, job) == "config.json num_key_value_heads = 4, the job's model.kv_heads = 2; "
                                          "config.json intermediate_size = 128, the job's model.ffn_hidden = 96");
  CHECK(hf_config_differences(hf, model::gpt2::config(2, 64, 4, 300, 64)) ==
        "config.json model_type = llama, the job's model.arch = gpt2");
}
