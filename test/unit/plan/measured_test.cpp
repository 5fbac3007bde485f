// The cost model from `holmes-train calibrate`'s tables (engine/plan/measured.hpp): compute per
// pass from the device's table, interpolated in the micro-batch, the analytic fallback from its
// GEMMs, the declared rate where no table holds the plan's shapes, and collectives from the
// link class's curves; each term says where it came from.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/plan/measured.hpp"
#include "engine/plan/plan.hpp"
#include "engine/spec/model_config.hpp"
#include "engine/topo/calibration.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
namespace topo = holmes::topo;
using holmes::topo::NicKind;

namespace {

// Two single-device CPU nodes on Ethernet, a two-stage pipeline of a 4-layer GPT.
holmes::spec::JobSpec job(int micro_batch = 2) {
  auto s = hp::testing::make_spec(4, 128, 4, 1, 2, 1, micro_batch, 16, 64);
  s.model.vocab_size = 257;
  s.parallel.partition.kind = holmes::spec::PartitionKind::kList;
  s.parallel.partition.layers = {2, 2};
  s.parallel.schedule = holmes::spec::Schedule::k1f1b;
  s.train.recompute = holmes::spec::Recompute::kNone;
  return s;
}

topo::ClusterTopology pair(const std::string& device = "box-cpu") {
  auto t = hp::testing::make_cluster({{NicKind::kEthernet, 2, 1, 0, 1, 0.05}});
  for (auto& n : t.nodes) n.devices.kind = "cpu", n.devices.cores = 1, n.devices.name = device;
  return t;
}

// A table of the job's model on "box-cpu": a layer 10 ms forward, 12 B, 8 W, 20 whole backward
// at micro-batch 2 and twice that at 4; embedding 1/1/1, head 5/4/3 ms.
topo::ComputeTable table() {
  topo::ComputeTable t;
  t.device_kind = "cpu", t.device_name = "box-cpu", t.precision = "fp32";
  t.model = hp::shape_key(holmes::spec::model_config(job().model));
  for (int mb : {2, 4}) {
    const double k = mb / 2.0;
    t.layers.push_back({1, mb, 64, "none", 10 * k, 12 * k, 8 * k, 20 * k});
    t.embedding.push_back({1, mb, 64, 1 * k, 1 * k, 1 * k});
    t.head.push_back({1, mb, 64, 5 * k, 4 * k, 3 * k});
  }
  t.optimizer_ns_per_param = 2;
  t.copy_gbps = 10;
  return t;
}

std::string source_of(const hp::Plan& p, const std::string& term) {
  for (const auto& [t, s] : p.estimate.sources)
    if (t == term) return s;
  return "";
}

}  // namespace

TEST_CASE("a stage's compute is priced from its device's calibrate table", "[measured]") {
  auto t = pair();
  const hp::Plan declared = hp::make_plan(job(), t);
  CHECK(source_of(declared, "compute") == "declared");
  t.calibration.device = {"cpu", "box-cpu", "", "", "", "", "", ""};
  t.calibration.tables.push_back(table());
  const hp::Plan measured = hp::make_plan(job(), t);
  CHECK(source_of(measured, "compute") == "measured (calibrate table)");
  // m = 16 / 2 = 8 micro-batches; the bottleneck stage holds 2 layers and the head (5 + 20 ms of
  // F and whole backward) or the embedding (1 + 2 ms): the last stage, 2 x 30 + 5 + 7 = 72 ms a
  // micro-batch.
  REQUIRE(measured.micro_batches == 8);
  CHECK(measured.estimate.compute_s == Approx(8 * 0.072));
  // The table's optimizer prices the update (no job calibration gave one).
  CHECK(source_of(measured, "update") == "measured (calibrate table)");
  CHECK(measured.estimate.update_s > 0);
  // Micro-batch 4 (its own rows): 4 micro-batches of twice the time.
  const hp::Plan four = hp::make_plan(job(4), t);
  CHECK(four.estimate.compute_s == Approx(4 * 0.144));
}

TEST_CASE("a table interpolates in the micro-batch and falls back to its GEMMs, then to the declared rate",
          "[measured]") {
  const holmes::model::GptConfig m = holmes::spec::model_config(job().model);
  const topo::ComputeTable t = table();
  // Measured at 2 and 4: 3 sits half-way.
  const auto three = hp::measured_passes(t, m, 1, 3, 64, holmes::spec::Recompute::kNone, 2, false, false, 4);
  REQUIRE(three);
  CHECK(three->source == "table (micro-batch interpolated)");
  CHECK(three->forward_s == Approx(2 * 0.015));
  CHECK(three->backward_all_s == Approx(2 * 0.030));
  // Beyond the sizes measured: the nearest one's time per token.
  const auto eight = hp::measured_passes(t, m, 1, 8, 64, holmes::spec::Recompute::kNone, 1, false, false, 4);
  REQUIRE(eight);
  CHECK(eight->forward_s == Approx(0.040));
  // Another slice: no layer row and no GEMMs: nothing measured.
  CHECK_FALSE(hp::measured_passes(t, m, 2, 2, 64, holmes::spec::Recompute::kNone, 1, false, false, 4));
  // With the GEMMs of that slice (and attention): the analytic layer, their sum plus the
  // memory-bound passes at the copy rate.
  topo::ComputeTable g = t;
  for (const char* name : {"qkv", "attn_out", "mlp_in", "mlp_out"}) g.gemms.push_back({name, 2, 128, 64, 128, 1, 2, 3});
  g.attention.push_back({2, 2, 64, 0.5, 1.0});
  const auto analytic = hp::measured_passes(g, m, 2, 2, 64, holmes::spec::Recompute::kNone, 1, false, false, 4);
  REQUIRE(analytic);
  CHECK(analytic->source == "GEMMs of the table");
  const double copy_ms = 6.0 * 128 * 128 * 4 / (10e9) * 1e3;  // six passes over (B T, C) fp32 at 10 GB/s
  CHECK(analytic->forward_s == Approx((4 * 1 + 0.5 + copy_ms) * 1e-3));
  CHECK(analytic->backward_all_s == Approx((4 * (2 + 3) + 1.0 + 2 * copy_ms) * 1e-3));
  // A plan on another device model than the table's: declared, and the plan says so.
  auto other = pair("other-cpu");
  other.calibration.device = {"cpu", "box-cpu", "", "", "", "", "", ""};
  other.calibration.tables.push_back(t);
  CHECK(source_of(hp::make_plan(job(), other), "compute") == "declared");
}

