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
#include "test/unit/model/model_test_util.hpp"

using namespace holmes::model;
using holmes::model::test::Batch;

namespace {

constexpr int kB = 2, kT = 7, kMicro = 3;

struct Outcome {
  std::vector<float> losses, grads;
};

const ActivationPolicy kPolicies[] = {
    {Recompute::kNone, false},  {Recompute::kSelective, false}, {Recompute::kFull, false},
    {Recompute::kNone, true},   {Recompute::kSelective, true},  {Recompute::kFull, true}};

std::string describe(const ActivationPolicy& p) {
  return std::string(recompute_name(p.recompute)) + (p.split_backward ? " + split backward" : "");
}

// kMicro micro-batches in flight at once, in a 1F1B-like order; a split backward runs each W
// later than its B, FIFO, as a zero-bubble schedule does: F0 F1 B0 F2 W0 B1 B2 W1 W2. With
// `whole_middle`, a split model runs micro-batch 1 as one pass (Pass::kAll, as a pipeline
// stage runs a W right behind its B) between split ones: F0 F1 B0 F2 W0 A1 B2 W2.
// `stages` are the pipeline stages of one model (first to last), chained through their
// boundaries.
Outcome train(std::vector<Gpt*> stages, const ActivationPolicy& policy, bool whole_middle = false) {
  const int V = stages.front()->config().vocab;
  std::vector<Batch> batches;
  for (int i = 0; i < kMicro; ++i) batches.push_back(test::make_batch(kB, kT, V, 40 + i));
  Outcome out;
  for (Gpt* g : stages) {
    test::init_generic(*g, 5);
    g->params_updated();
    g->zero_grad();
  }
  auto fwd = [&](int i) {
    const float* act = nullptr;
    for (Gpt* g : stages) {
      g->set_slot(i);
      const bool first = g == stages.front(), last = g == stages.back();
      g->forward_stage(first ? batches[i].tokens.data() : nullptr, act, last ? batches[i].targets.data() : nullptr,
                       kB, kT);
      act = g->output();
    }
    out.losses.push_back(stages.back()->loss());
  };
  const Pass b_pass = policy.split_backward ? Pass::kInput : Pass::kAll;
  auto bwd = [&](int i, Pass pass) {
    const float* grad = nullptr;
    for (size_t s = stages.size(); s-- > 0;) {
      Gpt* g = stages[s];
      g->set_slot(i);
      if (s + 1 == stages.size())
        g->backward(1.0f / kMicro, pass);
      else
        g->backward_stage(grad, pass);
      grad = g->input_grad();
    }
  };
  auto wgt = [&](int i) {
    if (!policy.split_backward) return;
    for (Gpt* g : stages) {
      g->set_slot(i);
      g->backward_weights();
    }
  };
  if (whole_middle)
    fwd(0), fwd(1), bwd(0, b_pass), fwd(2), wgt(0), bwd(1, Pass::kAll), bwd(2, b_pass), wgt(2);
  else
    fwd(0), fwd(1), bwd(0, b_pass), fwd(2), wgt(0), bwd(1, b_pass), bwd(2, b_pass), wgt(1), wgt(2);
  for (Gpt* g : stages) out.grads.insert(out.grads.end(), g->grads(), g->grads() + g->num_params());
  return out;
}

// Every policy on `make(policy)`'s stages gives the losses and gradients of none, bit for bit.
void check_policies(const std::function<std::vector<std::unique_ptr<Gpt>>(const ActivationPolicy&)>& make) {
  auto run = [&](const ActivationPolicy& p, bool whole_middle = false) {
    auto owned = make(p);
    std::vector<Gpt*> stages;
    for (auto& g : owned) stages.push_back(g.get());
    return train(stages, p, whole_middle);
  };
  const Outcome ref = run(kPolicies[0]);
  REQUIRE(ref.losses.size() == kMicro);
  for (const ActivationPolicy& p : kPolicies)
    for (bool whole_middle : {false, true}) {
      if (whole_middle && !p.split_backward) continue;
      CAPTURE(describe(p), whole_middle);
      const Outcome got = run(p, whole_middle);
      CHECK(std::memcmp(got.losses.data(), ref.losses.data(), ref.losses.size() * sizeof(float)) == 0);
      REQUIRE(got.grads.size() == ref.grads.size());
      size_t differ = 0;
      for (size_t i = 0; i < ref.grads.size(); ++i)
        differ += std::memcmp(&got.grads[i], &ref.grads[i], sizeof(float)) != 0;
      CHECK(differ == 0);
    }
}

GptConfig gpt2_config() { return GptConfig::gpt2(3, 24, 4, 37, 9); }
GptConfig llama_config() { return GptConfig::llama(3, 24, 4, 2, 36, 37, 9); }

}  // namespace

TEST_CASE("recompute and split backward: a whole model gives none's losses and gradients bit for bit",
          "[model][recompute]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.is_llama());
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> v;
      v.push_back(std::make_unique<Gpt>(cfg, backend, kB, kT, nullptr, kMicro, Precision::kFp32, p));
      return v;
    });
  }
}

TEST_CASE("recompute and split backward: two pipeline stages (embedding W on the first, head W on the last)",
          "[model][recompute][pp]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.is_llama());
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> v;
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 0, 1), backend, kB, kT, nullptr, kMicro, Precision::kFp32, p));
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 1), backend, kB, kT, nullptr, kMicro, Precision::kFp32, p));
      return v;
    });
  }
}

TEST_CASE("recompute and split backward: emulated bf16 activations, GPT-2 and Llama", "[model][recompute][bf16]") {
  Backend backend = test::emulated_bf16_backend();
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.is_llama());
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> v;
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 0, 2), backend, kB, kT, nullptr, kMicro, Precision::kBf16, p));
      v.push_back(std::make_unique<Gpt>(cfg.shard(1, 0, 2), backend, kB, kT, nullptr, kMicro, Precision::kBf16, p));
      return v;
    });
  }
}

TEST_CASE("recompute and split backward: tensor-parallel shards replay their sums in step", "[model][recompute][tp]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int tp = 2;
  for (const GptConfig& cfg : {gpt2_config(), llama_config()}) {
    CAPTURE(cfg.is_llama());
    std::vector<Outcome> ref(tp);
    for (const ActivationPolicy& p : kPolicies) {
      CAPTURE(describe(p));
      test::ThreadGroup group(tp);
      std::vector<Outcome> got(tp);
      std::vector<std::thread> threads;
      for (int r = 0; r < tp; ++r)
        threads.emplace_back([&, r] {
          test::ThreadComm comm(group, r);
          Gpt shard(cfg.shard(tp, r), backend, kB, kT, &comm, kMicro, Precision::kFp32, p);
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
    CAPTURE(cfg.is_llama());
    auto layer = [&](Recompute r, bool split) {
      return Gpt(cfg, backend, kB, kT, nullptr, 1, Precision::kFp32, {r, split}).layer_slot_bytes();
    };
    const size_t N = size_t(kB) * kT, C = cfg.hidden;
    auto rounded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
    CHECK(layer(Recompute::kFull, false) == rounded(N * C * 4));  // its output only
    // selective: qkv, res2, the MLP's pre-activation, res3 (the CPU's attention keeps
    // probabilities: replayed).
    const size_t mlp_in = cfg.is_llama() ? 2 * cfg.local_mlp() : cfg.local_mlp();
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

  Gpt split(cfg, backend, kB, kT, nullptr, 1, Precision::kFp32, {Recompute::kFull, true});
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
