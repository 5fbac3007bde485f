// Peer copies (engine/train/peer_copies.hpp): each rank's buddy is on the next node; a mirror
// leaves every shard on two nodes; after a node is lost the survivors' copies reshard into the
// new plan element for element, and are passed over when incomplete or older than the folder.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "engine/train/peer_copies.hpp"
#include "test/support/checkpoint_test_util.hpp"
#include "test/support/harness.hpp"

using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::test;
using namespace holmes::train;
using holmes::comm::test::Impl;
using holmes::comm::test::Job;
using holmes::comm::test::run_ranks;

namespace {

// A plan of nodes with `per_node[n]` ranks each, numbered node by node.
plan::Plan plan_of(const std::vector<int>& per_node) {
  plan::Plan p;
  int rank = 0;
  for (int n = 0; n < static_cast<int>(per_node.size()); ++n)
    for (int l = 0; l < per_node[n]; ++l) p.ranks.push_back({.rank = rank++, .node = n, .local_rank = l, .at = {}});
  p.world = rank;
  return p;
}

// One pipeline stage per rank over small_model's 4 layers.
std::vector<std::unique_ptr<FakeShard>> stages(const model::GptConfig& g, const std::vector<int>& layers) {
  std::vector<std::unique_ptr<FakeShard>> out;
  int first = 0;
  for (int n : layers) {
    out.push_back(std::make_unique<FakeShard>(g, 1, 0, first, n, 1, 0));
    first += n;
  }
  return out;
}

// Generation 0: three ranks on three nodes (stages of 2, 1, 1 layers) mirror step `step`;
// returns what each holds.
std::vector<std::optional<HeldCopies>> mirrored(const model::GptConfig& g, int64_t step) {
  const plan::Plan plan = plan_of({1, 1, 1});
  auto src = stages(g, {2, 1, 1});
  for (auto& s : src) s->fill();
  Job job(Impl::kGloo, 3);
  std::vector<std::optional<HeldCopies>> held(3);
  run_ranks(3, [&](int r) {
    auto store = job.store_for(r);
    auto group = job.group(store, "peer-copies", job.all_ranks(), r);
    PeerCopies copies(plan, r, 0, store, group.get());
    const ShardState st = src[r]->state();
    SaveContext c = save_context(g, step, r, 3);
    copies.mirror(std::span<const ShardState>(&st, 1), c);
    held[r] = copies.held();
  });
  return held;
}

}  // namespace

TEST_CASE("peer copies: each rank's buddy is a rank of the next node, every rank is some rank's buddy") {
  for (const std::vector<int>& nodes : {std::vector<int>{1, 1, 1}, {2, 1, 3}, {4, 2}, {3, 3, 3, 3}}) {
    CAPTURE(nodes);
    const plan::Plan p = plan_of(nodes);
    std::set<int> buddies;
    for (const auto& r : p.ranks) {
      const int b = buddy_of(p, r.rank);
      REQUIRE(b >= 0);
      CHECK(p.ranks.at(b).node == (r.node + 1) % static_cast<int>(nodes.size()));
      buddies.insert(b);
    }
    // Every rank of a node at least as large as the one before it is a buddy of someone.
    for (const auto& r : p.ranks) {
      const int before = (r.node + static_cast<int>(nodes.size()) - 1) % static_cast<int>(nodes.size());
      if (nodes[before] >= nodes[r.node]) CHECK(buddies.count(r.rank) == 1);
    }
  }
  CHECK(buddy_of(plan_of({4}), 2) == -1);  // one node: nobody to copy to
}

TEST_CASE("peer copies: a buddy is on the node's island when the island has another node") {
  // Islands {0, 1}, {2}, {3, 4}: the copies of islands of two nodes stay inside them; the lone
  // node's goes to the next node of the plan.
  plan::Plan p = plan_of({2, 2, 2, 2, 2});
  p.islands = {{.id = 0, .kind = "ib", .nodes = {0, 1}, .devices = 4}, {.id = 1, .kind = "ethernet", .nodes = {2}, .devices = 2},
               {.id = 2, .kind = "roce", .nodes = {3, 4}, .devices = 4}};
  const std::vector<int> want_node{1, 0, 3, 4, 3};
  for (const auto& r : p.ranks) {
    CAPTURE(r.rank);
    const int b = buddy_of(p, r.rank);
    CHECK(p.ranks.at(b).node == want_node[r.node]);
    CHECK(p.ranks.at(b).local_rank == r.local_rank);
  }
}

TEST_CASE("peer copies: a mirror leaves each shard with its rank and its buddy") {
  const auto g = small_model();
  const auto held = mirrored(g, 30);
  // Rank r holds its own shard and that of the rank on the node before it.
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    REQUIRE(held[r]);
    CHECK(held[r]->meta.step == 30);
    CHECK(held[r]->meta.world == 3);
    CHECK(held[r]->own_rank == r);
    REQUIRE(held[r]->images->size() == 2);
    CHECK(held[r]->images->count(r) == 1);
    CHECK(held[r]->images->count((r + 2) % 3) == 1);
    for (const auto& [o, img] : *held[r]->images) CHECK(image_intact(img));
  }
  // The copy equals the original, bit for bit.
  CHECK(held[0]->images->at(2).payload == held[2]->images->at(2).payload);
  CHECK(MirrorMeta::parse(held[1]->meta.text()).text() == held[1]->meta.text());
}

TEST_CASE("peer copies: the survivors of a lost node reshard from the copies, or pass them over") {
  const auto g = small_model();
  const auto held = mirrored(g, 30);
  // Node 2 (old rank 2) is lost; old ranks 0 and 1 go on as ranks 0 and 1 with two stages.
  auto restore = [&](int64_t disk_step, std::vector<std::optional<HeldCopies>> mine, bool expect) {
    Job job(Impl::kGloo, 2);
    auto dst = stages(g, {2, 2});
    std::vector<std::optional<PeerSource>> found(2);
    run_ranks(2, [&](int r) {  // no Catch2 assertion on these threads: checked after
      auto store = job.store_for(r);
      auto group = job.group(store, "peer-copies", job.all_ranks(), r);
      found[r] = peer_source(mine[r], disk_step, g, *store, *group, r, 2, 20.0);
      if (!found[r]) return;
      auto st = dst[r]->state();
      const PieceReader read = found[r]->fetch(files_to_read(found[r]->info, std::span<const ShardState>(&st, 1), true));
      load_shard_states(found[r]->info, g, std::span<ShardState>(&st, 1), true, read);
    });
    for (int r = 0; r < 2; ++r) {
      CAPTURE(r);
      REQUIRE(found[r].has_value() == expect);
      if (!expect) continue;
      CHECK(found[r]->info.step == 30);
      CHECK(found[r]->info.world == 3);
      CHECK(found[r]->info.files.size() == 3);
      CHECK(found[r]->holder.at(2) == 0);  // rank 2's buddy was rank 0 (node 2 -> node 0)
      CHECK(found[r]->holder.at(1) == 1);  // its own rank first
      CHECK(dst[r]->mismatches(true) == 0);
    }
  };
  SECTION("copies whole and as new as the folder's checkpoint: taken") { restore(30, {held[0], held[1]}, true); }
  SECTION("no checkpoint in the folder: taken") { restore(-1, {held[0], held[1]}, true); }
  SECTION("the folder holds a newer checkpoint: passed over") { restore(40, {held[0], held[1]}, false); }
  SECTION("rank 2's shard is held by nobody left (its buddy lost too): passed over") {
    restore(-1, {std::nullopt, held[1]}, false);
  }
}
