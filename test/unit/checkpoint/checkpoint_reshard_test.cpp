// A checkpoint saved by tp2 x pp2 x dp2 ranks (threads sharing a file store) loads under
// tp1 x pp4 x dp2, a single rank and tp4, element for element; one saved by ranks holding
// several model chunks (interleaved 1F1B) loads into one-chunk plans and back.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <functional>
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

// The model chunks of every rank of tp x pp(stages) x dp under interleaved 1F1B: stage s holds
// the virtual stages c x pp + s, one layer each (pp x V = the model's layers); rank = (stage *
// tp + tp_rank) * dp + dp_rank as above.
std::vector<std::vector<std::unique_ptr<FakeShard>>> chunked_ranks(const model::GptConfig& g, int tp, int pp, int dp) {
  const int v = g.layers / pp;
  std::vector<std::vector<std::unique_ptr<FakeShard>>> out;
  for (int s = 0; s < pp; ++s)
    for (int t = 0; t < tp; ++t)
      for (int d = 0; d < dp; ++d) {
        auto& chunks = out.emplace_back();
        for (int c = 0; c < v; ++c) chunks.push_back(std::make_unique<FakeShard>(g, tp, t, c * pp + s, 1, dp, d));
      }
  return out;
}

std::vector<ShardState> states_of(const std::vector<std::unique_ptr<FakeShard>>& chunks) {
  std::vector<ShardState> out;
  for (const auto& c : chunks) out.push_back(c->state());
  return out;
}

// Step `step` saved by `world` ranks (threads sharing a file store), rank r's states from states_of_rank(r).
void save_ranks(const model::GptConfig& g, const std::string& root, int64_t step, int world,
                const std::function<std::vector<ShardState>(int)>& states_of_rank) {
  auto store = std::make_shared<comm::FileStore>(temp_dir(fmt::format("store_{}", step)), "tok",
                                                 std::chrono::milliseconds(20000));
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      try {
        auto c = save_context(g, step, r, world);
        c.store = store.get();
        save_checkpoint(root, states_of_rank(r), c);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) CHECK(e.empty());
}

}  // namespace

TEST_CASE("checkpoint: ranks holding model chunks (interleaved) save them in one file each, loaded under any plan") {
  const auto g = small_model();
  const std::string root = temp_dir("chunks");
  auto src = chunked_ranks(g, 2, 2, 1);  // tp2 x pp2, V = 2: stage 0 holds layers 0 and 2, stage 1 layers 1 and 3
  REQUIRE(src.size() == 4);
  for (auto& rank : src)
    for (auto& c : rank) c->fill();
  save_ranks(g, root, 12, 4, [&](int r) { return states_of(src[r]); });
  const auto info = open_checkpoint(checkpoint_step_dir(root, 12));
  REQUIRE(info.files.size() == 4);  // one file per rank, whatever its chunks
  auto holds = [](const CheckpointFile& f, const std::string& name) {
    return std::any_of(f.pieces.begin(), f.pieces.end(), [&](const CheckpointPiece& p) { return p.tensor == name; });
  };
  CHECK((holds(info.files[0], "h.0.attn.c_attn.weight") && holds(info.files[0], "h.2.attn.c_attn.weight")));
  CHECK((holds(info.files[2], "h.1.attn.c_attn.weight") && holds(info.files[2], "h.3.attn.c_attn.weight")));

  SECTION("the same chunks (every chunk filled, moments too)") {
    auto dst = chunked_ranks(g, 2, 2, 1);
    for (auto& rank : dst) {
      auto states = states_of(rank);
      load_shard_states(info, g, states, true);
      for (auto& c : rank) CHECK(c->mismatches(true) == 0);
    }
  }
  SECTION("one chunk per rank: tp1 x pp2 x dp2 (1f1b) and a single rank") {
    for (const Plan& p : {Plan{1, 2, {2, 2}}, Plan{1, 1, {4}}})
      for (auto& s : shards_of(g, p)) {
        auto st = s->state();
        load_shard_state(info, g, st, true);
        CHECK(s->mismatches(true) == 0);
      }
  }
  SECTION("other chunks: four on each rank (pp1 x V4) of dp2") {
    for (auto& rank : chunked_ranks(g, 1, 1, 2)) {
      REQUIRE(rank.size() == 4);
      auto states = states_of(rank);
      load_shard_states(info, g, states, true);
      for (auto& c : rank) CHECK(c->mismatches(true) == 0);
    }
  }
  SECTION("a chunk the checkpoint cannot fill is named") {
    const std::string part = temp_dir("chunks_part");
    save_checkpoint(part, states_of(src[0]), save_context(g, 3));  // stage 0 alone: layers 0 and 2
    auto all = chunked_ranks(g, 2, 2, 1);
    auto states = states_of(all[2]);  // stage 1: layers 1 and 3
    try {
      load_shard_states(open_checkpoint(checkpoint_step_dir(part, 3)), g, states, false);
      FAIL("no error");
    } catch (const UserError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("h.1.") && Catch::Contains("incomplete"));
    }
  }
}

