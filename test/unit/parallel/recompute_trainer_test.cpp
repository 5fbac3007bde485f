// train.recompute through the trainer: a tensor x pipeline x data parallel job (the 1F1B
// stage keeps several micro-batches in flight, the distributed optimizer reduces buckets as
// the backward finishes them, tensor-parallel shards repeat their sums in a full replay) gives
// every rank the losses, gradient norms, validation loss and weights of the job that keeps
// every activation, bit for bit.
#include <catch2/catch.hpp>

#include "test/support/dist_test_util.hpp"
#include "test/support/same_runs.hpp"

using namespace holmes::parallel;
using namespace holmes::test;
using holmes::spec::Recompute;

TEST_CASE("recompute: tp=2 x pp=2 x dp=2 with selective and full gives none's numbers bit for bit",
          "[train][dist][recompute]") {
  auto spec = tiny_job();
  spec.train.steps = 3;
  const Grid g{.tp = 2, .pp = 2, .dp = 2, .bucket_floats = 700};
  spec.train.recompute = Recompute::kNone;
  const std::vector<RankRun> ref = run_grid(spec, g);
  for (Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    INFO("train.recompute " << holmes::spec::to_string(r));
    spec.train.recompute = r;
    check_same_runs(run_grid(spec, g), ref);
  }
}

TEST_CASE("recompute: a llama pipeline (pp=2 x dp=2) with full recomputation gives none's numbers bit for bit",
          "[train][dist][recompute]") {
  auto spec = tiny_job();
  spec.model.arch = "llama";
  spec.model.kv_heads = 2;
  spec.train.steps = 3;
  const Grid g{.pp = 2, .dp = 2};
  spec.train.recompute = Recompute::kNone;
  const std::vector<RankRun> ref = run_grid(spec, g);
  spec.train.recompute = Recompute::kFull;
  check_same_runs(run_grid(spec, g), ref);
}

TEST_CASE("recompute: the plan's choice overrides the spec's auto, and auto without a plan keeps everything",
          "[train][recompute]") {
  auto spec = tiny_job();
  spec.train.recompute = Recompute::kAuto;
  CHECK(activation_policy(spec, {}).recompute == holmes::model::Recompute::kNone);
  CHECK(activation_policy(spec, {.recompute = Recompute::kFull}).recompute == holmes::model::Recompute::kFull);
  spec.train.recompute = Recompute::kSelective;
  CHECK(activation_policy(spec, {}).recompute == holmes::model::Recompute::kSelective);
}
