#include <catch2/catch.hpp>

#include <algorithm>

#include "engine/plan/model_size.hpp"
#include "engine/plan/plan.hpp"
#include "common/errors.hpp"
#include "test/support/cluster_gen.hpp"
#include "model/gpt2/gpt2.hpp"

namespace hp = holmes::plan;
using holmes::topo::NicKind;

namespace {

std::string error_of(const holmes::spec::JobSpec& s, const holmes::topo::ClusterTopology& t) {
  try {
    hp::make_plan(s, t);
  } catch (const holmes::UserError& e) {
    return e.what();
  }
  return "";
}

holmes::topo::ClusterTopology cpu_node() {
  holmes::topo::ClusterTopology t;
  holmes::topo::NodeReport n;
  n.hostname = "laptop";
  n.devices.kind = "cpu";
  n.devices.count = 1;
  n.devices.cores = 4;
  t.nodes.push_back(n);
  t.islands.push_back(holmes::topo::Island{0, NicKind::kEthernet, "", {0}, 0});
  t.island_of = {0};
  return t;
}

}  // namespace

TEST_CASE("a single CPU device gives a trivial plan", "[plan]") {
  auto spec = hp::testing::make_spec(4, 128, 4, 1, 1, 1, 8, 16, 64);
  spec.model.vocab_size = 257;
  hp::Plan p = hp::make_plan(spec, cpu_node());
  CHECK(p.world == 1);
  CHECK(p.device_kind == "cpu");
  REQUIRE(p.stages.size() == 1);
  CHECK(p.stages[0].num_layers == 4);
  CHECK(p.micro_batches == 2);
  CHECK(p.groups.size() == 4);  // tp, pp, dp, world; no embedding tie with one stage
  for (const auto& g : p.groups) {
    CHECK(g.transport == hp::Transport::kGlooTcp);
    CHECK(g.interface == "lo");
  }
  CHECK(p.estimate.step_time_s > 0);
  CHECK(p.estimate.tp_comm_s == 0);
  CHECK(p.estimate.dp_comm_s == 0);
  CHECK(p.memory.size() == 1);
  CHECK(p.memory[0].capacity == 0);
  // fp32 on CPU: weights 4 + grads 4 + Adam m, v 8 bytes per parameter.
  double params = double(hp::total_params(holmes::model::gpt2::config(4, 128, 4, 257, 64), 1));
  CHECK(p.memory[0].params + p.memory[0].grads + p.memory[0].optimizer == Approx(16 * params));
}

TEST_CASE("closed form: one device, compute only", "[cost_model]") {
  auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 1}});
  auto spec = hp::testing::make_spec(4, 512, 8, 1, 1, 1, 2, 8, 256);
  spec.cluster.device_tflops = 100;
  hp::Plan p = hp::make_plan(spec, topo);
  double per_token = 3 * (4 * (24.0 * 512 * 512 + 4.0 * 256 * 512) + 2.0 * 512 * 50304);
  double want = 4 /* micro-batches */ * per_token * 2 * 256 / 100e12;
  CHECK(p.estimate.step_time_s == Approx(want));
  CHECK(p.estimate.compute_s == Approx(want));
  CHECK(p.estimate.tokens_per_s == Approx(8 * 256 / want));
  CHECK(p.estimate.tflops_per_device == Approx(100));
}

