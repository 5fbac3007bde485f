// plan::rank_plan: every rank's slice of a plan, checked against the plan it came from and
// against what the ranks must agree on together: each rank sits where the plan put it, the
// stages' chunks tile the layers once in virtual-stage order, the data ranks of a model
// replica read each share of the global batch once, and each step table is the schedule's.
#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>
#include <vector>

#include "engine/plan/rank_plan.hpp"
#include "engine/schedule/schedule.hpp"
#include "test/support/cluster_gen.hpp"
#include "test/support/rank_plans.hpp"

using holmes::plan::Plan;
using holmes::schedule::Axis;
using holmes::schedule::LayerRange;
using holmes::schedule::PipeSchedule;
using holmes::schedule::RankPlan;
namespace spec = holmes::spec;

namespace {

spec::JobSpec small_spec() {
  spec::JobSpec s = holmes::plan::testing::make_spec(8, 64, 4, 0, 0, 0, /*micro_batch=*/1, /*global_batch=*/16,
                                                     /*seq_len=*/32);
  s.model.vocab_size = 257;
  s.parallel.nccl = spec::NcclMode::kOff;
  return s;
}

// Every rank of `plan` against the plan and each other.
void check_rank_plans(const Plan& plan, int layers) {
  const bool diloco = plan.replicas.count > 1 && plan.replicas.outer == spec::OuterMode::kDiloco;
  std::vector<RankPlan> all;
  for (int r = 0; r < plan.world; ++r) all.push_back(holmes::plan::rank_plan(plan, r));
  // Chunks by virtual stage, from the first tp/dp/replica rank of each stage.
  std::vector<LayerRange> by_virtual;
  std::set<std::vector<int>> seen_data;  // (tp, pp, replica-of-model) -> data ranks
  for (const RankPlan& rp : all) {
    INFO("rank " << rp.rank);
    const auto& me = plan.ranks[rp.rank];
    CHECK(rp.place[Axis::kTp] == me.at[Axis::kTp]);
    CHECK(rp.place[Axis::kPp] == me.at[Axis::kPp]);
    CHECK(rp.place[Axis::kDp] == me.at[Axis::kDp]);
    CHECK(rp.place.degree(Axis::kTp) == plan.tp);
    CHECK(rp.place.degree(Axis::kPp) == plan.pp);
    CHECK(rp.place.degree(Axis::kDp) == plan.dp);
    // Only diloco's replicas train apart; sync replicas are data-parallel ranks.
    CHECK(rp.place.degree(Axis::kReplica) == (diloco ? plan.replicas.count : 1));
    CHECK(rp.place[Axis::kReplica] == (diloco ? me.at[Axis::kReplica] : 0));
    // The batch: every data rank's micro-batches make the global batch.
    CHECK(rp.micro_batch == plan.micro_batch);
    CHECK(rp.micro_batches * rp.micro_batch * rp.place.data_size() == plan.global_batch);
    CHECK(rp.seq_len == plan.seq_len);
    CHECK(rp.recompute == plan.activation.recompute);
    CHECK(rp.recompute != spec::Recompute::kAuto);
    CHECK(rp.document_mask == plan.activation.document_mask);
    CHECK(rp.schedule == holmes::plan::pipe_schedule(plan.activation.schedule));
    CHECK(rp.steps == holmes::schedule::schedule_steps(rp.schedule, plan.pp, rp.place[Axis::kPp], rp.micro_batches,
                                                       static_cast<int>(rp.chunks.size())));
    CHECK(rp.split_backward() == (rp.schedule == PipeSchedule::kZbH1));
    // Each micro-batch runs forward once per chunk.
    std::vector<int> forwards(rp.chunks.size(), 0);
    for (const auto& s : rp.steps)
      if (s.kind == holmes::schedule::PipeOpKind::kForward) ++forwards.at(s.chunk);
    for (int f : forwards) CHECK(f == rp.micro_batches);
    if (diloco) {
      CHECK(rp.outer.inner_steps == plan.replicas.inner_steps);
      CHECK(rp.outer.fragments == plan.replicas.fragments);
      CHECK(rp.outer.lr == plan.replicas.lr);
      CHECK(rp.outer.momentum == plan.replicas.momentum);
      CHECK(rp.outer.dtype == plan.replicas.dtype);
      CHECK(rp.outer.overlap == plan.replicas.overlap);
    }
    seen_data.insert({rp.place[Axis::kTp], rp.place[Axis::kPp], rp.place.data_rank()});
    if (rp.place.first(Axis::kTp) && rp.place.first(Axis::kDp) && rp.place.first(Axis::kReplica)) {
      if (by_virtual.size() < rp.chunks.size() * plan.pp) by_virtual.resize(rp.chunks.size() * plan.pp);
      for (int c = 0; c < static_cast<int>(rp.chunks.size()); ++c) by_virtual.at(rp.virtual_stage(c)) = rp.chunks[c];
    }
  }
  // Every (tp, pp) position has one rank per data rank of the job.
  CHECK(static_cast<int>(seen_data.size()) == plan.world);
  for (const RankPlan& rp : all) CHECK(rp.place.data_rank() < rp.place.data_size());
  // The virtual stages tile the layers in order, none empty.
  int next = 0;
  for (const LayerRange& r : by_virtual) {
    CHECK(r.first_layer == next);
    CHECK(r.num_layers > 0);
    next = r.first_layer + r.num_layers;
  }
  CHECK(next == layers);
}

}  // namespace

