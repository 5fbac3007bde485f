// Checkpoint round trip, full-tensor reads, corruption, latest/keep.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/errors.hpp"
#include "test/support/checkpoint_test_util.hpp"
#include "model/gpt2/gpt2.hpp"

namespace fs = std::filesystem;
using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::test;

namespace {

std::string saved_single(const std::string& name, int64_t step = 10) {
  const auto g = small_model();
  FakeShard a(g, 1, 0, 0, -1, 1, 0);
  a.fill();
  const std::string root = temp_dir(name);
  save_checkpoint(root, a.state(), save_context(g, step));
  return root;
}

// The UserError message of f(), or "" when it does not throw one.
template <class F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void rewrite(const std::string& path, const std::function<void(std::string&)>& edit) {
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  edit(text);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

TEST_CASE("checkpoint: round trip of a single-rank shard with params and moments bit-exact") {
  const auto g = small_model();
  const std::string root = saved_single("roundtrip", 10);
  const std::string dir = checkpoint_step_dir(root, 10);
  CHECK(fs::exists(dir + "/COMMITTED"));
  CHECK(fs::exists(dir + "/rank-00000.bin"));
  CHECK(!fs::exists(dir + "/rank-00000.bin.tmp"));
  const CheckpointInfo info = open_checkpoint(dir);
  CHECK(info.step == 10);
  CHECK(info.tokens_seen == 640);
  CHECK(info.seed == 7);
  CHECK(info.format_version == kCheckpointFormatVersion);
  CHECK(info.plan_hash == 0xfeedbeefcafe1234ull);
  CHECK(info.job_spec_text == "model:\n  layers: 4   # \"quoted\"\n");
  CHECK(info.model.layers == 4);
  CHECK(info.model.padded_vocab == 128);

  FakeShard b(g, 1, 0, 0, -1, 1, 0);
  auto st = b.state();
  load_shard_state(info, g, st, /*with_optimizer=*/true);
  CHECK(b.mismatches(true) == 0);

  FakeShard w(g, 1, 0, 0, -1, 1, 0);
  auto ws = w.state();
  load_shard_state(info, g, ws, /*with_optimizer=*/false);
  CHECK(w.mismatches(false) == 0);
  CHECK(w.m[0] == 0.0f);  // weights only: the moments are untouched
}

TEST_CASE("checkpoint: read_full_tensor reassembles full shapes and wte with its padded rows") {
  const std::string dir = checkpoint_step_dir(saved_single("fulltensor"), 10);
  const auto info = open_checkpoint(dir);
  for (const char* name : {"wte", "h.2.attn.c_attn.weight", "h.3.mlp.c_proj.weight", "ln_f.bias"}) {
    for (TensorKind kind : {TensorKind::kParam, TensorKind::kExpAvgSq}) {
      const auto full = read_full_tensor(info, name, kind);
      INFO(name);
      size_t bad = 0;
      for (size_t i = 0; i < full.size(); ++i) bad += full[i] != fake_value(name, static_cast<int64_t>(i), kind);
      CHECK(bad == 0);
      if (std::string(name) == "wte") CHECK(full.size() == 128u * 32u);
    }
  }
  CHECK_THAT(user_error([&] { read_full_tensor(info, "h.9.ln_1.weight"); }),
             Catch::Contains("no tensor 'h.9.ln_1.weight'"));
}

TEST_CASE("checkpoint: bad checkpoints are user errors naming the file and the problem") {
  const std::string root = saved_single("corrupt");
  const std::string dir = checkpoint_step_dir(root, 10), shard = dir + "/rank-00000.bin";
  const std::string manifest = dir + "/manifest.json";
  std::string pristine_shard, pristine_manifest;
  rewrite(shard, [&](std::string& t) { pristine_shard = t; });
  rewrite(manifest, [&](std::string& t) { pristine_manifest = t; });
  auto restore = [&] {
    rewrite(shard, [&](std::string& t) { t = pristine_shard; });
    rewrite(manifest, [&](std::string& t) { t = pristine_manifest; });
    std::ofstream(dir + "/COMMITTED") << "step 10\n";
  };

  SECTION("truncated shard") {
    fs::resize_file(shard, fs::file_size(shard) - 100);
    auto msg = user_error([&] { open_checkpoint(dir); });
    CHECK_THAT(msg, Catch::Contains(shard) && Catch::Contains("truncated"));
  }
  SECTION("one corrupted byte") {
    rewrite(shard, [](std::string& t) { t[t.size() / 2] ^= 0x10; });
    auto msg = user_error([&] { open_checkpoint(dir); });
    CHECK_THAT(msg, Catch::Contains(shard) && Catch::Contains("corrupted") && Catch::Contains("CRC32C"));
  }
  SECTION("future format version") {
    rewrite(manifest, [](std::string& t) { t.replace(t.find("\"format_version\": 1"), 19, "\"format_version\": 7"); });
    auto msg = user_error([&] { open_checkpoint(dir); });
    CHECK_THAT(msg, Catch::Contains(manifest) && Catch::Contains("format_version 7"));
  }
  SECTION("malformed manifest") {
    rewrite(manifest, [](std::string& t) { t = t.substr(0, t.size() / 2); });
    CHECK_THAT(user_error([&] { open_checkpoint(dir); }), Catch::Contains(manifest) && Catch::Contains("malformed"));
  }
  SECTION("missing commit marker") {
    fs::remove(dir + "/COMMITTED");
    CHECK_THAT(user_error([&] { open_checkpoint(dir); }),
               Catch::Contains(dir + "/COMMITTED") && Catch::Contains("incomplete"));
  }
  SECTION("another model shape") {
    const auto g = small_model();
    auto other = model::gpt2::config(g.layers, 64, g.heads, g.vocab, g.max_seq_len);
    other.finalize();
    FakeShard b(other, 1, 0, 0, -1, 1, 0);
    auto st = b.state();
    auto msg = user_error([&] { load_shard_state(open_checkpoint(dir), other, st, true); });
    CHECK_THAT(msg, Catch::Contains(manifest) && Catch::Contains("model.hidden 32 (this job: 64)"));
  }
  restore();
  CHECK_NOTHROW(open_checkpoint(dir));
}

TEST_CASE("checkpoint: latest complete checkpoint with incomplete ones skipped and keep pruning after commit") {
  const auto g = small_model();
  FakeShard a(g, 1, 0, 0, -1, 1, 0);
  a.fill();
  const std::string root = temp_dir("latest");
  CHECK(!find_latest_checkpoint(root));
  CHECK(!find_latest_checkpoint(root + "/does-not-exist"));
  for (int64_t step : {5, 10}) save_checkpoint(root, a.state(), save_context(g, step));
  fs::create_directories(checkpoint_step_dir(root, 15));  // a save that died half-way
  std::vector<std::string> skipped;
  CHECK(find_latest_checkpoint(root, &skipped) == checkpoint_step_dir(root, 10));
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0] == checkpoint_step_dir(root, 15));

  fs::create_directories(checkpoint_step_dir(root, 7));  // incomplete and older than the newest complete
  auto c = save_context(g, 20);
  c.keep = 2;
  save_checkpoint(root, a.state(), c);
  CHECK(!fs::exists(checkpoint_step_dir(root, 5)));
  CHECK(!fs::exists(checkpoint_step_dir(root, 7)));
  CHECK(fs::exists(checkpoint_step_dir(root, 10) + "/COMMITTED"));
  CHECK(!fs::exists(checkpoint_step_dir(root, 15)));  // incomplete, older than step 20
  CHECK(find_latest_checkpoint(root) == checkpoint_step_dir(root, 20));

  // Saving a committed step again (after resuming from an older one) replaces it whole.
  a.params[3] += 1.0f;
  save_checkpoint(root, a.state(), save_context(g, 10));
  FakeShard b(g, 1, 0, 0, -1, 1, 0);
  auto st = b.state();
  load_shard_state(open_checkpoint(checkpoint_step_dir(root, 10)), g, st, true);
  CHECK(b.params[3] == a.params[3]);
}
