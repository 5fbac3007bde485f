// The rank grid (engine/plan/rank_grid.hpp) against brute force: every coordinate numbered by
// nested loops in the order's nesting, and every set of axes' groups found by sorting the
// ranks that share the other axes' coordinates, with Megatron-LM's RankGenerator ordering.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "engine/plan/rank_grid.hpp"

using holmes::plan::RankGrid;
using holmes::schedule::Axis;
using holmes::schedule::AxisDegrees;
using holmes::schedule::AxisSet;
using holmes::schedule::Coords;
namespace hs = holmes::schedule;

namespace {

std::vector<Axis> axes_of(const std::string& order) {
  std::vector<Axis> out;
  size_t start = 0;
  for (;;) {
    const size_t dash = order.find('-', start);
    out.push_back(*hs::axis_named(order.substr(start, dash == std::string::npos ? dash : dash - start)));
    if (dash == std::string::npos) return out;
    start = dash + 1;
  }
}

// Every subset of the axes named in `order`, the empty one left out.
std::vector<AxisSet> subsets(const std::vector<Axis>& named) {
  std::vector<AxisSet> out;
  for (unsigned mask = 1; mask < (1u << named.size()); ++mask) {
    AxisSet s;
    for (size_t i = 0; i < named.size(); ++i)
      if (mask & (1u << i)) s.insert(named[i]);
    out.push_back(s);
  }
  return out;
}

// The key that orders `c` over `axes` as the grid promises: the slowest of them (last in the
// order) most significant.
std::vector<int> key(const Coords& c, const std::vector<Axis>& order, AxisSet axes, bool inside) {
  std::vector<int> k;
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (axes.contains(*it) == inside) k.push_back(c[*it]);
  return k;
}

void check_against_brute_force(const AxisDegrees& deg, const std::string& order) {
  INFO("order " << order << " degrees tp " << deg[Axis::kTp] << " pp " << deg[Axis::kPp] << " dp " << deg[Axis::kDp]
                << " replica " << deg[Axis::kReplica]);
  RankGrid grid(deg, order);
  const std::vector<Axis> named = axes_of(order);
  // Nested loops, the last name outermost.
  std::vector<Coords> expected;
  Coords c;
  const auto walk = [&](auto&& self, int level) -> void {
    if (level < 0) {
      expected.push_back(c);
      return;
    }
    const Axis a = named[level];
    for (c[a] = 0; c[a] < deg[a]; ++c[a]) self(self, level - 1);
    c[a] = 0;
  };
  walk(walk, static_cast<int>(named.size()) - 1);
  REQUIRE(grid.size() == static_cast<int>(expected.size()));
  for (int i = 0; i < grid.size(); ++i) {
    REQUIRE(grid.coords(i) == expected[i]);
    REQUIRE(grid.index(expected[i]) == i);
  }
  for (AxisSet axes : subsets(named)) {
    INFO("axes " << axes.name());
    // Ranks sharing the other axes' coordinates, groups by those coordinates (slowest most
    // significant), members by theirs on `axes`.
    std::map<std::vector<int>, std::map<std::vector<int>, int>> brute;
    for (int i = 0; i < grid.size(); ++i)
      brute[key(expected[i], named, axes, false)][key(expected[i], named, axes, true)] = i;
    REQUIRE(grid.group_count(axes) == static_cast<int>(brute.size()));
    int g = 0;
    for (const auto& [outside, members] : brute) {
      std::vector<int> want;
      for (const auto& [inside, i] : members) want.push_back(i);
      REQUIRE(grid.group(axes, g) == want);
      for (size_t k = 0; k < want.size(); ++k) REQUIRE(grid.position(axes, expected[want[k]]) == static_cast<int>(k));
      ++g;
    }
  }
}

const char* kOrders[] = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};

}  // namespace

TEST_CASE("rank grid matches brute force for every order and many shapes", "[rank_grid]") {
  int sizes[] = {1, 2, 3, 4, 5, 7, 8};
  for (const char* order : kOrders)
    for (int tp : sizes)
      for (int pp : sizes)
        for (int dp : {1, 2, 3, 6, 13}) check_against_brute_force(RankGrid(tp, pp, dp, order).degrees(), order);
}

TEST_CASE("rank grid: four axes, every set of them, as Megatron's RankGenerator groups them", "[rank_grid]") {
  for (const char* order : {"tp-dp-pp-replica", "replica-tp-pp-dp", "pp-replica-dp-tp", "dp-tp-replica-pp"})
    for (int tp : {1, 2, 3})
      for (int pp : {1, 2, 4})
        for (int dp : {1, 3})
          for (int replica : {1, 2, 3})
            check_against_brute_force(
                AxisDegrees{{Axis::kTp, tp}, {Axis::kPp, pp}, {Axis::kDp, dp}, {Axis::kReplica, replica}}, order);
}

TEST_CASE("rank grid handles thousands of nodes", "[rank_grid]") {
  // 1024 nodes x 8 devices, and an odd 1031-node shape.
  check_against_brute_force(RankGrid(8, 16, 64, "tp-dp-pp").degrees(), "tp-dp-pp");
  check_against_brute_force(RankGrid(8, 4, 256, "tp-pp-dp").degrees(), "tp-pp-dp");
  check_against_brute_force(RankGrid(1, 1031, 1, "pp-dp-tp").degrees(), "pp-dp-tp");
  check_against_brute_force(RankGrid(7, 3, 1031, "dp-tp-pp").degrees(), "dp-tp-pp");
}

TEST_CASE("Megatron order tp-dp-pp: tensor fastest, pipeline slowest", "[rank_grid]") {
  RankGrid g(2, 2, 4, "tp-dp-pp");
  Coords c;
  c[Axis::kTp] = 1;
  CHECK(g.index(c) == 1);
  c = {};
  c[Axis::kDp] = 1;
  CHECK(g.index(c) == 2);
  c = {};
  c[Axis::kPp] = 1;
  CHECK(g.index(c) == 8);
  CHECK(g.group({Axis::kDp}, 0) == std::vector<int>{0, 2, 4, 6});
  CHECK(g.group({Axis::kPp}, 3) == std::vector<int>{3, 11});
  // Megatron's "tp-dp" groups (its model-parallel-free data groups with tensor inside).
  CHECK(g.group({Axis::kTp, Axis::kDp}, 1) == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(g.group({Axis::kTp, Axis::kPp}, 2) == std::vector<int>{4, 5, 12, 13});
}

TEST_CASE("bad order strings are user errors naming the key", "[rank_grid]") {
  for (const char* bad : {"tp-dp", "tp-tp-pp", "tp-dp-xx", "tpdppp", "", "tp-dp-pp-", "tp-dp-replica"}) {
    try {
      holmes::plan::parse_order(bad);
      FAIL("accepted " << bad);
    } catch (const holmes::UserError& e) {
      CHECK(std::string(e.what()).find("parallel.order") != std::string::npos);
    }
  }
  CHECK(holmes::plan::parse_order("pp-tp-dp") == std::vector<Axis>{Axis::kPp, Axis::kTp, Axis::kDp});
  // The grid itself: an axis of degree > 1 the order leaves out is a wiring error.
  CHECK_THROWS_AS(RankGrid(AxisDegrees{{Axis::kReplica, 2}}, "tp-dp-pp"), std::invalid_argument);
  CHECK_THROWS_AS(RankGrid(0, 1, 1, "tp-dp-pp"), holmes::UserError);
}
