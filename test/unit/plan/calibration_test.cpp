// A topology's calibration in the cost model: measured device rate, link efficiency and
// latency, host update time; the spec's explicit overrides still win.
#include <catch2/catch.hpp>

#include "engine/plan/plan.hpp"
#include "engine/topo/calibration.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::topo::NicKind;

namespace {

// 2 IB nodes + 2 RoCE nodes of one GPU, pipeline 2 x data 2.
holmes::topo::ClusterTopology two_islands() {
  return hp::testing::make_cluster({{NicKind::kIb, 2, 1, 200}, {NicKind::kRoce, 2, 1, 200}});
}

holmes::spec::JobSpec job() { return hp::testing::make_spec(8, 512, 8, 1, 2, 2, 1, 8, 256); }

const hp::Group& group(const hp::Plan& p, hp::GroupKind kind) {
  for (const auto& g : p.groups)
    if (g.kind == kind) return g;
  FAIL("no group of that kind");
  return p.groups.front();
}

}  // namespace

TEST_CASE("a calibration's device rate, link efficiency and latency feed the estimate", "[calibration]") {
  auto t = two_islands();
  hp::Plan nominal = hp::make_plan(job(), t);
  CHECK(nominal.calibration.empty());
  CHECK(group(nominal, hp::kDpGroup).gbps_per_rank == Approx(200));
  CHECK(group(nominal, hp::kDpGroup).latency_s == Approx(5e-6));
  CHECK(nominal.estimate.update_s == 0);

  t.calibration.device_tflops = nominal.stages[0].tflops / 2;
  t.calibration.update_ns_per_param = 10;
  t.calibration.links["ib"] = {0.5, 40, 0, 0, 1};
  hp::Plan cal = hp::make_plan(job(), t);
  CHECK(cal.stages[0].tflops == Approx(nominal.stages[0].tflops / 2));
  CHECK(cal.estimate.step_time_s > nominal.estimate.step_time_s);
  const hp::Group& dp_ib = group(cal, hp::kDpGroup);  // stage 0's group, on the IB island
  REQUIRE(dp_ib.link == hp::LinkKind::kIb);
  CHECK(dp_ib.gbps_per_rank == Approx(100));
  CHECK(dp_ib.latency_s == Approx(40e-6));
  CHECK(cal.estimate.update_s > 0);
  CHECK(cal.estimate.step_time_s == Approx(cal.estimate.compute_s + cal.estimate.tp_comm_s + cal.estimate.pp_comm_s +
                                           cal.estimate.bubble_s + cal.estimate.dp_comm_s + cal.estimate.update_s + cal.estimate.log_s + cal.estimate.sums_s + cal.estimate.quota_s));
  CHECK(hp::format_plan_text(cal).find("Calibration") != std::string::npos);
  CHECK(hp::format_plan_json(cal).find("\"calibration\": {\"source\"") != std::string::npos);
  CHECK(hp::format_plan_json(nominal).find("\"calibration\": null") != std::string::npos);

  // rank_link gives the same calibrated figures, hop by hop.
  const hp::LinkCost l = hp::rank_link(job(), t, cal, dp_ib.ranks[0], dp_ib.ranks[1]);
  CHECK(l.kind == hp::LinkKind::kIb);
  CHECK(l.gbps_per_rank == Approx(100));
}

TEST_CASE("the spec's explicit figures win over a calibration", "[calibration]") {
  auto t = two_islands();
  t.calibration.device_tflops = 1;
  t.calibration.links["ib"] = {0.5, 40, 0, 0, 1};
  auto spec = job();
  spec.cluster.device_tflops = 7;
  spec.cluster.ib.latency_us = 9;
  hp::Plan p = hp::make_plan(spec, t);
  CHECK(p.stages[0].tflops == Approx(7));
  CHECK(group(p, hp::kDpGroup).latency_s == Approx(9e-6));
  CHECK(group(p, hp::kDpGroup).gbps_per_rank == Approx(100));  // efficiency still scales the rate
}

TEST_CASE("the step's job-wide sum: its ring hops at the links' latency, or at the hop the steps measured", "[calibration]") {
  // pipeline 2 x data 2: the sum crosses the data-parallel group (2 hops) and the pipeline
  // group (2 hops), one after the other, before every rank's update. CPU nodes: the hop the
  // steps measured is host emulation's (wake-ups of busy hosts), for them alone.
  auto t = two_islands();
  for (auto& n : t.nodes) n.devices.kind = "cpu";
  const hp::Plan nominal = hp::make_plan(job(), t);
  double dp = 0, pp = 0;  // each ring's slowest hop: the groups' largest latency
  for (const auto& g : nominal.groups) {
    if (g.kind == hp::kDpGroup) dp = std::max(dp, g.latency_s);
    if (g.kind == hp::kPpGroup) pp = std::max(pp, g.latency_s);
  }
  REQUIRE(dp > 0);
  REQUIRE(pp > 0);
  CHECK(nominal.estimate.sums_s == Approx(2 * dp + 2 * pp));
  // Measured in the steps at 1 ms a hop (wake-ups on busy hosts): every hop costs that.
  t.calibration.job_sum_hop_us = 1000;
  const hp::Plan cal = hp::make_plan(job(), t);
  CHECK(cal.estimate.sums_s == Approx(4 * 1e-3));
  // The pipeline's messages wait as long on the loop of its two stages (pipeline_loop_s); the
  // rest of the step is the same.
  CHECK(cal.estimate.pp_loop_s > nominal.estimate.pp_loop_s + 1e-3);
  CHECK(cal.estimate.step_time_s - cal.estimate.sums_s - cal.estimate.pp_loop_s ==
        Approx(nominal.estimate.step_time_s - nominal.estimate.sums_s - nominal.estimate.pp_loop_s));
  CHECK(hp::format_plan_text(cal).find("+ job sums 0.004") != std::string::npos);
  CHECK(hp::format_plan_json(cal).find("\"sums_s\": 0.004") != std::string::npos);
  // Written and read back with the calibration.
  const auto back = holmes::topo::parse_calibration_yaml(holmes::topo::format_calibration_yaml(t.calibration), "cal.yaml");
  CHECK(back.job_sum_hop_us == 1000);
  // On GPUs the same figure prices nothing: a GPU plan's latencies are its links'.
  auto gpu = two_islands();
  const hp::Plan gpu_nominal = hp::make_plan(job(), gpu);
  gpu.calibration.job_sum_hop_us = 1000;
  gpu.calibration.device.kind = "cuda";
  const hp::Plan gpu_cal = hp::make_plan(job(), gpu);
  CHECK(gpu_cal.estimate.sums_s == gpu_nominal.estimate.sums_s);
  CHECK(gpu_cal.estimate.pp_loop_s == gpu_nominal.estimate.pp_loop_s);
  CHECK(gpu_cal.estimate.step_time_s == gpu_nominal.estimate.step_time_s);
}

