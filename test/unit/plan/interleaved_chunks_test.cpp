// parallel.schedule: interleaved in the plan: the resolved parallel.virtual_stages and the model
// chunks of each stage (virtual stage c x pp + s holds the next layers in order), which the
// trainer builds one model per.
#include <catch2/catch.hpp>

#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::spec::Schedule;
using holmes::topo::NicKind;

TEST_CASE("interleaved plan: virtual stage c x pp + s on stage s, uniform cuts", "[plan][interleaved]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 4}});
  auto spec = hp::testing::make_spec(11, 256, 4, 1, 2, 2, 1, 8, 64);
  spec.parallel.schedule = Schedule::kInterleaved;
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kUniform;
  spec.parallel.virtual_stages = 3;
  hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.schedule == Schedule::kInterleaved);
  CHECK(p.activation.virtual_stages == 3);
  REQUIRE(p.stages.size() == 2);
  // 11 layers uniform over 2 stages (6, 5), each cut into 3 chunks: 2 2 2 and 2 2 1, numbered
  // in virtual-stage order: 2 2 2 2 2 1.
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

  spec.parallel.schedule = Schedule::k1f1b;  // one chunk: no chunk list, V = 1
  spec.parallel.virtual_stages = holmes::spec::kAuto;
  p = hp::make_plan(spec, topo);
  CHECK(p.activation.virtual_stages == 1);
  CHECK(p.stages[0].chunks.empty());
}

// The searched partition (per stage, following the devices' speeds, at least one layer per
// chunk) cut into each stage's chunks: the chunks tile the layers in virtual-stage order.
TEST_CASE("interleaved plan: chunks follow the searched partition", "[plan][interleaved]") {
  // GPT-2's vocabulary makes the last stage's head heavy: the balanced partition gives it few
  // layers (3 of 11 in 1f1b), fewer than 4 chunks need.
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 2}});
  auto spec = hp::testing::make_spec(12, 256, 4, 1, 2, 1, 1, 8, 64);
  spec.parallel.schedule = Schedule::kInterleaved;
  for (int v : {2, 3, 4}) {
    spec.parallel.virtual_stages = v;
    const hp::Plan p = hp::make_plan(spec, topo);
    REQUIRE(p.activation.virtual_stages == v);
    std::vector<std::pair<int, int>> by_virtual(2 * v);
    for (const hp::Stage& st : p.stages) {
      REQUIRE(static_cast<int>(st.chunks.size()) == v);
      int sum = 0, lo = st.chunks[0].num_layers, hi = lo;
      for (int c = 0; c < v; ++c) {
        const hp::LayerRange& r = st.chunks[c];
        CHECK(r.num_layers >= 1);
        sum += r.num_layers;
        lo = std::min(lo, r.num_layers);
        hi = std::max(hi, r.num_layers);
        by_virtual[c * 2 + st.stage] = {r.first_layer, r.num_layers};
      }
      CHECK(sum == st.num_layers);
      if (st.stage == 0) {
        CHECK(hi - lo <= 1);
      } else {  // the head's chunk takes the fewest layers; the others are even
        int others_lo = st.chunks[0].num_layers, others_hi = others_lo;
        for (int c = 0; c + 1 < v; ++c) {
          others_lo = std::min(others_lo, st.chunks[c].num_layers);
          others_hi = std::max(others_hi, st.chunks[c].num_layers);
        }
        CHECK(others_hi - others_lo <= 1);
        CHECK(st.chunks[v - 1].num_layers <= others_lo);
      }
      CHECK(st.first_layer == st.chunks[0].first_layer);
    }
    int next = 0;
    for (const auto& [first, n] : by_virtual) {
      CHECK(first == next);
      next = first + n;
    }
    CHECK(next == 12);
    CHECK(p.stages[0].num_layers > p.stages[1].num_layers);  // the head's stage takes fewer
  }
}

// The partition per virtual stage: a stage's chunks take equal time as near as whole layers
// allow, so the chunk with the LM head takes fewer layers (an even cut would leave the last
// virtual stage the slowest of the pipeline, a bubble at every chunk boundary).
TEST_CASE("interleaved plan: the head's chunk takes fewer layers, by the chunks' FLOPs", "[plan][interleaved]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 2}});
  // hidden 256, seq 64: a block is 24 C^2 + 4 T C = 1.6384 MFLOP a token forward; a padded
  // vocabulary of 6400 makes the head 2 C V = 3.2768 MFLOP, two layers' worth.
  auto spec = hp::testing::make_spec(16, 256, 4, 1, 2, 1, 1, 8, 64);
  spec.model.vocab_size = 6400;
  spec.train.recompute = holmes::spec::Recompute::kNone;
  spec.parallel.schedule = Schedule::kInterleaved;
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kUniform;
  spec.parallel.virtual_stages = 2;
  hp::Plan p = hp::make_plan(spec, topo);
  REQUIRE(p.stages.size() == 2);
  CHECK(p.stages[0].chunks[0].num_layers == 4);  // 8 layers, no head: 4 + 4
  CHECK(p.stages[0].chunks[1].num_layers == 4);
  CHECK(p.stages[1].chunks[0].num_layers == 5);  // 8 layers + a head of 2: 5 | 3 + 2
  CHECK(p.stages[1].chunks[1].num_layers == 3);
  CHECK(p.stages[1].chunks[1].first_layer == 13);
  spec.parallel.virtual_stages = 4;  // 8 + 2 over 4 chunks: 3 3 2 | 0 + 2 cannot go under 1
  p = hp::make_plan(spec, topo);
  const std::vector<int> want{3, 2, 2, 1};
  for (int c = 0; c < 4; ++c) CHECK(p.stages[1].chunks[c].num_layers == want[c]);
}

TEST_CASE("interleaved plan: virtual_stages auto picks by the estimate", "[plan][interleaved]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 4}});
  auto spec = hp::testing::make_spec(16, 256, 4, 1, 2, 2, 1, 8, 64);
  spec.parallel.schedule = Schedule::kInterleaved;
  double best = -1;
  int best_v = 0;
  for (int v = 2; v <= 8; ++v) {  // 16 layers over 2 stages: up to 8 chunks each
    spec.parallel.virtual_stages = v;
    const double t = hp::make_plan(spec, topo).estimate.step_time_s;
    if (best < 0 || t < best) best = t, best_v = v;
  }
  spec.parallel.virtual_stages = holmes::spec::kAuto;
  const hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.virtual_stages == best_v);
  CHECK(p.estimate.step_time_s == best);
  CHECK(p.stages[1].chunks.size() == static_cast<size_t>(best_v));
}
