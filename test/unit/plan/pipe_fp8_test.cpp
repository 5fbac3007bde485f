// parallel.pipe_fp8 in the planner: FP8 pipeline sends priced as a byte per value on the
// links plus a pack and an unpack per value on the stages (cost_model.hpp), on when asked,
// chosen by auto where the estimate is faster with them, and proposed by the plan text when
// off and they would pay.
#include <catch2/catch.hpp>

#include "engine/plan/cost_model.hpp"
#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::spec::PipeFp8;
using holmes::topo::NicKind;

namespace {

// plan_test's closed form: a GPT-2 shape of 8 layers x 512 on 4 stages of one IB island at
// 100 TFLOP/s, bf16, 1f1b, a uniform partition.
holmes::topo::ClusterTopology closed_form_cluster() { return hp::testing::make_cluster({{NicKind::kIb, 4, 1, 400}}); }

holmes::spec::JobSpec closed_form_spec() {
  auto spec = hp::testing::make_spec(8, 512, 8, 1, 4, 1, 2, 12, 256);
  spec.cluster.device_tflops = 100;
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kUniform;
  spec.parallel.schedule = holmes::spec::Schedule::k1f1b;
  return spec;
}

}  // namespace

TEST_CASE("pipe_fp8 on: the closed form with a byte per value on the links and the casts on the stages",
          "[cost_model][fp8]") {
  // The 4-stage pipeline of plan_test's closed form (one IB island, bf16, 1f1b, uniform).
  const auto topo = closed_form_cluster();
  auto spec = closed_form_spec();
  const hp::Plan off = hp::make_plan(spec, topo);
  spec.parallel.pipe_fp8 = PipeFp8::kOn;
  const hp::Plan on = hp::make_plan(spec, topo);
  CHECK_FALSE(off.pipe_fp8);
  CHECK(on.pipe_fp8);
  const int m = 6, stages = 4;
  const double tokens = 2 * 256;
  const double compute = 3 * (2 * (24.0 * 512 * 512 + 4.0 * 256 * 512) + 2.0 * 512 * 50304) * tokens / 100e12;
  // The last stage (the bottleneck) unpacks its input and packs its input gradient: one pair
  // per value of its one hop, per micro-batch.
  const double casts = tokens * 512 * hp::kFp8CastSPerValueGpu;
  CHECK(on.estimate.bottleneck_stage == 3);
  CHECK(on.estimate.compute_s == Approx(m * (compute + casts)));
  CHECK(off.estimate.compute_s == Approx(m * compute));
  const double send_fp8 = 5e-6 + tokens * 512 * 1 * 8 / 400e9, send_bf16 = 5e-6 + tokens * 512 * 2 * 8 / 400e9;
  CHECK(on.estimate.pp_comm_s == Approx(2 * (stages - 1) * send_fp8));
  CHECK(off.estimate.pp_comm_s == Approx(2 * (stages - 1) * send_bf16));
  // Each side says what the other choice would give.
  CHECK(on.pipe_fp8_other_step_s == Approx(off.estimate.step_time_s));
  CHECK(off.pipe_fp8_other_step_s == Approx(on.estimate.step_time_s));
  // The pipeline's bytes halve (bf16 to FP8); the tied embedding's gradient sum is unchanged.
  const int ib = int(hp::LinkKind::kIb);
  const double pipe_bf16 = 2.0 * (stages - 1) * m * tokens * 512 * 2;
  CHECK(off.estimate.bytes_per_step[ib] - on.estimate.bytes_per_step[ib] == Approx(pipe_bf16 / 2));
}

TEST_CASE("pipe_fp8 auto: on where the pipeline crosses a slow link, with the saving in the plan, and off proposes it",
          "[plan][fp8]") {
  // The closed form's IB pipeline: FP8 saves well under kPipeFp8MinGain there, so auto keeps
  // the sends in bf16 and the plan proposes nothing.
  {
    auto ib = hp::testing::make_cluster({{NicKind::kIb, 4, 1, 400}});
    auto s = hp::testing::make_spec(8, 512, 8, 1, 4, 1, 2, 12, 256);
    s.parallel.pipe_fp8 = PipeFp8::kAuto;
    const hp::Plan p = hp::make_plan(s, ib);
    CHECK_FALSE(p.pipe_fp8);
    CHECK(p.pipe_fp8_other_step_s < p.estimate.step_time_s);  // faster, but by too little
    CHECK(p.pipe_fp8_other_step_s > (1 - hp::kPipeFp8MinGain) * p.estimate.step_time_s);
    CHECK_THAT(hp::format_plan_text(p), !Catch::Contains("pipeline sends in FP8"));
  }
  // Two single-GPU nodes in two islands joined by 1 Gb/s Ethernet: the pipeline's hop is slow.
  holmes::plan::testing::IslandSpec island{NicKind::kIb, 1, 1, 400, 1};
  const auto slow = hp::testing::make_cluster({island, island});
  auto spec = hp::testing::make_spec(8, 1024, 8, 1, 2, 1, 4, 16, 512);
  spec.parallel.pipe_fp8 = PipeFp8::kAuto;
  const hp::Plan a = hp::make_plan(spec, slow);
  CHECK(a.pipe_fp8);
  CHECK(a.estimate.step_time_s < a.pipe_fp8_other_step_s);
  CHECK_THAT(hp::format_plan_text(a), Catch::Contains("pipeline sends in FP8 (parallel.pipe_fp8)"));
  CHECK_THAT(hp::format_plan_json(a), Catch::Contains("\"pipe_fp8\": {\"on\": true"));
  spec.parallel.pipe_fp8 = PipeFp8::kOff;
  const hp::Plan off = hp::make_plan(spec, slow);
  CHECK_FALSE(off.pipe_fp8);
  CHECK(off.pipe_fp8_other_step_s == Approx(a.estimate.step_time_s));
  CHECK_THAT(hp::format_plan_text(off), Catch::Contains("pipeline sends in FP8 would take the step to"));
  CHECK(hp::plan_hash(off) != hp::plan_hash(a));
  // No pipeline, nothing to send: auto stays off and the plan prices no alternative.
  spec.parallel.pipe_fp8 = PipeFp8::kAuto;
  spec.parallel.pipeline = 1;
  spec.parallel.data = 2;
  const hp::Plan dp = hp::make_plan(spec, slow);
  CHECK_FALSE(dp.pipe_fp8);
  CHECK(dp.pipe_fp8_other_step_s == 0);
}

