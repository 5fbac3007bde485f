// Hugging Face GPT-2 export: names, shapes, Conv1D transposes, dropped vocabulary padding,
// the safetensors byte layout, config.json, and the output-folder rules.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "comm/file_store.hpp"
#include "common/errors.hpp"
#include "engine/tools/export.hpp"
#include "engine/checkpoint/model_file.hpp"
#include "backends/backends.hpp"
#include "model/gpt.hpp"
#include "model/param_layout.hpp"
#include "test/support/checkpoint_test_util.hpp"
#include "model/gpt2/gpt2.hpp"

using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::tools;
namespace fs = std::filesystem;

namespace {

// Odd sizes so a transpose or a wrong row count cannot pass by symmetry.
model::GptConfig tiny_config() {
  auto c = model::gpt2::config(/*layers=*/2, /*hidden=*/6, /*heads=*/2, /*vocab=*/11, /*max_seq_len=*/5);
  c.finalize();
  return c;
}

// Every parameter distinct: value = its index in the flat buffer.
std::vector<float> iota_params(const model::GptConfig& c) {
  std::vector<float> p(model::ParamLayout(c).size());
  std::iota(p.begin(), p.end(), 0.0f);
  return p;
}

const HfTensor& find(const std::vector<HfTensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  throw std::logic_error("unreachable");
}

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / "holmes_export_test" / name;
  fs::remove_all(dir);
  return dir;
}

// The data_offsets of `name` read back from a safetensors header.
std::pair<uint64_t, uint64_t> offsets_of(const std::string& header, const std::string& name) {
  const auto at = header.find("\"" + name + "\": {");
  REQUIRE(at != std::string::npos);
  const auto off = header.find("\"data_offsets\": [", at) + std::strlen("\"data_offsets\": [");
  uint64_t a = 0, b = 0;
  REQUIRE(std::sscanf(header.c_str() + off, "%lu, %lu", &a, &b) == 2);
  return {a, b};
}

}  // namespace

TEST_CASE("export: HF GPT-2 names, shapes and order", "[export]") {
  const auto c = tiny_config();
  const auto ts = to_hf(c, iota_params(c));
  REQUIRE(ts.size() == 2 + 12 * 2 + 2);
  CHECK(ts.front().name == "transformer.wte.weight");
  CHECK(ts.front().shape == std::vector<int64_t>{11, 6});  // V rows, not the padded 128
  CHECK(find(ts, "transformer.wpe.weight").shape == std::vector<int64_t>{5, 6});
  CHECK(find(ts, "transformer.h.1.ln_1.weight").shape == std::vector<int64_t>{6});
  CHECK(find(ts, "transformer.h.0.attn.c_attn.weight").shape == std::vector<int64_t>{6, 18});
  CHECK(find(ts, "transformer.h.0.attn.c_attn.bias").shape == std::vector<int64_t>{18});
  CHECK(find(ts, "transformer.h.1.attn.c_proj.weight").shape == std::vector<int64_t>{6, 6});
  CHECK(find(ts, "transformer.h.0.mlp.c_fc.weight").shape == std::vector<int64_t>{6, 24});
  CHECK(find(ts, "transformer.h.0.mlp.c_proj.weight").shape == std::vector<int64_t>{24, 6});
  CHECK(ts.back().name == "transformer.ln_f.bias");
  for (const auto& t : ts) {
    CHECK(t.name.find("lm_head") == std::string::npos);  // tied to wte, not written
    size_t n = 1;
    for (auto d : t.shape) n *= static_cast<size_t>(d);
    CHECK(t.data.size() == n);
  }
}

TEST_CASE("export: Conv1D weights are the transpose, padding rows dropped", "[export]") {
  const auto c = tiny_config();
  const auto params = iota_params(c);
  const model::ParamLayout layout(c);
  const auto ts = to_hf(c, params);
  const auto& wte = find(ts, "transformer.wte.weight");
  for (size_t i = 0; i < wte.data.size(); ++i) REQUIRE(wte.data[i] == params[layout.at("wte").offset + i]);
  for (const char* name : {"h.0.attn.c_attn.weight", "h.1.attn.c_proj.weight", "h.1.mlp.c_fc.weight",
                           "h.0.mlp.c_proj.weight"}) {
    const auto& ours = layout.at(name);
    const auto& hf = find(ts, std::string("transformer.") + name);
    const int64_t out = ours.full_shape[0], in = ours.full_shape[1];
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        REQUIRE(hf.data[static_cast<size_t>(i * out + o)] == params[ours.offset + static_cast<size_t>(o * in + i)]);
  }
  const auto& bias = find(ts, "transformer.h.1.mlp.c_fc.bias");
  CHECK(bias.data.front() == params[layout.at("h.1.mlp.c_fc.bias").offset]);
}

TEST_CASE("export: a shard or a wrong buffer size is refused", "[export]") {
  const auto c = tiny_config();
  auto p = iota_params(c);
  p.pop_back();
  CHECK_THROWS_AS(to_hf(c, p), std::invalid_argument);
  const auto shard = c.shard(2, 0);
  CHECK_THROWS_AS(to_hf(shard, std::vector<float>(model::ParamLayout(shard).size())), std::invalid_argument);
}

