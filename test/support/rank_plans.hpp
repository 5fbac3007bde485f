// Rank plans for unit tests, made the way a job makes them: plan::make_plan on a synthetic
// cluster (one node of CPU workers, with fixed figures so that no plan depends on the machine
// the test runs on), then plan::rank_plan for each rank. The executor has no plan-less path,
// so every test that builds a Trainer or a PipelineStage gets its RankPlan here.
#pragma once

#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/plan/rank_plan.hpp"
#include "engine/spec/job_spec.hpp"
#include "test/support/cluster_gen.hpp"

namespace holmes::test {

// One node of `world` CPU workers behind one Ethernet interface: what `--nproc-per-node world`
// plans on.
inline topo::ClusterTopology cpu_node(int world) {
  plan::testing::IslandSpec island;
  island.kind = topo::NicKind::kEthernet;
  island.devices = world;
  topo::ClusterTopology t = plan::testing::make_cluster({island});
  topo::Devices& d = t.nodes[0].devices;
  d.kind = "cpu";
  d.name = "test-cpu";
  d.memory_gb = 64.0 / world;
  d.peak_tflops = 0.1;
  d.cores = 1;
  return t;
}

// The plan of `spec` as tp x pp x dp workers of one node (the degrees written into the spec),
// times parallel.replicas.
// `layers` per stage, when given, is the partition (parallel.partition list); else the layers
// are cut evenly, the earlier stages taking the remainder (parallel.partition uniform). The
// schedule, recomputation and virtual stages are the spec's (auto: the planner's choice).
inline plan::Plan test_plan(spec::JobSpec spec, int tp, int pp, int dp, const std::vector<int>& layers = {}) {
  spec.parallel.tensor = tp;
  spec.parallel.pipeline = pp;
  spec.parallel.data = dp;
  if (!layers.empty()) {
    spec.parallel.partition.kind = spec::PartitionKind::kList;
    spec.parallel.partition.layers = layers;
  } else if (spec.parallel.partition.kind == spec::PartitionKind::kAuto) {
    spec.parallel.partition.kind = spec::PartitionKind::kUniform;
  }
  return plan::make_plan(spec, cpu_node(tp * pp * dp * spec.parallel.replicas));
}

// Rank `rank` of that plan.
inline schedule::RankPlan test_rank_plan(const spec::JobSpec& spec, int tp, int pp, int dp, int rank,
                                         const std::vector<int>& layers = {}) {
  return plan::rank_plan(test_plan(spec, tp, pp, dp, layers), rank);
}

// The plan of one process.
inline schedule::RankPlan single_rank_plan(const spec::JobSpec& spec) { return test_rank_plan(spec, 1, 1, 1, 0); }

}  // namespace holmes::test
