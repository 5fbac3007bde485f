#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "common/errors.hpp"
#include "engine/plan/cost_model.hpp"
#include "engine/plan/links.hpp"
#include "engine/plan/rank_plan.hpp"
#include "engine/plan/replicas.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::spec::OuterDtype;
using holmes::spec::OuterMode;
using holmes::topo::NicKind;

namespace {

// Four RoCE pods of 2 nodes x 8 GPUs joined by thin Ethernet (the pods scenario).
holmes::topo::ClusterTopology pods(double ethernet_gbps = 25) {
  hp::testing::IslandSpec pod{NicKind::kRoce, 2, 8, 400, ethernet_gbps};
  return hp::testing::make_cluster({pod, pod, pod, pod});
}

holmes::spec::JobSpec pod_spec(OuterMode outer, int replicas = 4) {
  auto s = hp::testing::make_spec(16, 2048, 16, 8, 2, 1, 1, 64, 2048);
  s.parallel.replicas = replicas;
  s.parallel.outer = outer;
  return s;
}

// The lab's pods (scripts/lab/scenarios/pods.yaml): four pods of two single-worker CPU nodes,
// every node under a 0.25-core quota, a calibration that measured the workers' CPU time.
holmes::topo::ClusterTopology cpu_pods(double host_comm_ns_per_byte) {
  hp::testing::IslandSpec pod{NicKind::kRoce, 2, 1, 2, 0.05};
  auto t = hp::testing::make_cluster({pod, pod, pod, pod});
  for (auto& n : t.nodes) {
    n.devices.kind = "cpu";
    n.devices.cores = 1;
    n.devices.cpu_quota_cores = 0.25;
    n.devices.peak_tflops = 0.05;
  }
  t.calibration.device_tflops = 0.03;  // the passes' wall rate: faster than the quota lets them run
  t.calibration.cpu_tflops = 0.052;
  t.calibration.cpu_tensor = 1;
  t.calibration.host_comm_ns_per_byte = host_comm_ns_per_byte;
  return t;
}

holmes::spec::JobSpec cpu_pod_spec(int overlap) {
  auto s = hp::testing::make_spec(4, 128, 4, 1, 1, 2, 2, 32, 64);
  s.model.vocab_size = 257;
  s.parallel.replicas = 4;
  s.parallel.outer = OuterMode::kDiloco;
  s.parallel.inner_steps = 20;
  s.parallel.outer_overlap = overlap;
  return s;
}

}  // namespace