TEST_CASE("export: safetensors layout", "[export]") {
  const auto c = tiny_config();
  const auto ts = to_hf(c, iota_params(c));
  const std::string bytes = safetensors_bytes(ts);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string header = bytes.substr(8, n);
  CHECK(header == safetensors_header(ts));
  CHECK((8 + n) % 8 == 0);
  CHECK(header.rfind(R"({"__metadata__": {"format": "pt"}, )", 0) == 0);
  CHECK(header.find(R"("transformer.h.0.attn.c_attn.weight": {"dtype": "F32", "shape": [6, 18], )") !=
        std::string::npos);
  uint64_t expect_begin = 0;
  for (const auto& t : ts) {  // contiguous, in order, and the bytes are the tensor
    const auto [a, b] = offsets_of(header, t.name);
    REQUIRE(a == expect_begin);
    REQUIRE(b - a == t.data.size() * sizeof(float));
    REQUIRE(std::memcmp(bytes.data() + 8 + n + a, t.data.data(), b - a) == 0);
    expect_begin = b;
  }
  CHECK(bytes.size() == 8 + n + expect_begin);
}

TEST_CASE("export: config.json of a GPT2LMHeadModel", "[export]") {
  const auto j = hf_config_json(tiny_config());
  for (const char* want : {R"("architectures": ["GPT2LMHeadModel"])", R"("model_type": "gpt2")",
                           R"("vocab_size": 11)", R"("n_positions": 5)", R"("n_ctx": 5)", R"("n_embd": 6)",
                           R"("n_layer": 2)", R"("n_head": 2)", R"("n_inner": null)",
                           R"("activation_function": "gelu_new")", R"("layer_norm_epsilon": 1e-05)",
                           R"("tie_word_embeddings": true)", R"("bos_token_id": null)"})
    CHECK(j.find(want) != std::string::npos);
  auto byte_level = model::gpt2::config(1, 8, 2, 257, 16);
  byte_level.finalize();
  CHECK(hf_config_json(byte_level).find(R"("eos_token_id": 256)") != std::string::npos);
}

TEST_CASE("export: output folder rules", "[export]") {
  const auto c = tiny_config();
  const auto p = iota_params(c);
  const auto dir = fresh_dir("out");
  auto r = write_hf_export(c, p, dir.string());
  CHECK_FALSE(r.replaced_previous);
  CHECK(r.tensor_count == 2 + 12 * 2 + 2);
  CHECK(r.safetensors_bytes == safetensors_bytes(to_hf(c, p)).size());
  CHECK(fs::is_regular_file(dir / "config.json"));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);  // no temporaries left
  r = write_hf_export(c, p, dir.string());  // a previous export may be replaced
  CHECK(r.replaced_previous);

  std::ofstream(dir / "notes.txt") << "mine";
  CHECK_THROWS_WITH(write_hf_export(c, p, dir.string()), Catch::Contains("notes.txt") && Catch::Contains("not empty"));
  const auto weights_only = fresh_dir("weights_only");
  fs::create_directories(weights_only);
  std::ofstream(weights_only / "model.safetensors") << "someone else's";
  CHECK_THROWS_AS(write_hf_export(c, p, weights_only.string()), UserError);
  CHECK_THROWS_AS(write_hf_export(c, p, (dir / "config.json").string()), UserError);  // a file, not a folder
}

TEST_CASE("export: load_full_model reads a run's final weights", "[export]") {
  const auto c = tiny_config();
  const auto p = iota_params(c);
  const auto dir = fresh_dir("final");
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Gpt gpt(c, backend, 1, 1);
  std::copy(p.begin(), p.end(), gpt.params());
  save_model_weights((dir / "model.bin").string(), gpt);
  for (const auto& path : {dir, dir / "model.bin"}) {
    const FullModel m = load_full_model(path.string());
    CHECK(m.params == p);
    CHECK(m.config.vocab == 11);
    CHECK(m.config.padded_vocab == c.padded_vocab);
  }
  CHECK_THROWS_WITH(load_full_model((dir / "missing").string()), Catch::Contains("missing"));
}

TEST_CASE("export: load_full_model reassembles a checkpoint saved under tp2 x pp2", "[export]") {
  const auto g = test::small_model();
  const std::string root = test::temp_dir("export_tp2pp2");
  std::vector<std::unique_ptr<test::FakeShard>> ranks;
  for (int stage = 0; stage < 2; ++stage)
    for (int t = 0; t < 2; ++t) ranks.push_back(std::make_unique<test::FakeShard>(g, 2, t, 2 * stage, 2, 1, 0));
  auto store = std::make_shared<comm::FileStore>(test::temp_dir("export_store"), "tok", std::chrono::seconds(20));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(ranks.size());
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      try {
        ranks[r]->fill();
        auto c = test::save_context(g, 12, r, 4);
        c.store = store.get();
        save_checkpoint(root, ranks[r]->state(), c);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) REQUIRE(e.empty());

  test::FakeShard whole(g, 1, 0, 0, -1, 1, 0);  // the same model as one rank holds it
  whole.fill();
  for (const auto& path : {checkpoint_step_dir(root, 12), root}) {  // a step folder, or checkpoint.dir
    const FullModel m = load_full_model(path);
    CHECK(m.source.find("step 12") != std::string::npos);
    CHECK(m.config.padded_vocab == g.padded_vocab);
    REQUIRE(m.params.size() == whole.params.size());
    CHECK(m.params == whole.params);
  }
}
