// Activation recomputation and the split backward (model/gpt.hpp: ActivationPolicy) against
// the model that keeps everything and runs one backward pass: the same losses and the same
// gradients bit for bit (the replay runs the forward's own deterministic kernels, W runs the
// same GEMMs as the one pass, in the same accumulation order), for GPT-2 and Llama, whole
// models, tensor-parallel shards and pipeline stages, fp32 and (emulated) bf16; and the
// memory each policy keeps.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <thread>

#include "backends/backends.hpp"
#include "test/support/emulated_bf16.hpp"
#include "test/unit/model/model_checks.hpp"
#include "test/unit/model/model_test_util.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes::model;
using holmes::model::test::Batch;
using namespace holmes::model::test;

namespace {

GptConfig gpt2_config() { return gpt2::config(3, 24, 4, 37, 9); }
GptConfig llama_config() { return llama::config(3, 24, 4, 2, 36, 37, 9); }

}  // namespace

TEST_CASE("recompute and split backward: a whole model gives none's losses and gradients bit for bit",
          "[model][recompute]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.arch);
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> v;
      v.push_back(std::make_unique<Gpt>(cfg, backend, kB, kT, nullptr, kMicro, holmes::DType::kF32, p));
      return v;
    });
  }
}

TEST_CASE("recompute and split backward: two pipeline stages (embedding W on the first, head W on the last)",
          "[model][recompute][pp]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.arch);
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> v;
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 0, 1), backend, kB, kT, nullptr, kMicro, holmes::DType::kF32, p));
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 1), backend, kB, kT, nullptr, kMicro, holmes::DType::kF32, p));
      return v;
    });
  }
}

TEST_CASE("recompute and split backward: emulated bf16 activations, GPT-2 and Llama", "[model][recompute][bf16]") {
  Backend backend = test::emulated_bf16_backend();
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.arch);
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> v;
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 0, 2), backend, kB, kT, nullptr, kMicro, holmes::DType::kBf16, p));
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 2), backend, kB, kT, nullptr, kMicro, holmes::DType::kBf16, p));
      return v;
    });
  }
}

TEST_CASE("recompute and split backward: tensor-parallel shards replay their sums in step", "[model][recompute][tp]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int tp = 2;
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.arch);
    std::vector<Outcome> ref(tp);
    for (const ActivationPolicy& p : kPolicies) {
      CAPTURE(describe(p));
      test::ThreadGroup group(tp);
      std::vector<Outcome> got(tp);
      std::vector<std::thread> threads;
      for (int r = 0; r < tp; ++r)
        threads.emplace_back([&, r] {
          test::ThreadComm comm(group, r);
          Gpt shard(cfg.shard(tp, r), backend, kB, kT, &comm, kMicro, holmes::DType::kF32, p);
          got[r] = train({&shard}, p);
        });
      for (auto& t : threads) t.join();
      for (int r = 0; r < tp; ++r) {
        if (p.recompute == Recompute::kNone && !p.split_backward) ref[r] = got[r];
        CHECK(got[r].losses == ref[r].losses);
        CHECK(got[r].grads == ref[r].grads);
      }
    }
  }
}

TEST_CASE("recompute: what a layer keeps per slot shrinks from none to selective to full", "[model][recompute]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.arch);
    auto layer = [&](Recompute r, bool split) {
      return Gpt(cfg, backend, kB, kT, nullptr, 1, holmes::DType::kF32, {r, split}).layer_slot_bytes();
    };
    const size_t N = size_t(kB) * kT, C = cfg.hidden;
    auto rounded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
    CHECK(layer(Recompute::kFull, false) == rounded(N * C * 4));  // its output only
    // selective: qkv, res2, the MLP's pre-activation, res3 (the CPU's attention keeps
    // probabilities: replayed).
    const size_t mlp_in = cfg.arch == "llama" ? 2 * cfg.local_mlp() : cfg.local_mlp();
    CHECK(layer(Recompute::kSelective, false) ==
          rounded(N * cfg.local_qkv() * 4) + 2 * rounded(N * C * 4) + rounded(N * mlp_in * 4));
    CHECK(layer(Recompute::kSelective, false) < layer(Recompute::kNone, false));
    // A split backward adds the GEMM output gradients: d(res3), d(res2), d(fch), d(qkv).
    CHECK(layer(Recompute::kFull, true) - layer(Recompute::kFull, false) ==
          2 * rounded(N * C * 4) + rounded(N * mlp_in * 4) + rounded(N * cfg.local_qkv() * 4));
  }
}

TEST_CASE("split backward: misuse is a logic error, and gradients are reported final during W only",
          "[model][recompute]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const GptConfig cfg = gpt2_config();
  const Batch b = test::make_batch(kB, kT, cfg.vocab, 3);
  Gpt one(cfg, backend, kB, kT);
  one.forward(b.tokens.data(), b.targets.data(), kB, kT);
  CHECK_THROWS_AS(one.backward(1.0f, Pass::kInput), std::logic_error);  // not built to split
  CHECK_THROWS_AS(one.backward_weights(), std::logic_error);

  Gpt split(cfg, backend, kB, kT, nullptr, 1, holmes::DType::kF32, {Recompute::kFull, true});
  std::vector<std::pair<size_t, size_t>> ranges;
  split.set_grad_ready_hook([&](size_t lo, size_t hi) { ranges.emplace_back(lo, hi); });
  split.forward(b.tokens.data(), b.targets.data(), kB, kT);
  split.backward(1.0f, Pass::kInput);
  CHECK(ranges.empty());
  // W reads this slot's kept gradients: a forward into it before W is refused.
  CHECK_THROWS_AS(split.forward(b.tokens.data(), b.targets.data(), kB, kT), std::logic_error);
  split.backward_weights();
  REQUIRE(!ranges.empty());
  size_t floor = split.num_params();
  for (const auto& [lo, hi] : ranges) {
    CHECK(hi == floor);
    floor = lo;
  }
  CHECK(floor == 0);
  CHECK_THROWS_AS(split.backward_weights(), std::logic_error);
}