TEST_CASE("checkpoint: saved under tp2 x pp2 x dp2 and loaded under other plans element for element") {
  const auto g = small_model();
  const std::string root = temp_dir("reshard");
  auto src = shards_of(g, {2, 2, {2, 2}});
  REQUIRE(src.size() == 8);
  for (auto& s : src) s->fill();
  save_ranks(g, root, 30, 8, [&](int r) { return std::vector<ShardState>{src[r]->state()}; });
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
  SECTION("model chunks (interleaved 1F1B, pp2 x V2 on dp2): each chunk by tensor name") {
    for (auto& rank : chunked_ranks(g, 1, 2, 2)) {
      auto states = states_of(rank);
      load_shard_states(info, g, states, true);
      for (auto& c : rank) CHECK(c->mismatches(true) == 0);
    }
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

TEST_CASE("checkpoint: a shard image holds the bytes of the file a save writes, and reshards from memory") {
  const auto g = small_model();
  const std::string root = temp_dir("image");
  auto src = shards_of(g, {2, 2, {2, 2}});
  for (auto& s : src) s->fill();
  save_ranks(g, root, 30, 8, [&](int r) { return std::vector<ShardState>{src[r]->state()}; });
  const auto info = open_checkpoint(checkpoint_step_dir(root, 30));
  auto images = std::make_shared<std::map<int, ShardImage>>();
  for (int r = 0; r < 8; ++r) {
    CAPTURE(r);
    const ShardState st = src[r]->state();
    ShardImage img = shard_image(std::span<const ShardState>(&st, 1), save_context(g, 30, r, 8));
    const CheckpointFile& f = info.files[r];
    REQUIRE(img.file.pieces.size() == f.pieces.size());
    CHECK(img.file.bytes == f.bytes);
    CHECK(image_floats(img.file) == img.payload.size());
    for (size_t i = 0; i < f.pieces.size(); ++i) {
      CHECK(img.file.pieces[i].tensor == f.pieces[i].tensor);
      CHECK(img.file.pieces[i].offset == f.pieces[i].offset);
      CHECK(img.file.pieces[i].begin == f.pieces[i].begin);
      CHECK(img.file.pieces[i].end == f.pieces[i].end);
    }
    // The payload is the file after its 64-byte header, byte for byte.
    std::ifstream in(info.dir + "/" + f.name, std::ios::binary);
    std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(file.size() == f.bytes);
    CHECK(std::memcmp(file.data() + 64, img.payload.data(), img.payload.size() * sizeof(float)) == 0);
    CHECK(image_intact(img));
    // The entry travels as text and comes back the same.
    const CheckpointFile back = file_entry_of_text(file_entry_text(img.file), "test");
    CHECK(back.crc32c == img.file.crc32c);
    CHECK(back.pieces.size() == img.file.pieces.size());
    (*images)[r] = std::move(img);
  }
  ShardImage flipped = images->at(3);
  flipped.payload[5] = std::nextafter(flipped.payload[5], 1e9f);
  CHECK_FALSE(image_intact(flipped));

  // Loaded from the images under tp1 x pp4 x dp2: element for element, reading only the files
  // that hold the rank's layers.
  CheckpointInfo mem = info;
  mem.dir = "images in memory";
  auto dst = shards_of(g, {1, 2, {1, 1, 1, 1}});
  int reads_fewer = 0;
  for (auto& s : dst) {
    auto st = s->state();
    const std::vector<size_t> files = files_to_read(mem, std::span<const ShardState>(&st, 1), true);
    CHECK(!files.empty());
    // A stage of one layer needs one old stage's four files; the last stage also the first's
    // (its tied copy of wte loads from wte).
    reads_fewer += files.size() == 4;
    auto some = std::make_shared<std::map<int, ShardImage>>();
    for (size_t i : files) (*some)[mem.files[i].rank] = images->at(mem.files[i].rank);
    load_shard_states(mem, g, std::span<ShardState>(&st, 1), true, image_reader(some));
    CHECK(s->mismatches(true) == 0);
  }
  CHECK(reads_fewer == 6);
  // A reader without a rank's image fails naming it.
  auto none = std::make_shared<std::map<int, ShardImage>>();
  auto st = dst[0]->state();
  CHECK_THROWS_WITH(load_shard_states(mem, g, std::span<ShardState>(&st, 1), true, image_reader(none)),
                    Catch::Matchers::Contains("is not held here"));
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

namespace {

uint64_t folder_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.file_size();
  return n;
}

}  // namespace

TEST_CASE("checkpoint: the size priced before training is the size a save writes, under any plan") {
  const auto g = small_model();
  // tp2 x pp[3, 1] x dp2 (a distributed optimizer's owned ranges), and interleaved tp2 x pp2.
  auto plain = shards_of(g, {2, 2, {3, 1}});
  auto chunked = chunked_ranks(g, 2, 2, 1);
  struct Case {
    int world;
    std::function<std::vector<ShardState>(int)> states;
  };
  const Case cases[] = {{8, [&](int r) { return std::vector<ShardState>{plain[r]->state()}; }},
                        {4, [&](int r) { return states_of(chunked[r]); }}};
  int64_t step = 40;
  for (const Case& c : cases) {
    const std::string root = temp_dir(fmt::format("priced_{}", step));
    uint64_t priced = 0;
    for (int r = 0; r < c.world; ++r) priced += checkpoint_bytes_of_rank(c.states(r), save_context(g, step, r, c.world));
    save_ranks(g, root, step, c.world, c.states);
    const uint64_t written = folder_bytes(checkpoint_step_dir(root, step));
    INFO("world " << c.world << ": priced " << priced << ", written " << written);
    // The manifest's separators aside (a byte per file at most), the price is exact.
    CHECK(priced >= written);
    CHECK(priced - written <= static_cast<uint64_t>(c.world));
    ++step;
  }
}
