// parallel.schedule in the planner: zb-h1's bubble and its W passes against the pipeline
// sends, its activations (every stage holds min(m, p) micro-batches, each with the gradients
// W reads), auto taking the fastest that fits, and --plan-only showing the choice, its
// runner-up and its effect over 1f1b.
#include <catch2/catch.hpp>

#include "engine/plan/cost_model.hpp"
#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::spec::Recompute;
using holmes::spec::Schedule;
using holmes::topo::NicKind;

namespace {

// Two islands of 2 nodes x 8 GPUs joined by Ethernet, tensor 8, pipeline 2 (one stage per
// island), data 2: the pipeline crosses the slow link, as the Holmes plan has it.
holmes::spec::JobSpec two_islands() { return hp::testing::make_spec(24, 2048, 16, 8, 2, 2, 1, 32, 2048); }

}  // namespace

TEST_CASE("schedule: zb-h1's estimate has the smaller bubble, sends price as under 1f1b", "[plan][schedule]") {
  hp::StageTime t;  // F = B = W = 1
  t.compute_s = 3, t.weights_s = 1, t.send_next_s = 0.5;
  CHECK(t.pp_exposed_s() == 0);  // the send runs beside the stage's own passes
  CHECK(t.per_micro_batch() == 3);
  CHECK(t.bubble_s(4) == Approx(3 * (3 - 2)));  // (p - 1)(F + B - W)
  t.send_next_s = 4.5;                          // a link slower than the stage's work
  CHECK(t.pp_exposed_s() == Approx(1.5));
  CHECK(t.bubble_s(4) == Approx(3 * (4.5 - 2)));
  hp::StageTime f;  // 1f1b: no W moves
  f.compute_s = 3, f.send_next_s = 4.5;
  CHECK(f.per_micro_batch() == Approx(4.5));
  CHECK(f.bubble_s(4) == Approx(3 * 4.5));
  CHECK(f.bubble_s(4) - t.bubble_s(4) == Approx(3 * 2 * t.weights_s));  // what zb-h1 saves
}

TEST_CASE("schedule: auto picks zb-h1 across islands, 1f1b is the runner-up, both shown", "[plan][schedule]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 2, 8}, {NicKind::kRoce, 2, 8}});
  auto spec = two_islands();
  spec.train.recompute = Recompute::kNone;
  spec.parallel.schedule = Schedule::k1f1b;
  const hp::Plan f1b = hp::make_plan(spec, topo);
  CHECK_FALSE(f1b.activation_chosen);
  CHECK_FALSE(f1b.has_one_f_one_b);
  spec.parallel.schedule = Schedule::kZbH1;
  const hp::Plan zb = hp::make_plan(spec, topo);
  CHECK(zb.activation.schedule == Schedule::kZbH1);
  CHECK(zb.estimate.bubble_s < f1b.estimate.bubble_s);
  CHECK(zb.estimate.step_time_s < f1b.estimate.step_time_s);
  CHECK(zb.estimate.pp_comm_s <= f1b.estimate.pp_comm_s);
  // More held: every stage min(m, p) micro-batches, and the gradients W reads.
  CHECK(zb.activation.activations > f1b.activation.activations);
  CHECK(hp::plan_hash(zb) != hp::plan_hash(f1b));
  REQUIRE(zb.has_one_f_one_b);
  CHECK(zb.one_f_one_b.step_time_s == Approx(f1b.estimate.step_time_s));

  spec.parallel.schedule = Schedule::kAuto;
  const hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.schedule == Schedule::kZbH1);
  CHECK(p.activation.recompute == Recompute::kNone);
  REQUIRE(p.activation_chosen);
  CHECK(p.schedule_chosen);
  CHECK_FALSE(p.recompute_chosen);
  CHECK(p.runner_up.schedule == Schedule::k1f1b);
  CHECK(p.runner_up.step_time_s == Approx(f1b.estimate.step_time_s));
  const std::string text = hp::format_plan_text(p);
  CHECK_THAT(text, Catch::Contains("Schedule and recomputation (parallel.schedule auto, train.recompute as given): "
                                   "zb-h1, recompute none"));
  CHECK_THAT(text, Catch::Contains("runner-up: 1f1b, recompute none"));
  CHECK_THAT(text, Catch::Contains("zb-h1 gains +"));
  const std::string json = hp::format_plan_json(p);
  CHECK_THAT(json, Catch::Contains("\"plan\": {\"schedule\": \"zb-h1\", \"recompute\": \"none\""));
  CHECK_THAT(json, Catch::Contains("\"one_f_one_b\": {\"schedule\": \"1f1b\""));
}

TEST_CASE("schedule: one stage gains nothing from zb-h1, so auto keeps 1f1b", "[plan][schedule]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 8}});
  auto spec = hp::testing::make_spec(24, 2048, 16, 8, 1, 1, 1, 8, 2048);
  const hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.schedule == Schedule::k1f1b);
  CHECK(p.estimate.bubble_s == 0);
}

TEST_CASE("schedule: when zb-h1's extra activations do not fit, auto keeps 1f1b", "[plan][schedule]") {
  // The same two islands at 8192 tokens, the micro-batch grown until 1f1b still fits and zb-h1
  // does not: under zb-h1 the last stage holds two micro-batches instead of one, and every
  // stage keeps the gradients W reads.
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 2, 8}, {NicKind::kRoce, 2, 8}});
  auto spec = two_islands();
  spec.train.recompute = Recompute::kNone;
  spec.train.seq_len = spec.model.max_seq_len = 8192;
  auto fits = [&](Schedule s) {
    spec.parallel.schedule = s;
    try {
      hp::make_plan(spec, topo);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  };
  for (int mb : {1, 2, 4, 8, 16}) {
    spec.train.micro_batch = mb;
    spec.train.global_batch = 2 * mb * 16;
    const bool zb_fits = fits(Schedule::kZbH1), f1b_fits = fits(Schedule::k1f1b);
    if (zb_fits || !f1b_fits) continue;
    INFO("micro_batch " << mb);
    spec.parallel.schedule = Schedule::kAuto;
    const hp::Plan p = hp::make_plan(spec, topo);
    CHECK(p.activation.schedule == Schedule::k1f1b);
    CHECK_FALSE(p.runner_up.fits);
    return;
  }
  FAIL("no micro-batch size where 1f1b fits and zb-h1 does not");
}
