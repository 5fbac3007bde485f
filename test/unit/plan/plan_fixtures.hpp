// Small stages and CPU clusters the cost model's tests share (fidelity_test.cpp,
// host_emulation_test.cpp).
#pragma once

#include "engine/plan/cost_model.hpp"
#include "engine/plan/plan.hpp"
#include "engine/topo/topology.hpp"
#include "model/gpt2/gpt2.hpp"
#include "test/support/cluster_gen.hpp"

namespace holmes::plan::testing {

inline holmes::plan::Workload workload(bool bf16) {
  holmes::plan::Workload w;
  w.shape = holmes::model::gpt2::config(8, 256, 8, 1000, 128);
  w.seq_len = 128;
  w.micro_batch = 2;
  w.micro_batches = 4;
  w.act_dtype = bf16 ? holmes::DType::kBf16 : holmes::DType::kF32;
  return w;
}

// A stage of a pipeline of `pp` whose data-parallel group of 2 runs over a 1 Gb/s Ethernet
// link, both members sending over it.
inline holmes::plan::StageCost dp_stage(int stage, int pp, double tflops) {
  holmes::plan::StageCost s;
  s.stage = stage;
  s.first = stage == 0;
  s.last = stage == pp - 1;
  s.dp = 2;
  s.tflops = tflops;
  s.dp_link.kind = holmes::plan::LinkKind::kEthernet;
  s.dp_link.gbps_per_rank = 1;
  s.dp_link.latency_s = 30e-6;
  s.sends.dp[static_cast<int>(holmes::plan::LinkKind::kEthernet)] = 1;
  return s;
}

// Two single-worker CPU nodes on Ethernet only (0.025 TFLOP/s sustained), a pipeline
// of two stages of 2 layers, each node under a CPU quota of `quota0` / `quota1` cores (0: none).
inline holmes::topo::ClusterTopology cpu_pair(double quota0, double quota1) {
  auto t = make_cluster({{holmes::topo::NicKind::kEthernet, 1, 1, 0, 1, 0.05}, {holmes::topo::NicKind::kEthernet, 1, 1, 0, 1, 0.05}});
  const double quota[2] = {quota0, quota1};
  for (int n = 0; n < 2; ++n) {
    t.nodes[n].devices.kind = "cpu";
    t.nodes[n].devices.cores = 1;
    t.nodes[n].devices.cpu_quota_cores = quota[n];
  }
  return t;
}

// cpu_pair with both nodes under a 0.5-core quota and a calibration that knows the passes' wall
// rate (0.05 TFLOP/s) and the rate per CPU second (0.06).
inline holmes::topo::ClusterTopology held_pair() {
  auto t = cpu_pair(0.5, 0.5);
  t.calibration.device_tflops = 0.05;
  t.calibration.cpu_tflops = 0.06;
  return t;
}

// The pair's step (about 0.1 s) holds its CPU within one 100 ms period's quota, where no period's
// quota is ever spent (quota_throttle_s): tests of the throttled wait give the nodes a 20 ms period.
constexpr double kShortPeriodS = 0.02;
inline void short_periods(holmes::topo::ClusterTopology& t) {
  for (auto& n : t.nodes) n.devices.cpu_quota_period_ms = kShortPeriodS * 1e3;
}

inline holmes::spec::JobSpec pair_spec() {
  auto s = make_spec(4, 128, 4, 1, 2, 1, 2, 16, 64);
  s.model.vocab_size = 257;
  s.parallel.partition.kind = holmes::spec::PartitionKind::kList;
  s.parallel.partition.layers = {2, 2};
  return s;
}


}  // namespace holmes::plan::testing
