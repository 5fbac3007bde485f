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
  // group (2 hops), one after the other, before every rank's update.
  auto t = two_islands();
  const hp::Plan nominal = hp::make_plan(job(), t);
  double dp = 0, pp = 0;  // each ring's slowest hop: the groups' largest latency
  for (const auto& g : nominal.groups) {
    if (g.kind == hp::kDpGroup) dp = std::max(dp, g.latency_s);
    if (g.kind == hp::kPpGroup) pp = std::max(pp, g.latency_s);
  }
  REQUIRE(dp > 0);
  REQUIRE(pp > 0);
  CHECK(nominal.estimate.sums_s == Approx(2 * dp + 2 * pp));
  // Measured in the steps at 1 ms a hop (the lab's wake-ups): every hop costs that.
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
