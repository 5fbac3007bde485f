// A checkpoint saved by tp2 x pp2 x dp2 ranks (threads sharing a file store) loads under
// tp1 x pp4 x dp2, a single rank and tp4, element for element.
#include <catch2/catch.hpp>

#include <thread>

#include "comm/file_store.hpp"
#include "common/errors.hpp"
#include "test/support/checkpoint_test_util.hpp"

using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::test;

namespace {

struct Plan {
  int tp, dp;
  std::vector<int> layers;  // per pipeline stage
};

// Every rank of `plan` as a FakeShard, rank = (stage * tp + tp_rank) * dp + dp_rank.
std::vector<std::unique_ptr<FakeShard>> shards_of(const model::GptConfig& g, const Plan& p) {
  std::vector<std::unique_ptr<FakeShard>> out;
  int first = 0;
  for (int layers : p.layers) {
    for (int t = 0; t < p.tp; ++t)
      for (int d = 0; d < p.dp; ++d) out.push_back(std::make_unique<FakeShard>(g, p.tp, t, first, layers, p.dp, d));
    first += layers;
  }
  return out;
}

}  // namespace

TEST_CASE("checkpoint: saved under tp2 x pp2 x dp2 and loaded under other plans element for element") {
  const auto g = small_model();
  const std::string root = temp_dir("reshard");
  auto src = shards_of(g, {2, 2, {2, 2}});
  REQUIRE(src.size() == 8);
  for (auto& s : src) s->fill();
  {
    auto store = std::make_shared<comm::FileStore>(temp_dir("reshard_store"), "tok", std::chrono::milliseconds(20000));
    std::vector<std::thread> ranks;
    std::vector<std::string> errors(src.size());
    for (int r = 0; r < 8; ++r)
      ranks.emplace_back([&, r] {
        try {
          auto c = save_context(g, 30, r, 8);
          c.store = store.get();
          save_checkpoint(root, src[r]->state(), c);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : ranks) t.join();
    for (const auto& e : errors) CHECK(e.empty());
  }
  const auto info = open_checkpoint(checkpoint_step_dir(root, 30));
  REQUIRE(info.files.size() == 8);
  CHECK(info.world == 8);

  SECTION("tp1 x pp4 x dp2 (the last stage's tied wte from wte)") {
    auto dst = shards_of(g, {1, 2, {1, 1, 1, 1}});
    for (auto& s : dst) {
      auto st = s->state();
      load_shard_state(info, g, st, true);
      CHECK(s->mismatches(true) == 0);
    }
    CHECK(dst.back()->layout->at("wte").tied_copy);
  }
  SECTION("single rank, and pipeline 3 + 1 with dp 3") {
    for (const Plan& p : {Plan{1, 1, {4}}, Plan{1, 3, {3, 1}}}) {
      for (auto& s : shards_of(g, p)) {
        auto st = s->state();
        load_shard_state(info, g, st, true);
        CHECK(s->mismatches(true) == 0);
      }
    }
  }
  SECTION("tp4: a larger padded vocabulary, the extra rows zero") {
    for (auto& s : shards_of(g, {4, 1, {4}})) {
      CHECK(s->config.padded_vocab == 256);
      auto st = s->state();
      load_shard_state(info, g, st, true);
      CHECK(s->mismatches(true, /*loaded_vocab_rows=*/128) == 0);
    }
  }
  SECTION("every full tensor matches") {
    const model::ParamLayout whole(g);
    for (const auto& t : whole.tensors()) {
      const auto full = read_full_tensor(info, t.name, TensorKind::kExpAvg);
      size_t bad = 0;
      for (size_t i = 0; i < full.size(); ++i)
        bad += full[i] != fake_value(t.name, static_cast<int64_t>(i), TensorKind::kExpAvg);
      INFO(t.name);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("checkpoint: a checkpoint missing a rank's pieces is reported and not loaded half-way") {
  const auto g = small_model();
  const std::string root = temp_dir("holes");
  auto src = shards_of(g, {1, 1, {2, 2}});
  // Save only stage 0 as if it were the whole job: layers 2 and 3 are missing.
  src[0]->fill();
  save_checkpoint(root, src[0]->state(), save_context(g, 4));
  FakeShard whole(g, 1, 0, 0, -1, 1, 0);
  auto st = whole.state();
  try {
    load_shard_state(open_checkpoint(checkpoint_step_dir(root, 4)), g, st, true);
    FAIL("no error");
  } catch (const UserError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("h.2.ln_1.weight") && Catch::Contains("incomplete"));
  }
}