TEST_CASE("closed form: a 4-stage pipeline on one IB island", "[cost_model]") {
  // 4 nodes of 1 GPU, IB 400 Gb/s, 5 us; uniform partition of 8 layers: the last stage
  // (2 layers + LM head) is the bottleneck.
  auto topo = hp::testing::make_cluster({{NicKind::kIb, 4, 1, 400}});
  auto spec = hp::testing::make_spec(8, 512, 8, 1, 4, 1, 2, 12, 256);
  spec.cluster.device_tflops = 100;
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kUniform;
  spec.parallel.schedule = holmes::spec::Schedule::k1f1b;
  hp::Plan p = hp::make_plan(spec, topo);
  const auto& e = p.estimate;
  int m = 6, stages = 4;
  double tokens = 2 * 256;
  double compute = 3 * (2 * (24.0 * 512 * 512 + 4.0 * 256 * 512) + 2.0 * 512 * 50304) * tokens / 100e12;
  double act = tokens * 512 * 2;  // bf16 [B, T, C]
  double recv_grad_send = 5e-6 + act * 8 / 400e9;
  double tied = 50304.0 * 512 * 4;  // fp32 gradient of the tied embedding, all-reduced over 2
  double tie = 2 * (5e-6 + tied / 2 * 8 / 400e9);
  CHECK(e.bottleneck_stage == 3);
  CHECK(e.compute_s == Approx(m * compute));
  // The sends hide behind the passes in the steady state (each is far shorter than a pass);
  // the fill and drain wait for each of the 3 hops once forward and once backward.
  CHECK(e.pp_comm_s == Approx(2 * (stages - 1) * recv_grad_send));
  CHECK(e.bubble_s == Approx((stages - 1) * compute));
  CHECK(e.dp_comm_s == Approx(tie));
  CHECK(e.step_time_s == Approx(e.compute_s + e.tp_comm_s + e.pp_comm_s + e.bubble_s + e.dp_comm_s + e.update_s + e.log_s + e.sums_s + e.quota_s));
  // 1F1B bubble fraction (p-1)/(m+p-1) of the pipelined part.
  double pipelined = e.compute_s + e.tp_comm_s + e.bubble_s;
  CHECK(e.bubble_s / pipelined == Approx(double(stages - 1) / (m + stages - 1)));

  // zb-h1 (what auto picks here): the steady state and the fill's sends as under 1f1b; the
  // bubble loses two W (the weight-gradient GEMMs: 2 FLOPs per weight and token, the LM
  // head's too) per stage.
  spec.parallel.schedule = holmes::spec::Schedule::kAuto;
  hp::Plan z = hp::make_plan(spec, topo);
  CHECK(z.activation.schedule == holmes::spec::Schedule::kZbH1);
  const auto& ez = z.estimate;
  double w = (2 * 2 * 12.0 * 512 * 512 + 2.0 * 512 * 50304) * tokens / 100e12;  // 2 layers of 12 C^2 weights, the head
  CHECK(ez.bottleneck_stage == 3);
  CHECK(ez.compute_s == Approx(m * compute));
  CHECK(ez.pp_comm_s == Approx(2 * (stages - 1) * recv_grad_send));
  CHECK(ez.bubble_s == Approx((stages - 1) * (compute - 2 * w)));
  CHECK(ez.step_time_s < e.step_time_s);
  REQUIRE(z.has_one_f_one_b);  // the same recompute mode under 1f1b: the closed form above
  CHECK(z.one_f_one_b.schedule == holmes::spec::Schedule::k1f1b);
  CHECK(z.one_f_one_b.step_time_s == Approx(e.step_time_s));
}

TEST_CASE("the reduce-scatter hides behind backward and the all-gather behind the next forward until the NIC "
          "is too slow", "[cost_model]") {
  // Same model on 2 nodes x 1 GPU, dp = 2. With a fast NIC the reduce-scatter hides behind
  // the last backward (2/3 of a micro-batch's compute) and the parameter all-gather behind
  // the next step's first forward (1/3: DistOptimizer::update leaves it running, each layer
  // waits for its own); on a slow one the excess of each shows up as dp_comm_s.
  auto spec = hp::testing::make_spec(4, 512, 8, 1, 1, 2, 1, 8, 256);
  spec.cluster.device_tflops = 100;
  auto fast = hp::make_plan(spec, hp::testing::make_cluster({{NicKind::kIb, 2, 1, 4000}}));
  auto slow = hp::make_plan(spec, hp::testing::make_cluster({{NicKind::kRoce, 2, 1, 1}}));
  double params = double(hp::total_params(holmes::model::gpt2::config(4, 512, 8, 50257, 256), 1));
  const double fast_ag = 5e-6 + params * 4 / 2 * 8 / 4000e9;  // IB: 5 us; fp32 master weights
  const double fast_compute = fast.estimate.compute_s / fast.micro_batches;
  REQUIRE(fast_ag < fast_compute / 3);
  CHECK(fast.estimate.dp_comm_s == 0.0);
  double compute = slow.estimate.compute_s / slow.micro_batches;
  double rs = 6e-6 + params * 4 / 2 * 8 / 1e9;  // one ring step over RoCE (6 us), fp32 gradients
  double ag = 6e-6 + params * 4 / 2 * 8 / 1e9;  // the optimizer gathers fp32 weights, in bf16 jobs too
  REQUIRE(ag > compute / 3);
  CHECK(slow.estimate.dp_comm_s == Approx((rs - compute * 2 / 3) + (ag - compute / 3)));
}