TEST_CASE("pipe_fp8 auto on CPUs: the host casts can cost more than a fast link saves", "[plan][fp8]") {
  // Two CPU nodes: on 100 Gb/s Ethernet a value costs 4 bytes x 8 / 100e9 = 0.32 ns on the
  // wire in fp32 and 0.08 ns in FP8, while the host's pack and unpack take kFp8CastSPerValueCpu
  // (5 ns): auto keeps fp32 sends. Over 20 Mb/s the wire saves 1.2 us per value: most of such
  // a step is the tied embedding's gradient sum over the same link, but the sends' part still
  // clears kPipeFp8MinGain, and auto turns FP8 on.
  for (double gbps : {100.0, 0.02}) {
    holmes::plan::testing::IslandSpec island{NicKind::kEthernet, 1, 1, 0, gbps, 1};
    auto topo = hp::testing::make_cluster({island, island});
    for (auto& n : topo.nodes) n.devices.kind = "cpu", n.devices.cores = 4, n.devices.name = "cpu";
    auto spec = hp::testing::make_spec(4, 256, 4, 1, 2, 1, 2, 8, 128);
    spec.parallel.pipe_fp8 = PipeFp8::kAuto;
    const hp::Plan p = hp::make_plan(spec, topo);
    INFO(gbps << " Gb/s: fp8 " << p.pipe_fp8 << ", step " << p.estimate.step_time_s << " s, other "
              << p.pipe_fp8_other_step_s << " s");
    CHECK(p.pipe_fp8 == (gbps < 1));
    if (gbps > 1) CHECK(p.pipe_fp8_other_step_s > p.estimate.step_time_s);  // the casts cost more than they save
  }
}

TEST_CASE("train.precision fp8: the GEMMs at twice the rate plus their operands' casts, the rest as bf16",
          "[cost_model][fp8]") {
  // plan_test's closed form again (GPT-2 shape, C 512, 8 layers on 4 stages, bf16, 1f1b): the
  // last stage, the bottleneck, runs 2 blocks and the LM head.
  const auto topo = closed_form_cluster();
  auto spec = closed_form_spec();
  const hp::Plan bf16 = hp::make_plan(spec, topo);
  spec.train.precision = holmes::spec::Precision::kFp8;
  const hp::Plan fp8 = hp::make_plan(spec, topo);
  spec.train.fp8_lm_head = true;
  const hp::Plan fp8_head = hp::make_plan(spec, topo);
  const int m = 6;
  const double tokens = 2 * 256, C = 512, V = 50304, rate = 100e12;
  // Per token: a block's GEMMs hold 12 C^2 weights (c_attn 3C^2, c_proj C^2, c_fc and its
  // projection 4C^2 each), attention 4 T C forward FLOPs, the head 2 C V; training is 3x forward.
  const double gemms = 2 * 3 * 2 * 12 * C * C, attention = 2 * 3 * 4 * 256 * C, head = 3 * 2 * C * V;
  // Casts per block and token: each GEMM's input twice (c_attn C, c_proj C, c_fc C, its
  // projection 4C) and its output once (3C, C, 4C, C); the weights twice per micro-batch.
  const double cast_values = tokens * 2 * (2 * 7 * C + 9 * C) + 2 * 2 * 12 * C * C;
  const double cast_s = cast_values * hp::kFp8OperandCastSPerValueGpu;
  const double want = (attention + head + gemms / 2) * tokens / rate + cast_s;
  CHECK(bf16.estimate.compute_s == Approx(m * (attention + head + gemms) * tokens / rate));
  CHECK(fp8.estimate.bottleneck_stage == 3);
  CHECK(fp8.estimate.compute_s == Approx(m * want));
  // The LM head in FP8 too: its GEMMs at twice the rate, its input (C) twice, its output
  // (V) once, its weight twice.
  const double head_casts = (tokens * (2 * C + V) + 2 * C * V) * hp::kFp8OperandCastSPerValueGpu;
  CHECK(fp8_head.estimate.compute_s == Approx(m * (want - head / 2 * tokens / rate + head_casts)));
  // The plan says the FP8 figures are declared, not measured.
  bool said = false;
  for (const auto& w : fp8.warnings) said = said || w.find("train.precision fp8") != std::string::npos;
  CHECK(said);
}
