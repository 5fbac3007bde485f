// parallel.schedule: interleaved in the plan: the resolved parallel.virtual_stages and the model
// chunks of each stage (virtual stage c x pp + s holds the next layers in order), which the
// trainer builds one model per.
#include <catch2/catch.hpp>

#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::spec::Schedule;
using holmes::topo::NicKind;

TEST_CASE("interleaved plan: virtual stage c x pp + s on stage s, uniform cuts, auto = 2", "[plan][interleaved]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 4}});
  auto spec = hp::testing::make_spec(11, 256, 4, 1, 2, 2, 1, 8, 64);
  spec.parallel.schedule = Schedule::kInterleaved;
  spec.parallel.virtual_stages = 3;
  hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.schedule == Schedule::kInterleaved);
  CHECK(p.activation.virtual_stages == 3);
  REQUIRE(p.stages.size() == 2);
  // 11 layers over 6 virtual stages: 2 2 2 2 2 1 (earlier ones take the remainder).
  const std::vector<std::pair<int, int>> want0{{0, 2}, {4, 2}, {8, 2}}, want1{{2, 2}, {6, 2}, {10, 1}};
  for (int s = 0; s < 2; ++s) {
    const auto& want = s == 0 ? want0 : want1;
    REQUIRE(p.stages[s].chunks.size() == want.size());
    for (size_t c = 0; c < want.size(); ++c) {
      CHECK(p.stages[s].chunks[c].first_layer == want[c].first);
      CHECK(p.stages[s].chunks[c].num_layers == want[c].second);
    }
    CHECK(p.stages[s].first_layer == want[0].first);
  }
  CHECK(p.stages[0].num_layers == 6);
  CHECK(p.stages[1].num_layers == 5);

  spec.parallel.virtual_stages = holmes::spec::kAuto;
  p = hp::make_plan(spec, topo);
  CHECK(p.activation.virtual_stages == 2);
  CHECK(p.stages[1].chunks.size() == 2);

  spec.parallel.schedule = Schedule::k1f1b;  // one chunk: no chunk list, V = 1
  p = hp::make_plan(spec, topo);
  CHECK(p.activation.virtual_stages == 1);
  CHECK(p.stages[0].chunks.empty());
}