TEST_CASE("partition: faster islands get no fewer layers, lists are honoured", "[partition]") {
  // Two islands of 4 nodes x 8 GPUs; island 1 computes half as fast. tp 8, dp 1, pp 8.
  // Compare interior stages (no embedding or head, both neighbours on the same island):
  // the stages at the island boundary also pay pipeline sends over Ethernet.
  hp::testing::IslandSpec fast{NicKind::kIb, 4, 8, 400, 25, 800};
  hp::testing::IslandSpec slow{NicKind::kRoce, 4, 8, 200, 25, 400};
  auto topo = hp::testing::make_cluster({fast, slow});
  auto spec = hp::testing::make_spec(48, 1024, 16, 8, 8, 1, 1, 8, 1024);
  hp::Plan p = hp::make_plan(spec, topo);
  auto interior = [&](const hp::Stage& s) {
    return s.stage > 0 && s.stage < p.pp - 1 && p.stages[s.stage - 1].island == s.island &&
           p.stages[s.stage + 1].island == s.island;
  };
  int sum = 0, compared = 0;
  for (const auto& a : p.stages) {
    sum += a.num_layers;
    for (const auto& b : p.stages)
      if (interior(a) && interior(b) && a.island == 0 && b.island == 1) {
        CHECK(a.num_layers >= b.num_layers);
        ++compared;
      }
  }
  CHECK(compared == 4);
  CHECK(sum == 48);
  // Same compute, different NICs: the RoCE island's data-parallel sync is slower.
  hp::testing::IslandSpec ib{NicKind::kIb, 4, 8, 400, 25, 400};
  hp::testing::IslandSpec roce{NicKind::kRoce, 4, 8, 25, 25, 400};
  auto spec2 = hp::testing::make_spec(32, 2048, 16, 8, 4, 2, 1, 8, 1024);
  hp::Plan q = hp::make_plan(spec2, hp::testing::make_cluster({ib, roce}));
  for (const auto& a : q.stages)
    for (const auto& b : q.stages)
      if (a.stage % 3 != 0 && b.stage % 3 != 0 && a.island == 0 && b.island == 1) CHECK(a.num_layers >= b.num_layers);
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kList;
  spec.parallel.partition.layers = {3, 5, 9, 11, 12, 4, 2, 2};
  hp::Plan l = hp::make_plan(spec, topo);
  for (int s = 0; s < 8; ++s) CHECK(l.stages[s].num_layers == spec.parallel.partition.layers[s]);
  CHECK(l.stages[3].first_layer == 17);
}

TEST_CASE("infeasible requests are user errors with the numbers", "[plan]") {
  auto topo = hp::testing::make_cluster({{NicKind::kIb, 2, 8}});
  auto spec = hp::testing::make_spec(8, 256, 16, 2, 2, 3, 1, 12, 128);
  CHECK_THAT(error_of(spec, topo), Catch::Contains("= 12 but the cluster has 16 devices"));
  spec.parallel.data = 4;
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kList;
  spec.parallel.partition.layers = {3, 2};
  CHECK_THAT(error_of(spec, topo), Catch::Contains("sums to 5 but model.layers = 8"));
  spec.parallel.partition.kind = holmes::spec::PartitionKind::kAuto;
  spec.train.global_batch = 6;
  CHECK_THAT(error_of(spec, topo), Catch::Contains("train.global_batch = 6"));
  // A 70B-class model does not fit on one 80 GB GPU per stage.
  auto big = hp::testing::make_spec(80, 8192, 64, 8, 1, 2, 1, 16, 2048);
  CHECK_THAT(error_of(big, topo), Catch::Contains("does not fit in device memory"));
  // With auto degrees it searches and finds a layout that fits (pipeline over 2 nodes).
  big.parallel.tensor = big.parallel.pipeline = big.parallel.data = holmes::spec::kAuto;
  big.model.layers = 16;
  hp::Plan p = hp::make_plan(big, topo);
  for (const auto& m : p.memory) CHECK(m.total() <= m.capacity);
}

