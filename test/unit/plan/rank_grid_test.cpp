#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "engine/plan/rank_grid.hpp"
#include "common/errors.hpp"

using holmes::plan::Coords;
using holmes::plan::RankGrid;
namespace hp = holmes::plan;

namespace {

const char* kOrders[] = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};

// Brute force: walk the three coordinates nested as the order string says (last name
// outermost) and number them; group by the two coordinates that are not `axis`.
void check_against_brute_force(int tp, int pp, int dp, const std::string& order) {
  RankGrid grid(tp, pp, dp, order);
  auto name_axis = [](const std::string& n) { return n == "tp" ? hp::kTp : n == "pp" ? hp::kPp : hp::kDp; };
  int axes[3] = {name_axis(order.substr(0, 2)), name_axis(order.substr(3, 2)), name_axis(order.substr(6, 2))};
  int size[3] = {tp, pp, dp};
  std::vector<Coords> expected;
  Coords c;
  for (c[axes[2]] = 0; c[axes[2]] < size[axes[2]]; ++c[axes[2]])
    for (c[axes[1]] = 0; c[axes[1]] < size[axes[1]]; ++c[axes[1]])
      for (c[axes[0]] = 0; c[axes[0]] < size[axes[0]]; ++c[axes[0]]) expected.push_back(c);
  REQUIRE(grid.size() == static_cast<int>(expected.size()));
  for (int i = 0; i < grid.size(); ++i) {
    REQUIRE(grid.coords(i) == expected[i]);
    REQUIRE(grid.index(expected[i]) == i);
  }
  for (int axis = 0; axis < 3; ++axis) {
    std::map<std::pair<int, int>, std::vector<int>> brute;
    for (int i = 0; i < grid.size(); ++i) {
      Coords k = expected[i];
      int a = (axis + 1) % 3, b = (axis + 2) % 3;
      brute[{k[a], k[b]}].push_back(i);  // ascending i; sort by axis coordinate below
    }
    std::set<std::vector<int>> want;
    for (auto& [key, members] : brute) {
      std::sort(members.begin(), members.end(),
                [&](int x, int y) { return expected[x][axis] < expected[y][axis]; });
      want.insert(members);
    }
    auto got_list = grid.groups(axis);
    std::set<std::vector<int>> got(got_list.begin(), got_list.end());
    REQUIRE(got_list.size() == want.size());
    REQUIRE(got == want);
  }
}

}  // namespace

TEST_CASE("rank grid matches brute force for every order and many shapes", "[rank_grid]") {
  int sizes[] = {1, 2, 3, 4, 5, 7, 8};
  for (const char* order : kOrders)
    for (int tp : sizes)
      for (int pp : sizes)
        for (int dp : {1, 2, 3, 6, 13}) check_against_brute_force(tp, pp, dp, order);
}

TEST_CASE("rank grid handles thousands of nodes", "[rank_grid]") {
  // 1024 nodes x 8 devices, and an odd 1031-node shape.
  check_against_brute_force(8, 16, 64, "tp-dp-pp");
  check_against_brute_force(8, 4, 256, "tp-pp-dp");
  check_against_brute_force(1, 1031, 1, "pp-dp-tp");
  check_against_brute_force(7, 3, 1031, "dp-tp-pp");
}

TEST_CASE("Megatron order tp-dp-pp: tensor fastest, pipeline slowest", "[rank_grid]") {
  RankGrid g(2, 2, 4, "tp-dp-pp");
  CHECK(g.index(Coords{1, 0, 0}) == 1);
  CHECK(g.index(Coords{0, 0, 1}) == 2);
  CHECK(g.index(Coords{0, 1, 0}) == 8);
  CHECK(g.group(hp::kDp, 0) == std::vector<int>{0, 2, 4, 6});
  CHECK(g.group(hp::kPp, 3) == std::vector<int>{3, 11});
}

TEST_CASE("bad order strings are user errors naming the key", "[rank_grid]") {
  for (const char* bad : {"tp-dp", "tp-tp-pp", "tp-dp-xx", "tpdppp", "", "tp-dp-pp-"}) {
    try {
      RankGrid(1, 1, 1, bad);
      FAIL("accepted " << bad);
    } catch (const holmes::UserError& e) {
      CHECK(std::string(e.what()).find("parallel.order") != std::string::npos);
    }
  }
}