TEST_CASE("collective curves: the fit, the interpolation, and the links that use them", "[measured]") {
  topo::CollectiveCurve c{"box-cpu", "ethernet", "", "gloo", "all_reduce", 2, {}, 0, 0};
  // 50 us + wire / 1 Gb/s: the fit recovers both.
  for (double b : {4096.0, 65536.0, 1048576.0, 16777216.0}) c.points.emplace_back(b, 50e-6 + b * 8 / 1e9);
  topo::fit_curve(c);
  CHECK(c.alpha_us == Approx(50).epsilon(1e-6));
  CHECK(c.bus_gbps == Approx(1).epsilon(1e-6));
  CHECK(topo::curve_seconds(c, 262144) == Approx(50e-6 + 262144 * 8 / 1e9).epsilon(0.05));
  CHECK(topo::curve_seconds(c, 1 << 26) == Approx(50e-6 + double(1 << 26) * 8 / 1e9));
  // A pipeline's hops priced from a send_recv curve of the Ethernet (Gloo: a CPU plan).
  auto t = pair();
  const hp::Plan before = hp::make_plan(job(), t);
  CHECK(source_of(before, "pipeline comm") == "declared");
  topo::CollectiveCurve send{"box-cpu", "ethernet", "", "gloo", "send_recv", 2, {}, 0, 0};
  for (double b : {4096.0, 65536.0, 1048576.0}) send.points.emplace_back(b, 2e-3 + b * 8 / 0.1e9);
  topo::fit_curve(send);
  t.calibration.device = {"cpu", "box-cpu", "", "", "", "", "", ""};
  t.calibration.collectives.push_back(send);
  const hp::Plan after = hp::make_plan(job(), t);
  CHECK(source_of(after, "pipeline comm") == "measured (calibrate curves)");
  CHECK(after.estimate.pp_comm_s > before.estimate.pp_comm_s);
  // Measured on a device the nodes do not have: not theirs.
  auto other = pair("other-cpu");
  other.calibration = t.calibration;
  CHECK(source_of(hp::make_plan(job(), other), "pipeline comm") == "declared");
}

TEST_CASE("tables and curves round-trip through the calibration file", "[measured]") {
  topo::Calibration c;
  c.device = {"cuda", "NVIDIA H200", "550.54.15", "12.4", "120403", "91900", "2.21.5", "2026-12-01T10:00:00Z"};
  topo::ComputeTable t = table();
  t.device_kind = "cuda", t.device_name = "NVIDIA H200", t.precision = "bf16";
  t.gemms.push_back({"qkv", 2, 4096, 1152, 768, 0.1, 0.2, 0.3});
  t.attention.push_back({2, 4, 1024, 0.4, 0.9});
  t.upload_gbps = 24, t.download_gbps = 25, t.launch_us = 4.5;
  c.tables.push_back(t);
  topo::CollectiveCurve k{"NVIDIA H200", "intra-node", "nvswitch", "nccl", "all_reduce", 8, {{65536, 2e-5}, {1 << 20, 4e-5}}, 0, 0};
  topo::fit_curve(k);
  c.collectives.push_back(k);
  const topo::Calibration back = topo::parse_calibration_yaml(topo::format_calibration_yaml(c), "cal.yaml");
  REQUIRE(back.tables.size() == 1);
  const topo::ComputeTable& b = back.tables[0];
  CHECK(b.device_name == "NVIDIA H200");
  CHECK(b.precision == "bf16");
  CHECK(b.model == t.model);
  REQUIRE(b.layers.size() == t.layers.size());
  CHECK(b.layers[1].backward_all_ms == Approx(t.layers[1].backward_all_ms));
  REQUIRE(b.gemms.size() == 1);
  CHECK(b.gemms[0].k == 768);
  CHECK(b.launch_us == Approx(4.5));
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].intra == "nvswitch");
  CHECK(back.collectives[0].points.size() == 2);
  CHECK(back.collectives[0].bus_gbps == Approx(k.bus_gbps).epsilon(1e-5));
  // A bad row names the file, line and key.
  CHECK_THROWS_WITH(topo::parse_calibration_yaml("format: holmes-calibration/2\ndevice: {kind: cpu}\ncollectives:\n"
                                                 "  - {link: ethernet, transport: mpi, op: all_reduce, ranks: 2}\n",
                                                 "cal.yaml"),
                    Catch::Contains("cal.yaml:4") && Catch::Contains("collectives[0].transport") &&
                        Catch::Contains("'mpi'"));
}