TEST_CASE("rank_plan: tp 2 x pp 2 x dp 2, each schedule, as the plan lays the ranks out", "[plan][rank_plan]") {
  for (spec::Schedule s : {spec::Schedule::k1f1b, spec::Schedule::kZbH1, spec::Schedule::kInterleaved}) {
    INFO("parallel.schedule " << spec::to_string(s));
    spec::JobSpec job = small_spec();
    job.parallel.schedule = s;
    if (s == spec::Schedule::kInterleaved) job.parallel.virtual_stages = 2;
    const Plan plan = holmes::test::test_plan(job, 2, 2, 2);
    REQUIRE(plan.world == 8);
    check_rank_plans(plan, job.model.layers);
    const RankPlan last = holmes::plan::rank_plan(plan, 7);
    CHECK(last.chunks.size() == (s == spec::Schedule::kInterleaved ? 2u : 1u));
  }
}

TEST_CASE("rank_plan: data.document_mask reaches every rank as the plan priced it", "[plan][rank_plan]") {
  for (bool mask : {false, true}) {
    spec::JobSpec job = small_spec();
    job.data.document_mask = mask;
    const Plan plan = holmes::test::test_plan(job, 1, 2, 2);
    REQUIRE(plan.activation.document_mask == mask);
    check_rank_plans(plan, job.model.layers);
    CHECK(holmes::plan::rank_plan(plan, 3).document_mask == mask);
  }
}

TEST_CASE("rank_plan: an uneven partition list is the stages' chunks", "[plan][rank_plan]") {
  const Plan plan = holmes::test::test_plan(small_spec(), 1, 3, 1, {2, 5, 1});
  check_rank_plans(plan, 8);
  CHECK(holmes::plan::rank_plan(plan, 1).chunks == std::vector<LayerRange>{{2, 5}});
  CHECK(holmes::plan::rank_plan(plan, 2).chunks == std::vector<LayerRange>{{7, 1}});
}

TEST_CASE("rank_plan: diloco replicas train apart, sync replicas are data-parallel ranks", "[plan][rank_plan]") {
  for (spec::OuterMode mode : {spec::OuterMode::kDiloco, spec::OuterMode::kSync}) {
    INFO("parallel.outer " << spec::to_string(mode));
    spec::JobSpec job = small_spec();
    job.parallel.replicas = 2;
    job.parallel.outer = mode;
    job.parallel.inner_steps = 5;
    job.parallel.fragments = 2;
    job.parallel.outer_lr = 0.5;
    job.parallel.outer_momentum = 0.8;
    const Plan plan = holmes::test::test_plan(job, 1, 2, 2);
    REQUIRE(plan.world == 8);
    check_rank_plans(plan, job.model.layers);
    const RankPlan rp = holmes::plan::rank_plan(plan, 7);
    CHECK(rp.place.data_size() == 4);
    CHECK(rp.micro_batches == 4);  // 16 sequences over 4 data ranks in micro-batches of 1
    if (mode == spec::OuterMode::kDiloco) {
      CHECK(rp.outer.inner_steps == 5);
      CHECK(rp.outer.lr == 0.5);
    }
  }
}

TEST_CASE("rank_plan: a rank outside the plan is refused", "[plan][rank_plan]") {
  const Plan plan = holmes::test::test_plan(small_spec(), 1, 2, 1);
  CHECK_THROWS_AS(holmes::plan::rank_plan(plan, 2), std::invalid_argument);
  CHECK_THROWS_AS(holmes::plan::rank_plan(plan, -1), std::invalid_argument);
  CHECK_THROWS_AS(holmes::plan::pipe_schedule(spec::Schedule::kAuto), std::invalid_argument);
}
