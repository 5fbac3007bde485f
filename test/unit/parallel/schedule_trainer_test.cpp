// parallel.schedule through the trainer: zb-h1 (each backward split into B and W, the W
// passes held back into the bubbles, engine/schedule/schedule.hpp) runs the same forward and
// backward arithmetic as 1f1b: every layer's input and weight gradients are the same
// products, accumulated into grads() in micro-batch order whatever runs between B and W
// (model/gpt.hpp backward_weights). So every rank's losses, gradient norms, validation loss
// and weights are 1f1b's with every activation kept, bit for bit, for each recompute mode and
// tensor x pipeline x data parallel grid, including stages that hold W back by 1, 2 and 3.
#include <catch2/catch.hpp>

#include "engine/plan/cost_model.hpp"
#include "test/support/dist_test_util.hpp"
#include "test/support/same_runs.hpp"

using namespace holmes::parallel;
namespace schedule = holmes::schedule;
using namespace holmes::test;
using holmes::spec::Recompute;
using holmes::spec::Schedule;

namespace {

// 1f1b keeping every activation, then zb-h1 under each recompute mode, on grid g.
void check_schedules(holmes::spec::JobSpec spec, const Grid& g) {
  spec.parallel.schedule = Schedule::k1f1b;
  spec.train.recompute = Recompute::kNone;
  const std::vector<RankRun> ref = run_grid(spec, g);
  spec.parallel.schedule = Schedule::kZbH1;
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    INFO("zb-h1, train.recompute " << holmes::spec::to_string(r));
    spec.train.recompute = r;
    check_same_runs(run_grid(spec, g), ref);
  }
}

}  // namespace

TEST_CASE("schedule: zb-h1 on tp=2 x pp=2 x dp=2 gives 1f1b's numbers bit for bit, every recompute mode",
          "[train][dist][schedule]") {
  auto spec = tiny_job();
  spec.train.steps = 3;
  check_schedules(spec, Grid{.tp = 2, .pp = 2, .dp = 2, .bucket_floats = 700});
}

TEST_CASE("schedule: zb-h1 on four stages (W held back by 0..3) and on two stages with 8 micro-batches",
          "[train][dist][schedule]") {
  auto spec = tiny_job();
  spec.train.steps = 2;
  {
    INFO("pp=4, m=4");
    check_schedules(spec, Grid{.pp = 4});
  }
  spec.train.global_batch = 16;
  {
    INFO("pp=2 x dp=1, m=8");
    check_schedules(spec, Grid{.pp = 2, .bucket_floats = 500});
  }
}

TEST_CASE("schedule: a llama pipeline (pp=2 x dp=2) under zb-h1 with full recomputation gives 1f1b's numbers",
          "[train][dist][schedule]") {
  auto spec = tiny_job();
  spec.model.arch = "llama";
  spec.model.kv_heads = 2;
  spec.train.steps = 2;
  const Grid g{.pp = 2, .dp = 2};
  spec.parallel.schedule = Schedule::k1f1b;
  spec.train.recompute = Recompute::kNone;
  const std::vector<RankRun> ref = run_grid(spec, g);
  spec.parallel.schedule = Schedule::kZbH1;
  spec.train.recompute = Recompute::kFull;
  check_same_runs(run_grid(spec, g), ref);
}

TEST_CASE("schedule: the plan's choice overrides the spec's auto, and zb-h1 splits the backward", "[train][schedule]") {
  auto spec = tiny_job();
  spec.parallel.schedule = Schedule::kAuto;
  CHECK(pipe_schedule(spec, {}) == schedule::PipeSchedule::k1f1b);
  CHECK_FALSE(activation_policy(spec, {}).split_backward);
  CHECK(pipe_schedule(spec, {.schedule = Schedule::kZbH1}) == schedule::PipeSchedule::kZbH1);
  CHECK(activation_policy(spec, {.schedule = Schedule::kZbH1}).split_backward);
  spec.parallel.schedule = Schedule::kZbH1;
  CHECK(pipe_schedule(spec, {}) == schedule::PipeSchedule::kZbH1);
  CHECK(pipe_schedule(spec, {.schedule = Schedule::k1f1b}) == schedule::PipeSchedule::k1f1b);
}

TEST_CASE("schedule: the memory model's in-flight micro-batches are the step tables'", "[train][schedule]") {
  for (int p = 1; p <= 12; ++p)
    for (int m = 1; m <= 40; ++m)
      for (int s = 0; s < p; ++s) {
        INFO("pipeline " << p << " micro-batches " << m << " stage " << s);
        CHECK(holmes::plan::in_flight_micro_batches(Schedule::k1f1b, m, p, s) ==
              schedule::max_in_flight(schedule::PipeSchedule::k1f1b, p, s, m));
        CHECK(holmes::plan::in_flight_micro_batches(Schedule::kZbH1, m, p, s) ==
              schedule::max_in_flight(schedule::PipeSchedule::kZbH1, p, s, m));
      }
}
