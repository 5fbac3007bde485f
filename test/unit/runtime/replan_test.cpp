// Re-planning a single pipeline on its survivors (engine/runtime/replan.hpp): which nodes a set
// of registrations loses, how the survivors are numbered in the new plan (against a brute
// force over every set of lost nodes of a small cluster), and the decision's store text.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/plan/survivors.hpp"
#include "engine/runtime/replan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using namespace holmes::runtime;
using holmes::topo::NicKind;

namespace {

// Three islands of one or two nodes of 4 devices each: one pipeline across them.
holmes::topo::ClusterTopology cluster() {
  return hp::testing::make_cluster({{NicKind::kIb, 2, 4}, {NicKind::kRoce, 1, 4}, {NicKind::kEthernet, 2, 4}});
}

hp::Plan plan_of(const holmes::topo::ClusterTopology& t) {
  return hp::make_plan(hp::testing::make_spec(10, 256, 8, 4, 5, 1, 1, 20, 256), t);
}

}  // namespace

TEST_CASE("lost_nodes: a node is lost when any of its ranks did not register") {
  const hp::Plan p = plan_of(cluster());
  REQUIRE(p.world == 20);
  std::vector<int> all(20);
  for (int r = 0; r < 20; ++r) all[r] = r;
  CHECK(lost_nodes(p, all).empty());
  std::vector<int> alive = all;
  alive.erase(std::find(alive.begin(), alive.end(), p.ranks[9].rank));  // one rank of node 2
  CHECK(lost_nodes(p, alive) == std::vector<int>{p.ranks[9].node});
  alive.erase(std::find(alive.begin(), alive.end(), 0));
  alive.push_back(99);  // not a rank of the plan: ignored
  std::vector<int> want{p.ranks[0].node, p.ranks[9].node};
  std::sort(want.begin(), want.end());
  CHECK(lost_nodes(p, alive) == want);
  CHECK(lost_nodes(p, {}) == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("survivor_ranks: every surviving rank keeps its node and local rank, numbered anew") {
  const auto t = cluster();
  const hp::Plan before = plan_of(t);
  auto spec = hp::testing::make_spec(10, 256, 8, 4, 5, 1, 1, 20, 256);
  for (int mask = 1; mask < 31; ++mask) {  // every non-empty proper set of lost nodes
    std::vector<int> lost;
    for (int n = 0; n < 5; ++n)
      if (mask & (1 << n)) lost.push_back(n);
    const hp::SurvivorPlan after = hp::plan_on_survivors(spec, t, lost);
    INFO("lost nodes mask " << mask << ": " << after.why);
    if (!after.fits) continue;
    const std::vector<int> m = survivor_ranks(before, after);
    REQUIRE(m.size() == 20);
    std::set<int> taken;
    for (const hp::RankInfo& r : before.ranks) {
      const bool gone = std::find(lost.begin(), lost.end(), r.node) != lost.end();
      if (gone) {
        CHECK(m[r.rank] == -1);
        continue;
      }
      REQUIRE(m[r.rank] >= 0);
      const hp::RankInfo& now = after.plan.ranks.at(m[r.rank]);
      CHECK(after.old_node.at(now.node) == r.node);
      CHECK(now.local_rank == r.local_rank);
      CHECK(taken.insert(m[r.rank]).second);
    }
    CHECK(static_cast<int>(taken.size()) == after.plan.world);  // the new world is the survivors
  }
}

TEST_CASE("survivor_ranks refuses a survivors' plan without a place for a survivor") {
  const auto t = cluster();
  const hp::Plan before = plan_of(t);
  hp::SurvivorPlan after = hp::plan_on_survivors(hp::testing::make_spec(10, 256, 8, 4, 5, 1, 1, 20, 256), t, {4});
  REQUIRE(after.fits);
  after.plan.ranks.pop_back();
  CHECK_THROWS_AS(survivor_ranks(before, after), std::logic_error);
}

TEST_CASE("the re-plan decision round-trips through its store text") {
  ReplanDecision d;
  d.generation = 3;
  d.lost_nodes = {1, 4};
  d.missing_ranks = {4, 5, 17};
  d.steps_done = 1234567890123;
  const ReplanDecision e = decode_replan(encode_replan(d));
  CHECK(e.generation == 3);
  CHECK(e.lost_nodes == d.lost_nodes);
  CHECK(e.missing_ranks == d.missing_ranks);
  CHECK(e.steps_done == d.steps_done);
  ReplanDecision none;
  none.generation = 1;
  const ReplanDecision f = decode_replan(encode_replan(none));
  CHECK(f.lost_nodes.empty());
  CHECK(f.missing_ranks.empty());
  CHECK_THROWS_AS(decode_replan("generation 1\nlost 2\n"), std::runtime_error);
  CHECK_THROWS_AS(decode_replan("generation x\nlost\nmissing\nsteps 1\n"), std::runtime_error);
  CHECK_THROWS_AS(decode_replan("generation 1\nlost\nmissing\nsteps 1\nextra 2\n"), std::runtime_error);
}