TEST_CASE("replicas: split island by island into whole nodes", "[replicas]") {
  const auto t = pods();
  using Part = hp::ReplicaPart;
  const auto r = hp::split_replicas(t, 4);
  REQUIRE(r.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(r[i] == std::vector<Part>{{2 * i, 0, 8}, {2 * i + 1, 0, 8}});
  CHECK(hp::split_replicas(t, 2)[1].size() == 4);
  // 64 devices in 3 replicas: no.
  CHECK_THROWS_WITH(hp::split_replicas(t, 3), Catch::Contains("parallel.replicas = 3 does not divide"));
  // A replica of 64 / 32 = 2 devices shares its node with three others.
  const auto small = hp::split_replicas(t, 32);
  REQUIRE(small.size() == 32);
  CHECK(small[5] == std::vector<Part>{{1, 2, 2}});
}

TEST_CASE("replicas: diloco lays one plan per pod and an outer group per coordinate", "[replicas]") {
  const auto t = pods();
  const hp::Plan p = hp::make_plan(pod_spec(OuterMode::kDiloco), t);
  CHECK(p.world == 64);
  CHECK(p.tp == 8);
  CHECK(p.pp == 2);
  CHECK(p.dp == 1);
  CHECK(p.replicas.count == 4);
  std::map<hp::GroupKind, int> count;
  std::set<int> seen;
  for (const auto& r : p.ranks) {
    CHECK(seen.insert(r.rank).second);
    CHECK(r.at[holmes::schedule::Axis::kReplica] == r.node / 2);  // each replica is one pod
  }
  for (const auto& g : p.groups) {
    ++count[g.kind];
    if (g.kind == hp::kTpGroup || g.kind == hp::kPpGroup || g.kind == hp::kDpGroup) {
      // Inside one replica, and so inside one pod: nothing crosses Ethernet.
      for (int r : g.ranks) CHECK(p.ranks[r].at[holmes::schedule::Axis::kReplica] == p.ranks[g.ranks[0]].at[holmes::schedule::Axis::kReplica]);
      CHECK_FALSE(g.crosses_islands);
    }
    if (g.kind == hp::kOuterGroup) {
      REQUIRE(g.ranks.size() == 4);
      for (int i = 0; i < 4; ++i) {
        CHECK(p.ranks[g.ranks[i]].at[holmes::schedule::Axis::kReplica] == i);  // group rank = replica
        CHECK(p.ranks[g.ranks[i]].at[holmes::schedule::Axis::kTp] == p.ranks[g.ranks[0]].at[holmes::schedule::Axis::kTp]);
        CHECK(p.ranks[g.ranks[i]].at[holmes::schedule::Axis::kPp] == p.ranks[g.ranks[0]].at[holmes::schedule::Axis::kPp]);
      }
      CHECK(g.crosses_islands);
      CHECK(g.transport == hp::Transport::kGlooTcp);
      CHECK(g.link == hp::LinkKind::kEthernet);
    }
  }
  CHECK(count[hp::kTpGroup] == 8);     // 2 stages x 4 replicas
  CHECK(count[hp::kOuterGroup] == 16); // one per rank of a replica
  CHECK(count[hp::kWorldGroup] == 1);
  // The plan states what it prices: outer bytes = N members x 2 (N - 1) part payloads (a part:
  // 1/N of the member's slice) per group, summed over the groups, per H steps.
  double stage_params = 0;
  for (const auto& m : p.memory) stage_params += m.grads / 4 / 4;  // every replica holds the model once
  CHECK(p.replicas.sync_bytes ==
        Approx(4 * 2 * 3 * holmes::schedule::outer_payload_bytes(OuterDtype::kFp32, stage_params / 4)).epsilon(1e-4));
  CHECK(p.replicas.per_step_s > p.replicas.sync_s / 20);
  const std::string text = hp::format_plan_text(p);
  CHECK_THAT(text, Catch::Contains("Replicas: 4 x (tensor 8 x pipeline 2 x data 1), outer diloco every 20 steps"));
  CHECK_THAT(text, Catch::Contains("replica 3: nodes 6, 7"));
  CHECK_THAT(hp::format_plan_json(p), Catch::Contains("\"replicas\": {\"count\": 4, \"outer\": \"diloco\""));
}

TEST_CASE("replicas: three ways across priced side by side, diloco proposed and never chosen", "[replicas]") {
  const auto t = pods(10);
  const hp::Plan sync = hp::make_plan(pod_spec(OuterMode::kSync), t);
  CHECK(sync.dp == 4);  // one data-parallel all-reduce spans the replicas
  CHECK(sync.replicas.outer == OuterMode::kSync);
  for (const auto& g : sync.groups) CHECK(g.kind != hp::kOuterGroup);
  REQUIRE(sync.replicas.across.size() == 3);
  const auto& pipe = sync.replicas.across[0];
  const auto& dp = sync.replicas.across[1];
  const auto& di = sync.replicas.across[2];
  CHECK(pipe.name == "pipeline");
  CHECK(pipe.feasible);
  CHECK(pipe.what == "tensor 8 x pipeline 8 x data 1");
  CHECK(dp.step_time_s == Approx(sync.estimate.step_time_s));
  // Per step and member DiLoCo all-gathers (N - 1) / H fp32 models where sync reduce-scatters
  // gradients and all-gathers bf16 weights, (N - 1) / N (4 + 2) bytes a weight: with N = 4,
  // H = 20 at least 1.5 H / N = 7.5x less.
  CHECK(di.ethernet_bytes_per_step * 7 < dp.ethernet_bytes_per_step);
  CHECK(di.step_time_s < dp.step_time_s);
  CHECK_THAT(sync.replicas.proposal, Catch::Contains("set parallel.outer: diloco to opt in"));
  CHECK_THAT(hp::format_plan_text(sync), Catch::Contains("proposal: diloco across the 4 replicas"));
  // Opting in gives the plan the diloco row priced.
  const hp::Plan d = hp::make_plan(pod_spec(OuterMode::kDiloco), t);
  CHECK(d.estimate.step_time_s == Approx(di.step_time_s));
  CHECK(d.replicas.proposal.empty());
}

TEST_CASE("replicas: int8 and bf16 payloads shrink the outer bytes", "[replicas]") {
  CHECK(holmes::schedule::outer_payload_bytes(OuterDtype::kFp32, 1000) == 4000);
  CHECK(holmes::schedule::outer_payload_bytes(OuterDtype::kBf16, 1000) == 2000);
  CHECK(holmes::schedule::outer_payload_bytes(OuterDtype::kInt8, 1000) == 1000 + 4 * 4);
  // The owner-slice exchange: 2 (N - 1) parts of ceil(n / N), not (N - 1) whole payloads.
  CHECK(holmes::schedule::outer_exchange_bytes(OuterDtype::kFp32, 1000, 4) == 2 * 3 * 4 * 250);
  CHECK(holmes::schedule::outer_exchange_bytes(OuterDtype::kInt8, 1001, 4) == 2 * 3 * (251 + 4));
  CHECK(holmes::schedule::outer_exchange_bytes(OuterDtype::kFp32, 1000, 1) == 0);
  auto s = pod_spec(OuterMode::kDiloco);
  const double fp32 = hp::make_plan(s, pods()).replicas.sync_bytes;
  s.parallel.outer_dtype = OuterDtype::kInt8;
  const double int8 = hp::make_plan(s, pods()).replicas.sync_bytes;
  CHECK(int8 / fp32 == Approx((1 + 4.0 / 256) / 4).epsilon(1e-3));
}

TEST_CASE("replicas: degrees that do not fit a replica name parallel.replicas", "[replicas]") {
  auto s = pod_spec(OuterMode::kDiloco);
  s.parallel.tensor = 8;
  s.parallel.pipeline = 4;  // 32 devices per replica, but a replica has 16
  CHECK_THROWS_WITH(hp::make_plan(s, pods()), Catch::Contains("parallel.replicas"));
  s.parallel.pipeline = 2;
  s.parallel.replicas = 3;
  CHECK_THROWS_WITH(hp::make_plan(s, pods()), Catch::Contains("parallel.replicas"));
}

TEST_CASE("replicas: an overlapped outer exchange is priced as what tau inner steps leave of it", "[replicas]") {
  auto s = pod_spec(OuterMode::kDiloco);
  const hp::Plan plain = hp::make_plan(s, pods());
  CHECK(plain.replicas.overlap == 0);
  CHECK(plain.replicas.exposed_s == Approx(plain.replicas.sync_s));  // data 1: no all-gather of slices
  const double sum_s = plain.replicas.per_step_s - plain.replicas.sync_s / 20;  // the loss sums, per step
  // A replica's step alone (without the log steps' job-wide maximum, replicas.log_s).
  const double step = plain.estimate.step_time_s - plain.replicas.per_step_s - plain.replicas.log_s;
  for (int tau : {1, 2, 19}) {
    s.parallel.outer_overlap = tau;
    const hp::Plan p = hp::make_plan(s, pods());
    CHECK(p.replicas.sync_s == Approx(plain.replicas.sync_s));
    CHECK(p.replicas.sync_bytes == Approx(plain.replicas.sync_bytes));  // the same bytes, hidden or not
    CHECK(p.replicas.exposed_s == Approx(std::max(0.0, plain.replicas.sync_s - tau * step)).margin(1e-12));
    CHECK(p.replicas.per_step_s == Approx(p.replicas.exposed_s / 20 + sum_s));
    CHECK(p.estimate.step_time_s == Approx(step + p.replicas.per_step_s + p.replicas.log_s));
  }
  CHECK_THAT(hp::format_plan_text(hp::make_plan(s, pods())), Catch::Contains("overlapped with 19 steps"));
}

TEST_CASE("replicas: a small all-reduce's bytes follow Gloo's ring segments", "[replicas]") {
  CHECK(hp::small_all_reduce_bytes(4, 1) == 0);
  // 2 floats over 2: 4 segments of 1 float, 2 non-empty; one hop each way per half.
  // A message: 3 Gloo operations (send-ready, recv-ready, data), each a 48 B preamble in a
  // segment with 66 B of headers, plus one 66 B ACK.
  CHECK(hp::small_all_reduce_bytes(2, 2) == 2 * 1 * (8 + 2 * 408.0));
  // 100 floats over 4: 8 segments of 13 floats, all 8 non-empty (the last holds 9).
  CHECK(hp::small_all_reduce_bytes(100, 4) == 2 * 3 * (400 + 8 * 408.0));
}

TEST_CASE("replicas: the small per-step messages over Ethernet are priced, headers included", "[replicas]") {
  // Four pods of 16 ranks: 16 outer groups of 4 members, one per pod.
  auto s = pod_spec(OuterMode::kDiloco);
  s.log.interval = 1;
  const hp::Plan p = hp::make_plan(s, pods());
  // Gloo's ring: 2 x members segments, each non-empty one forwarded members - 1 times per half,
  // 408 B of notices, preambles, headers and ACK per message.
  // [loss, stop, 4 replicas' slots] as 12 floats over 4: 8 segments of 2 floats, 6 non-empty;
  // once before each outer exchange (inner_steps 20, one fragment), not every step.
  const double outer_sum = 16 * (2 * 3) * (4 * 12 + 6 * 408.0) / 20;
  // 3 + 2 x 64 floats (each rank's communication share and compute) over 64 ranks: 128
  // segments of 2 floats, 66 non-empty. The world group crosses islands, so it binds
  // Ethernet: its pairs inside a pod use Ethernet too.
  const double world_max = (2 * 63) * (4 * 131 + 66 * 408.0);
  // diloco reduces it once per outer period (inner_steps 20) at most: a twentieth of it at
  // log.interval 1 and 10, a fortieth at 40 (engine/train/run.cpp).
  CHECK(p.replicas.small_bytes == Approx(outer_sum + world_max / 20));
  const double ethernet = p.estimate.bytes_per_step[static_cast<int>(hp::LinkKind::kEthernet)];
  CHECK(ethernet == Approx(p.replicas.sync_bytes / 20 + outer_sum + world_max / 20));
  // In bytes and in time (a ring of 64 ranks: 2 x 63 latencies of the world group's worst link).
  s.log.interval = 10;
  const hp::Plan q = hp::make_plan(s, pods());
  CHECK(q.replicas.small_bytes == Approx(outer_sum + world_max / 20));
  s.log.interval = 40;
  const hp::Plan q40 = hp::make_plan(s, pods());
  CHECK(q40.replicas.small_bytes == Approx(outer_sum + world_max / 40));
  double world_latency = 0;
  for (const auto& g : q.groups)
    if (g.kind == hp::kWorldGroup) world_latency = g.latency_s;
  REQUIRE(world_latency > 0);
  CHECK(p.replicas.log_s == Approx(2 * 63 * world_latency / 20));
  CHECK(q.replicas.log_s == Approx(2 * 63 * world_latency / 20));
  CHECK(q40.replicas.log_s == Approx(2 * 63 * world_latency / 40));
  CHECK(q.estimate.step_time_s - q40.estimate.step_time_s == Approx(q.replicas.log_s - q40.replicas.log_s));
  // sync sends the job-wide maximum on every log line (its [loss, stop] rides the data-parallel
  // gradient sums): a tenth of its bytes at log.interval 10.
  s.log.interval = 10;
  s.parallel.outer = OuterMode::kSync;
  const hp::Plan y = hp::make_plan(s, pods());
  CHECK(y.replicas.small_bytes == Approx(world_max / 10));
  // ... in bytes only: sync's loop runs it in the background (engine/train/job_figures.hpp).
  CHECK(y.replicas.log_s == 0);
  CHECK(y.estimate.log_s == 0);
  // The sync/diloco factor the plan states includes them.
  const auto& across = y.replicas.across;
  CHECK(across[2].ethernet_bytes_per_step == Approx(q.replicas.sync_bytes / 20 + outer_sum + world_max / 20));
}

TEST_CASE("replicas: diloco's loss and stop sum across the replicas is priced once per fragment's exchange",
          "[replicas]") {
  // The sum runs on the training thread before each fragment's exchange starts
  // (engine/parallel/step_runner.hpp Agreement::kAtSyncs), not every step: its ring of
  // 2 (N - 1) latencies of the outer group is paid fragments times per inner_steps steps.
  // (The old pricing, a per-step sum beside the next step, charged 10 us a step however
  // long the period.)
  auto s = pod_spec(OuterMode::kDiloco);
  auto outer_latency = [](const hp::Plan& p) {
    for (const auto& g : p.groups)
      if (g.kind == hp::kOuterGroup) return g.latency_s;
    return 0.0;
  };
  const hp::Plan p = hp::make_plan(s, pods());
  const double ring = 2 * 3 * outer_latency(p);
  REQUIRE(ring > 0);
  CHECK(p.replicas.agree_s == Approx(ring / 20).epsilon(1e-9));
  CHECK(p.replicas.per_step_s == Approx(p.replicas.exposed_s / 20 + ring / 20).epsilon(1e-9));
  // A longer period pays it less often; fragments more often.
  s.parallel.inner_steps = 40;
  const hp::Plan p40 = hp::make_plan(s, pods());
  CHECK(p40.replicas.agree_s == Approx(ring / 40).epsilon(1e-9));
  s.parallel.fragments = 4;
  const hp::Plan f4 = hp::make_plan(s, pods());
  CHECK(f4.replicas.agree_s == Approx(4 * ring / 40).epsilon(1e-9));
  // A link whose latency makes the ring outlast a step: still paid whole, once per exchange
  // (it blocks the step before the exchange; nothing hides it).
  s = pod_spec(OuterMode::kDiloco);
  const double step = p.estimate.step_time_s - p.replicas.per_step_s - p.replicas.log_s;
  s.cluster.ethernet.latency_us = step / 3 * 1e6;  // ring = 2 steps
  const hp::Plan slow = hp::make_plan(s, pods());
  const double slow_ring = 2 * 3 * outer_latency(slow);
  CHECK(slow_ring == Approx(2 * step));
  CHECK(slow.replicas.agree_s == Approx(slow_ring / 20).epsilon(1e-9));
  CHECK(hp::agree_per_step_s(0.5, 20, 1) == Approx(0.025));
  CHECK(hp::agree_per_step_s(0.5, 20, 4) == Approx(0.1));
  CHECK(hp::agreement_floats(4) == 12);
}

TEST_CASE("replicas: the expected maximum of N standard normals", "[replicas]") {
  CHECK(hp::expected_max_normal(0) == 0);
  CHECK(hp::expected_max_normal(1) == 0);
  CHECK(hp::expected_max_normal(2) == Approx(1 / std::sqrt(M_PI)).epsilon(1e-9));  // closed form
  CHECK(hp::expected_max_normal(3) == Approx(1.5 / std::sqrt(M_PI)).epsilon(1e-9));
  CHECK(hp::expected_max_normal(4) == Approx(1.0293754).epsilon(1e-6));  // tables of normal order statistics
  CHECK(hp::expected_max_normal(8) == Approx(1.4236003).epsilon(1e-6));
  CHECK(hp::expected_max_normal(5) > hp::expected_max_normal(4));
}

TEST_CASE("replicas: the wait at each sum across the replicas for the slowest is priced from the calibration's drift",
          "[replicas]") {
  // The lab's pods (docs/diloco.md, "Twelfth pass"): the replicas meet only at the sum before
  // each exchange; between two sums each runs inner_steps / fragments steps alone and at the sum
  // all wait for the slowest. A step's time scattered by drift_ms per step (independent steps)
  // puts the slowest of N replicas expected_max_normal(N) drift sqrt(k) behind the mean one.
  auto t = pods();
  auto s = pod_spec(OuterMode::kDiloco);
  const hp::Plan plain = hp::make_plan(s, t);
  CHECK(plain.replicas.drift_s == 0);  // not measured: not priced
  t.calibration.outer = {"ethernet", 0.7, 500, 8, 40};  // 40 ms per sqrt(step)
  const hp::Plan p = hp::make_plan(s, t);
  const double wait = hp::expected_max_normal(4) * 0.040 * std::sqrt(20.0);  // at each sum, 20 steps apart
  CHECK(p.replicas.drift_s == Approx(wait / 20).epsilon(1e-9));
  CHECK(p.replicas.per_step_s == Approx(p.replicas.exposed_s / 20 + p.replicas.agree_s + wait / 20).epsilon(1e-9));
  t.calibration.outer.drift_ms = 0;
  const hp::Plan same_rate = hp::make_plan(s, t);  // the same exchange rate, no drift
  CHECK(p.estimate.step_time_s - same_rate.estimate.step_time_s == Approx(wait / 20).epsilon(1e-9));
  t.calibration.outer.drift_ms = 40;
  // Fragments meet more often over shorter spells: F sums of sqrt(H / F) each per H steps.
  s.parallel.inner_steps = 40;
  s.parallel.fragments = 4;
  CHECK(hp::make_plan(s, t).replicas.drift_s ==
        Approx(4 * hp::expected_max_normal(4) * 0.040 * std::sqrt(10.0) / 40).epsilon(1e-9));
  // Overlap does not change where the replicas meet.
  s = pod_spec(OuterMode::kDiloco);
  s.parallel.outer_overlap = 5;
  CHECK(hp::make_plan(s, t).replicas.drift_s == Approx(wait / 20).epsilon(1e-9));
  // Two replicas wait less for the slower than four for the slowest.
  CHECK(hp::drift_per_step_s(0.04, 2, 20, 1) < hp::drift_per_step_s(0.04, 4, 20, 1));
  CHECK(hp::drift_per_step_s(0.04, 1, 20, 1) == 0);
  // sync meets every step in its all-reduce (priced as such): no drift term.
  const hp::Plan sync = hp::make_plan(pod_spec(OuterMode::kSync), t);
  t.calibration.outer.drift_ms = 0;
  CHECK(sync.estimate.step_time_s == hp::make_plan(pod_spec(OuterMode::kSync), t).estimate.step_time_s);
  CHECK(sync.replicas.drift_s == 0);
}

TEST_CASE("replicas: the outer exchange is priced at the rate a calibration measured it at inside the steps",
          "[replicas]") {
  // The lab's pods (docs/diloco.md): the exchange's halves moved at about 0.7 of the rate the
  // idle probe of the same Ethernet saw. A calibration's `outer` figure prices it so.
  auto t = pods(1);
  const hp::Plan plain = hp::make_plan(pod_spec(OuterMode::kDiloco), t);
  double alpha = 0;
  for (const auto& g : plain.groups)
    if (g.kind == hp::kOuterGroup) alpha = g.latency_s;
  REQUIRE(alpha > 0);
  t.calibration.outer = {"ethernet", 0.5, 0, 1};  // half the declared rate (the link's efficiency: 1)
  const hp::Plan cal = hp::make_plan(pod_spec(OuterMode::kDiloco), t);
  // data 1: no all-gather of slices; 2 halves x 3 ring steps, each alpha + part / rate.
  const double bytes_s = plain.replicas.sync_s - 6 * alpha;
  CHECK(cal.replicas.sync_s == Approx(6 * alpha + 2 * bytes_s));
  CHECK(cal.estimate.step_time_s - plain.estimate.step_time_s == Approx(bytes_s / 20));
  CHECK(cal.replicas.sync_bytes == plain.replicas.sync_bytes);  // the same bytes, slower
  // Measured on another link class: not this exchange's.
  t.calibration.outer = {"ib", 0.5, 0, 1};
  CHECK(hp::make_plan(pod_spec(OuterMode::kDiloco), t).replicas.sync_s == Approx(plain.replicas.sync_s));
  // Over the link's probed efficiency, not on top of it.
  t.calibration.links["ethernet"].efficiency = 0.9;
  const hp::Plan probed = hp::make_plan(pod_spec(OuterMode::kDiloco), t);
  t.calibration.outer = {"ethernet", 0.5, 0, 1};
  CHECK(hp::make_plan(pod_spec(OuterMode::kDiloco), t).replicas.sync_s == Approx(cal.replicas.sync_s));
  CHECK(probed.replicas.sync_s == Approx(6 * alpha + bytes_s / 0.9));
}

TEST_CASE("replicas: under a CPU quota the host bytes' CPU joins the bound, the overlapped exchange's amortized",
          "[replicas][cost_model]") {
  // Each replica is data 2 inside its pod: every worker's communication thread reduce-scatters
  // and all-gathers its gradients and parameters each step, and with outer_overlap the outer
  // exchange runs beside the inner steps on that thread too. The quota caps those threads:
  // their bytes x the calibrated CPU per byte add to the worker's CPU seconds. A blocking
  // exchange is priced at its own measured rate (already under the quota): not added.
  for (int overlap : {0, 5}) {
    const hp::Plan base = hp::make_plan(cpu_pod_spec(overlap), cpu_pods(0));
    const hp::Plan with = hp::make_plan(cpu_pod_spec(overlap), cpu_pods(3.0));
    REQUIRE(base.estimate.quota_s > 0);  // the lab's pods are held by the quota
    REQUIRE(with.estimate.quota_cpu_s.size() == 1);
    const double params = base.memory.at(0).grads / 4;
    const double dp_bytes = 0.5 * params * 8;  // (d - 1) / d of the fp32 gradients and weights
    const double outer = overlap ? holmes::schedule::outer_exchange_bytes(OuterDtype::kFp32, std::ceil(params / 2), 4) / 20 : 0;
    const double more_cpu = (dp_bytes + outer) * 3e-9;
    CHECK(with.estimate.quota_cpu_s[0] - base.estimate.quota_cpu_s[0] == Approx(more_cpu));
    CHECK(with.estimate.quota_share[0] == 0.25);
    // The inner step is bound by the quota in both: it grows by the added CPU over the share
    // (the overlapped exchange's exposure follows the longer step).
    const double inner_base = base.estimate.step_time_s - base.replicas.per_step_s - base.replicas.log_s;
    const double inner_with = with.estimate.step_time_s - with.replicas.per_step_s - with.replicas.log_s;
    CHECK(inner_with - inner_base == Approx(more_cpu / 0.25));
    CHECK(with.replicas.sync_bytes == base.replicas.sync_bytes);
    // One stage: the pod's two data-parallel peers spend their quota in step, so no expected
    // wait for a throttled peer's next CFS period (quota_throttle_s) joins the bound.
    CHECK(hp::quota_throttle_s(with.estimate, inner_with) == 0);
    CHECK(hp::quota_throttle_s(base.estimate, inner_base) == 0);
    // The steps' own figure wins over the probe's where the calibration has both (the overlapped
    // exchange's CPU too).
    auto both = cpu_pods(3.0);
    both.calibration.host_comm_steps_ns_per_byte = 4.5;
    const hp::Plan steps = hp::make_plan(cpu_pod_spec(overlap), both);
    CHECK(steps.estimate.quota_cpu_s[0] - base.estimate.quota_cpu_s[0] == Approx(more_cpu * 1.5));
  }
}

TEST_CASE("replicas: elastic sync keeps data parallelism inside each replica and prices the shard all-reduce across",
          "[replicas]") {
  using holmes::schedule::Axis;
  // Four pods, each replica tensor 8 x data 2 over its pod's 16 GPUs.
  auto s = hp::testing::make_spec(16, 2048, 16, 8, 1, 2, 1, 64, 2048);
  s.parallel.replicas = 4;
  s.parallel.outer = OuterMode::kSync;
  s.parallel.elastic = true;
  s.log.interval = 10;
  const auto t = pods();
  const hp::Plan p = hp::make_plan(s, t);
  REQUIRE(p.replicas.hsdp());
  CHECK(p.world == 64);
  CHECK(p.dp == 2);  // one replica's data-parallel ranks: ZeRO-1 shards inside it
  std::map<hp::GroupKind, int> count;
  double latency = 0, world_latency = 0;
  for (const auto& g : p.groups) {
    ++count[g.kind];
    if (g.kind == hp::kDpGroup) {
      REQUIRE(g.ranks.size() == 2);
      CHECK(p.ranks[g.ranks[0]].at[Axis::kReplica] == p.ranks[g.ranks[1]].at[Axis::kReplica]);
      CHECK_FALSE(g.crosses_islands);
    }
    if (g.kind == hp::kOuterGroup) {
      REQUIRE(g.ranks.size() == 4);
      for (int i = 0; i < 4; ++i) {
        const auto& r = p.ranks[g.ranks[i]];
        CHECK(r.at[Axis::kReplica] == i);
        for (Axis a : {Axis::kTp, Axis::kPp, Axis::kDp}) CHECK(r.at[a] == p.ranks[g.ranks[0]].at[a]);
      }
      CHECK(g.link == hp::LinkKind::kEthernet);
      CHECK(g.transport == hp::Transport::kGlooTcp);
      latency = std::max(latency, g.latency_s);
    }
    if (g.kind == hp::kWorldGroup) world_latency = g.latency_s;
  }
  CHECK(count[hp::kDpGroup] == 4 * 8);      // 8 tp coordinates in each replica
  CHECK(count[hp::kOuterGroup] == 8 * 2);   // one per tp x dp coordinate
  // Each rank's plan: the replica axis apart, its data rank among all of them as without elastic.
  for (int rank : {0, 17, 63}) {
    const auto rp = hp::rank_plan(p, rank);
    CHECK(rp.place.degree(Axis::kReplica) == 4);
    CHECK(rp.place.degree(Axis::kDp) == 2);
    CHECK(rp.outer.mode == OuterMode::kSync);
    CHECK(rp.place.data_rank() == p.ranks[rank].at[Axis::kReplica] * 2 + p.ranks[rank].at[Axis::kDp]);
    CHECK(rp.global_batch == 64);
  }
  // Bytes: per outer group a ring all-reduce of the owned fp32 gradients (half a rank's shard),
  // each of the 4 members sending 2 x 3 / 4 of it, every step.
  const double shard = p.memory[0].grads / 4;
  const double slice = std::ceil(shard / 2);
  CHECK(p.replicas.sync_bytes == Approx(16 * 2 * 3 * 4 * slice));
  // Small messages: the [loss, stop] sum (4 floats) over each outer group every step, the log
  // line's maximum over the world group every 10 steps, and the store's round trips of each of
  // the 56 ranks off rank 0's node (counting in, the verdict, the announcements).
  const double world_max = (2 * 63) * (4 * 131 + 66 * 408.0);
  CHECK(p.replicas.small_bytes ==
        Approx(16 * hp::small_all_reduce_bytes(4, 4) + world_max / 10 + 56 * 3 * 2 * hp::kStoreMessageBytes));
  const double ethernet = p.estimate.bytes_per_step[static_cast<int>(hp::LinkKind::kEthernet)];
  CHECK(ethernet == Approx(p.replicas.sync_bytes + p.replicas.small_bytes));
  // Time: the all-reduce, nothing beside it, + the sum's ring latencies + the verdict, on top of
  // the replica's own step (diloco's plan prices the same replica).
  hp::Group outer0;
  for (const auto& g : p.groups)
    if (g.kind == hp::kOuterGroup) outer0 = g;
  const hp::LinkCost link{outer0.link, outer0.gbps_per_rank, outer0.latency_s, outer0.crosses_islands};
  CHECK(p.replicas.sync_s == Approx(hp::ring_all_reduce_s(link, 4, 4 * slice)));
  CHECK(p.replicas.agree_s == Approx(2 * 3 * latency));
  CHECK(p.replicas.verdict_s == Approx(3 * 2 * world_latency + hp::kVerdictPollS));
  CHECK(p.replicas.per_step_s == Approx(p.replicas.sync_s + p.replicas.agree_s + p.replicas.verdict_s));
  CHECK(p.replicas.log_s == Approx(2 * 63 * world_latency / 10));  // blocking in an elastic job
  auto d = s;
  d.parallel.outer = OuterMode::kDiloco;
  const hp::Plan dp = hp::make_plan(d, t);
  CHECK(p.estimate.step_time_s - p.replicas.per_step_s - p.replicas.log_s ==
        Approx(dp.estimate.step_time_s - dp.replicas.per_step_s - dp.replicas.log_s));
  // The sync row of the three ways is this plan.
  CHECK(p.replicas.across[1].step_time_s == Approx(p.estimate.step_time_s));
  CHECK(p.replicas.across[1].what == "tensor 8 x pipeline 1 x data 2 x 4 replicas");
  const std::string text = hp::format_plan_text(p);
  CHECK_THAT(text, Catch::Contains("Replicas: 4 x (tensor 8 x pipeline 1 x data 2), outer sync, elastic (HSDP"));
  CHECK_THAT(text, Catch::Contains("+ across the replicas"));
  CHECK_THAT(hp::format_plan_json(p), Catch::Contains("\"elastic\": true"));
  // Without elastic: one data-parallel group of dp x N over the cluster, no outer groups.
  s.parallel.elastic = false;
  const hp::Plan plain = hp::make_plan(s, t);
  CHECK(plain.dp == 8);
  for (const auto& g : plain.groups) CHECK(g.kind != hp::kOuterGroup);
  CHECK_THAT(hp::format_plan_json(plain), !Catch::Contains("\"elastic\""));
}