TEST_CASE("auto degrees on three islands: fits, invariants, parts add up, hash stable", "[plan]") {
  auto topo = hp::testing::make_cluster({{NicKind::kIb, 4}, {NicKind::kRoce, 4}, {NicKind::kIb, 8, 8, 200}});
  auto spec = hp::testing::make_spec(36, 4096, 32, 0, 0, 0, 1, 256, 2048);
  hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.tp * p.pp * p.dp == 128);
  const auto& e = p.estimate;
  CHECK(e.step_time_s == Approx(e.compute_s + e.tp_comm_s + e.pp_comm_s + e.bubble_s + e.dp_comm_s + e.update_s + e.log_s + e.sums_s + e.quota_s));
  CHECK(e.naive_step_time_s >= e.step_time_s * 0.999);
  for (const auto& g : p.groups)
    if (g.kind == hp::kDpGroup || g.kind == hp::kTpGroup) CHECK_FALSE(g.crosses_islands);
  CHECK(hp::plan_hash(p) == hp::plan_hash(hp::make_plan(spec, topo)));
  spec.parallel.tensor = p.tp == 8 ? 4 : 8;
  CHECK(hp::plan_hash(p) != hp::plan_hash(hp::make_plan(spec, topo)));
  std::string json = hp::format_plan_json(p);
  for (const char* key : {"\"ranks\"", "\"stages\"", "\"groups\"", "\"estimate\"", "\"memory\"", "\"step_time_s\"",
                          "\"naive_step_time_s\"", "\"tokens_per_s\"", "\"first_layer\"", "\"transport\""})
    CHECK(json.find(key) != std::string::npos);
  std::string text = hp::format_plan_text(p);
  CHECK(text.find("step time") != std::string::npos);
  CHECK(text.find("faster") != std::string::npos);
}

TEST_CASE("JSON escapes host names and keeps numbers finite", "[plan]") {
  auto topo = cpu_node();
  topo.nodes[0].hostname = "odd\"host\\name\n";
  auto spec = hp::testing::make_spec(2, 64, 4, 1, 1, 1, 1, 1, 32);
  std::string json = hp::format_plan_json(hp::make_plan(spec, topo));
  CHECK(json.find("\"odd\\\"host\\\\name\\u000a\"") != std::string::npos);
  CHECK(json.find("nan") == std::string::npos);
  CHECK(json.find("inf") == std::string::npos);
}

TEST_CASE("train.precision fp32 on GPUs is priced at the FP32 peak with 4-byte tensors", "[cost_model]") {
  // The topology's GPU peak is its BF16 tensor-core figure; an fp32 job's matmuls run on the
  // CUDA cores (no TF32): the table's FP32 peak for a known model, else 1/15 of the BF16 one.
  auto spec = hp::testing::make_spec(4, 512, 8, 1, 2, 1, 1, 8, 256);
  auto topo = hp::testing::make_cluster({{NicKind::kIb, 2, 1, 400}});
  const hp::Plan automatic = hp::make_plan(spec, topo);
  spec.train.precision = holmes::spec::Precision::kBf16;
  const hp::Plan bf16 = hp::make_plan(spec, topo);
  spec.train.precision = holmes::spec::Precision::kFp32;
  const hp::Plan fp32 = hp::make_plan(spec, topo);
  CHECK(hp::plan_hash(automatic) == hp::plan_hash(bf16));  // auto trains bf16 on GPUs
  CHECK(fp32.estimate.compute_s == Approx(bf16.estimate.compute_s * 15));
  // Activations and pipeline sends in 4 bytes instead of 2; the fp32 weights without the bf16
  // copy the kernels read; the same optimizer state (moments only: dp 1).
  CHECK(fp32.estimate.bytes_per_step[int(hp::LinkKind::kIb)] > bf16.estimate.bytes_per_step[int(hp::LinkKind::kIb)]);
  REQUIRE(fp32.memory.size() == bf16.memory.size());
  for (size_t r = 0; r < fp32.memory.size(); ++r) {
    CHECK(fp32.memory[r].params == Approx(bf16.memory[r].params * 4 / 6));
    CHECK(fp32.memory[r].activations > bf16.memory[r].activations);  // fp32 LayerNorm statistics in both
    CHECK(fp32.memory[r].optimizer == Approx(bf16.memory[r].optimizer));
  }
  for (auto& n : topo.nodes) n.devices.name = "NVIDIA H100 80GB HBM3";
  const hp::Plan h100 = hp::make_plan(spec, topo);
  spec.train.precision = holmes::spec::Precision::kBf16;
  const hp::Plan h100_bf16 = hp::make_plan(spec, topo);
  CHECK(h100.estimate.compute_s == Approx(h100_bf16.estimate.compute_s * 400 / 67));  // make_cluster's peak: 400
}
