// train.recompute in the planner: the memory model prices what each mode keeps, auto takes the
// fastest mode that fits, a fixed mode that does not fit says that recomputing would, and
// --plan-only shows the choice beside its runner-up.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "common/errors.hpp"
#include "engine/plan/cost_model.hpp"
#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
using holmes::spec::Recompute;
using holmes::topo::NicKind;

namespace {

// One node of 8 GPUs (80 GB), tensor 8: a 32-layer 4096-wide model at 4096 tokens and
// micro-batch 16, whose activations (about 47 GiB per rank kept by every layer) do not fit
// beside its weights and optimizer, while selective (about 26) and full (about 9) do.
holmes::spec::JobSpec long_sequences() {
  auto spec = hp::testing::make_spec(32, 4096, 32, 8, 1, 1, 16, 16, 4096);
  return spec;
}

std::string error_of(const holmes::spec::JobSpec& s, const holmes::topo::ClusterTopology& t) {
  try {
    hp::make_plan(s, t);
  } catch (const holmes::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("recompute: none is refused for memory, auto fits with selective, full is the runner-up", "[plan]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 8}});
  auto spec = long_sequences();
  spec.train.recompute = Recompute::kNone;
  const std::string err = error_of(spec, topo);
  CHECK_THAT(err, Catch::Contains("does not fit in device memory"));
  CHECK_THAT(err, Catch::Contains("set train.recompute: auto (or full"));

  spec.train.recompute = Recompute::kAuto;
  spec.parallel.schedule = holmes::spec::Schedule::kAuto;  // the default is 1f1b; the plan then names both choices
  const hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.recompute == Recompute::kSelective);
  CHECK(p.activation.fits);
  for (const auto& m : p.memory) CHECK(m.total() <= m.capacity);
  REQUIRE(p.activation_chosen);
  CHECK(p.runner_up.recompute == Recompute::kFull);
  CHECK(p.runner_up.fits);
  CHECK(p.runner_up.activations < p.activation.activations);
  CHECK(p.runner_up.step_time_s > p.activation.step_time_s);  // full replays the forward
  CHECK(p.runner_up.recompute_s > 0);
  const std::string text = hp::format_plan_text(p);
  CHECK_THAT(text, Catch::Contains("Schedule and recomputation (parallel.schedule auto, train.recompute auto): 1f1b, "
                                   "recompute selective"));
  CHECK_THAT(text, Catch::Contains("runner-up: 1f1b, recompute full"));
  CHECK_THAT(hp::format_plan_json(p), Catch::Contains("\"activation\": {\"chosen\": true, \"schedule_chosen\": true, "
                                                      "\"recompute_chosen\": true, \"plan\": {\"schedule\": \"1f1b\", "
                                                      "\"recompute\": \"selective\""));

  // Given, a mode is planned as given: full's estimate counts its replay, and it changes the hash.
  spec.train.recompute = Recompute::kFull;
  const hp::Plan full = hp::make_plan(spec, topo);
  CHECK_FALSE(full.activation_chosen);
  CHECK(full.activation.recompute == Recompute::kFull);
  CHECK(full.estimate.recompute_s > 0);
  CHECK(full.estimate.compute_s > p.estimate.compute_s);
  CHECK(hp::plan_hash(full) != hp::plan_hash(p));
}

TEST_CASE("recompute: auto keeps everything when it fits, selective is the runner-up on a GPU", "[plan]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 8}});
  auto spec = long_sequences();
  spec.train.micro_batch = spec.train.global_batch = 1;
  const hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.recompute == Recompute::kNone);
  CHECK(p.estimate.recompute_s == 0);
  // bf16 (cuDNN's fused attention): selective replays no FLOPs the estimate counts; it keeps less.
  CHECK(p.runner_up.recompute == Recompute::kSelective);
  CHECK(p.runner_up.step_time_s == Approx(p.activation.step_time_s));
  CHECK(p.runner_up.activations < p.activation.activations);
}

// The CUDA runtime's own device memory (context, cuBLASLt and cuDNN workspaces: 0.9-1.7 GiB
// measured on an H200) is part of every GPU rank's total, in the fit check and the JSON; a CPU
// plan counts none. Without the term, GPT-2 124M's planned total was 15% under the measured.
TEST_CASE("memory: a CUDA plan counts the runtime's device memory on every rank, a CPU plan does not", "[plan]") {
  auto spec = long_sequences();
  spec.train.recompute = Recompute::kFull;
  const auto gpu = hp::testing::make_cluster({{NicKind::kIb, 1, 8}});
  const hp::Plan p = hp::make_plan(spec, gpu);
  REQUIRE(p.device_kind == "cuda");
  for (const auto& m : p.memory) {
    CHECK(m.runtime == hp::kCudaRuntimeBytes);
    CHECK(m.total() == Approx(m.params + m.grads + m.optimizer + m.activations + hp::kCudaRuntimeBytes));
    CHECK(m.total() <= m.capacity);
  }
  const std::string json = hp::format_plan_json(p);
  CHECK_THAT(json, Catch::Contains(fmt::format("\"runtime\": {}", static_cast<long long>(hp::kCudaRuntimeBytes))));

  auto cpu = gpu;
  for (auto& n : cpu.nodes) n.devices.kind = "cpu";
  const hp::Plan c = hp::make_plan(spec, cpu);
  for (const auto& m : c.memory) CHECK(m.runtime == 0);
  CHECK_THAT(hp::format_plan_json(c), Catch::Contains("\"runtime\": 0,"));
}

// data.document_mask on a GPU: the bf16 attention is cuDNN's fused one with the mask in its
// graph, so the masked plan is the unmasked one (same choices, same step time, same kept
// activations) plus the one (B,T,T) bf16 bias a rank may hold for it. Before, a masked bf16
// plan priced the unfused attention's probabilities and the selective replay.
TEST_CASE("document masking: a bf16 GPU plan is the unmasked plan plus one document bias per rank", "[plan]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 8}});
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kAuto}) {
    CAPTURE(int(r));
    auto spec = long_sequences();
    spec.train.micro_batch = spec.train.global_batch = 1;
    spec.train.recompute = r;
    const hp::Plan plain = hp::make_plan(spec, topo);
    spec.data.document_mask = true;
    const hp::Plan masked = hp::make_plan(spec, topo);
    REQUIRE(masked.device_kind == "cuda");
    CHECK(masked.activation.document_mask);
    CHECK(masked.activation.recompute == plain.activation.recompute);
    CHECK(masked.estimate.step_time_s == Approx(plain.estimate.step_time_s));
    CHECK(masked.estimate.recompute_s == Approx(plain.estimate.recompute_s));
    REQUIRE(masked.memory.size() == plain.memory.size());
    const double bias = 2.0 * 1 * 4096 * 4096;  // micro-batch 1, T 4096, bf16
    for (std::size_t i = 0; i < masked.memory.size(); ++i)
      CHECK(masked.memory[i].activations == Approx(plain.memory[i].activations + bias));
  }
}