TEST_CASE("the host work beside the update costs every rank the same, whatever parameters it holds", "[calibration]") {
  auto t = two_islands();
  t.calibration.update_ns_per_param = 1;
  const hp::Plan update_only = hp::make_plan(job(), t);
  // The update of the rank that holds the most parameters (the embedding's stage): its part.
  REQUIRE(update_only.estimate.update_s > 0);
  t.calibration.host_us_per_step = 7000;
  const hp::Plan both = hp::make_plan(job(), t);
  // 7 ms on every stage's update, added once: not scaled by the parameters a rank holds.
  CHECK(both.estimate.update_s == Approx(update_only.estimate.update_s + 7e-3));
  CHECK(both.estimate.step_time_s == Approx(update_only.estimate.step_time_s + 7e-3));
  CHECK(hp::format_plan_text(both).find("other host work 7 ms a rank per step") != std::string::npos);
  CHECK(hp::format_plan_json(both).find("\"host_us_per_step\": 7000") != std::string::npos);
  // Written and read back with the calibration.
  const auto back = holmes::topo::parse_calibration_yaml(holmes::topo::format_calibration_yaml(t.calibration), "cal.yaml");
  CHECK(back.host_us_per_step == 7000);
}

TEST_CASE("a calibration with a CPU job's TCP-like figures cannot reach a GPU plan", "[calibration][device_kind]") {
  // A CPU job's intra-node sums (Gloo between processes sharing cores) measure about 2% of
  // NVLink's declared rate; as a GPU plan's figures they priced an 8B Llama's step 14 times
  // too slow. The planner refuses the file before any pricing.
  auto t = two_islands();
  const hp::Plan nominal = hp::make_plan(job(), t);
  t.calibration = holmes::topo::parse_calibration_yaml(
      "format: holmes-calibration/1\ncompute: {device_tflops: 0.05, cpu_tflops: 0.06, job_sum_hop_us: 900}\n"
      "links:\n  intra-node: {efficiency: 0.02, latency_us: 300}\n  ib: {efficiency: 0.1, latency_us: 200}\n",
      "lab.yaml");
  t.calibration.file = "lab.yaml";
  CHECK_THROWS_WITH(hp::make_plan(job(), t), Catch::Contains("'lab.yaml' was measured on cpu devices") &&
                                                 Catch::Contains("this plan runs on cuda devices"));
  // Written by a GPU job instead: it prices the plan.
  t.calibration.device = {"cuda", "test-gpu", "", "", "", "", "", ""};
  const hp::Plan gpu = hp::make_plan(job(), t);
  CHECK(gpu.estimate.step_time_s > nominal.estimate.step_time_s);
  // The same figures on CPU nodes are a CPU plan's.
  auto cpu = t;
  for (auto& n : cpu.nodes) n.devices.kind = "cpu";
  cpu.calibration.device.kind = "cpu";
  CHECK_NOTHROW(hp::make_plan(job(), cpu));
}

TEST_CASE("a device rate measured on one GPU model is not given to another", "[calibration][device_kind]") {
  // An H100 island beside an A100 one, a calibration measured on H100s alone: its rate says
  // nothing of the A100s, so no node takes it (the ratio rule would give the slowest declared
  // kind, the A100, the H100's measured rate) and the plan says why.
  auto t = two_islands();
  for (int n = 0; n < 2; ++n) t.nodes[n].devices.name = "H100-SXM", t.nodes[n].devices.peak_tflops = 989;
  for (int n = 2; n < 4; ++n) t.nodes[n].devices.name = "A100-SXM4-40GB", t.nodes[n].devices.peak_tflops = 312;
  const hp::Plan declared = hp::make_plan(job(), t);
  t.calibration.device = {"cuda", "H100-SXM", "", "", "", "", "", ""};
  t.calibration.device_tflops = 300;
  const hp::Plan h100_only = hp::make_plan(job(), t);
  for (size_t s = 0; s < declared.stages.size(); ++s) CHECK(h100_only.stages[s].tflops == declared.stages[s].tflops);
  bool said = false;
  for (const auto& w : h100_only.warnings) said = said || (w.find("H100-SXM") != std::string::npos &&
                                                          w.find("A100-SXM4-40GB") != std::string::npos);
  CHECK(said);
  // Measured on a job over both models: applied (the slowest kind gets it, the other its ratio).
  t.calibration.device.name = "H100-SXM, A100-SXM4-40GB";
  const hp::Plan both = hp::make_plan(job(), t);
  double slowest = 1e30;
  for (const auto& st : both.stages) slowest = std::min(slowest, st.tflops);
  CHECK(slowest == Approx(300));
}
