// The checks every architecture's whole model passes (gpt2, llama here; test/arch/gptj/ runs
// them on its own): gradients against finite differences, every activation policy against
// the model that keeps everything, tensor-parallel shards against the single model.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/backends.hpp"
#include "model/gpt.hpp"
#include "test/unit/model/check_util.hpp"
#include "test/unit/model/model_test_util.hpp"

namespace holmes::model::test {

// ---- gradients against finite differences ----
// For every tensor of the layout a random direction d, comparing (L(p + eps d) - L(p - eps d))
// / 2eps with <grad, d>, plus single elements of the tensors `singles` names.
inline double loss_of(Gpt& gpt, const Batch& b, int B, int T) {
  gpt.forward(b.tokens.data(), b.targets.data(), B, T);
  double s = 0;  // sum of per-position losses in double: finer than the float mean
  for (int i = 0; i < B * T; ++i) s += gpt.losses()[i];
  return s / (B * T);
}

// eps: the finite-difference step along a random unit-normal direction of a whole tensor.
// Llama's products of RMSNorm-scaled, rotated heads curve more over such a step than GPT-2's;
// its cases use a smaller one (the central difference's error is O(eps^2)).
inline void check_model(GptConfig cfg, int B, int T, const std::vector<std::string>& singles, float eps = 1e-2f) {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  Gpt gpt(cfg, backend, B, T);
  init_generic(gpt, 3);
  const Batch batch = make_batch(B, T, cfg.vocab, 4);
  gpt.zero_grad();
  const float loss = gpt.forward(batch.tokens.data(), batch.targets.data(), B, T);
  CHECK(std::isfinite(loss));
  gpt.backward();
  std::vector<float> grads(gpt.grads(), gpt.grads() + gpt.num_params());
  float* p = gpt.params();
  for (const ParamTensor& t : gpt.layout().tensors()) {
    auto dir = random_vec(t.numel, static_cast<uint32_t>(t.offset + 1));
    double ana = 0;
    for (size_t i = 0; i < t.numel; ++i) ana += static_cast<double>(grads[t.offset + i]) * dir[i];
    std::vector<float> saved(p + t.offset, p + t.offset + t.numel);
    for (size_t i = 0; i < t.numel; ++i) p[t.offset + i] = saved[i] + eps * dir[i];
    const double up = loss_of(gpt, batch, B, T);
    for (size_t i = 0; i < t.numel; ++i) p[t.offset + i] = saved[i] - eps * dir[i];
    const double down = loss_of(gpt, batch, B, T);
    std::copy(saved.begin(), saved.end(), p + t.offset);
    const double num = (up - down) / (2 * eps);
    INFO(t.name << ": numeric " << num << " analytic " << ana);
    CHECK(std::fabs(num - ana) <= 2e-4 + 3e-2 * std::fabs(ana));
  }
  // Single elements of the tensors `singles` names.
  for (const std::string& name : singles) {
    const ParamTensor& t = gpt.layout().at(name);
    std::vector<float> x(p + t.offset, p + t.offset + t.numel);
    std::vector<float> g(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    check_gradient(name, x, g, [&] {
      std::copy(x.begin(), x.end(), p + t.offset);
      return loss_of(gpt, batch, B, T);
    }, eps, 2e-4, 3e-2, 40);
  }
}

// ---- activation policies (model/activation_policy.hpp) ----
// The same losses and gradients bit for bit as the model that keeps everything and runs one
// backward pass (the replay runs the forward's own deterministic kernels, W runs the same
// GEMMs as the one pass, in the same accumulation order).
inline constexpr int kB = 2, kT = 7, kMicro = 3;

struct Outcome {
  std::vector<float> losses, grads;
};

inline const ActivationPolicy kPolicies[] = {
    {Recompute::kNone, false},  {Recompute::kSelective, false}, {Recompute::kFull, false},
    {Recompute::kNone, true},   {Recompute::kSelective, true},  {Recompute::kFull, true}};

inline std::string describe(const ActivationPolicy& p) {
  return std::string(recompute_name(p.recompute)) + (p.split_backward ? " + split backward" : "");
}

// kMicro micro-batches in flight at once, in a 1F1B-like order; a split backward runs each W
// later than its B, FIFO, as a zero-bubble schedule does: F0 F1 B0 F2 W0 B1 B2 W1 W2. With
// `whole_middle`, a split model runs micro-batch 1 as one pass (Pass::kAll, as a pipeline
// stage runs a W right behind its B) between split ones: F0 F1 B0 F2 W0 A1 B2 W2.
// `stages` are the pipeline stages of one model (first to last), chained through their
// boundaries.
inline Outcome train(std::vector<Gpt*> stages, const ActivationPolicy& policy, bool whole_middle = false) {
  const int V = stages.front()->config().vocab;
  std::vector<Batch> batches;
  for (int i = 0; i < kMicro; ++i) batches.push_back(make_batch(kB, kT, V, 40 + i));
  Outcome out;
  for (Gpt* g : stages) {
    init_generic(*g, 5);
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
inline void check_policies(const std::function<std::vector<std::unique_ptr<Gpt>>(const ActivationPolicy&)>& make) {
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

// ---- tensor-parallel shards ----
// Shards in threads with an in-process all-reduce must give the same weights, loss and
// gradients as tp=1 with one stage.
struct Result {
  float loss = 0;
  std::vector<float> params, grads;
  ParamLayout layout;
};

inline Result run_once(Gpt& gpt, const Batch& b, int B, int T) {
  init_generic(gpt, 11);
  gpt.zero_grad();
  Result r;
  r.loss = gpt.forward(b.tokens.data(), b.targets.data(), B, T);
  gpt.backward();
  r.params.assign(gpt.params(), gpt.params() + gpt.num_params());
  r.grads.assign(gpt.grads(), gpt.grads() + gpt.num_params());
  r.layout = gpt.layout();
  return r;
}

inline bool grads_close(float a, float b) { return std::fabs(a - b) <= 2e-6f + 2e-4f * std::fabs(b); }

// Every element of every full tensor: shards that hold it agree with the reference, and at
// least one shard holds it (split tensors: exactly one).
inline void compare_shards(const Result& ref, const std::vector<Result>& shards) {
  int bad_params = 0, bad_grads = 0, uncovered = 0;
  for (const ParamTensor& t : ref.layout.tensors()) {
    for (size_t i = 0; i < t.numel; ++i) {
      int holders = 0;
      for (const Result& s : shards) {
        const ParamTensor* st = s.layout.find(t.name);
        if (st == nullptr) continue;
        const int64_t off = ParamLayout::shard_offset(*st, static_cast<int64_t>(i));
        if (off < 0) continue;
        ++holders;
        bad_params += s.params[off] != ref.params[t.offset + i];
        if (!grads_close(s.grads[off], ref.grads[t.offset + i])) {
          if (++bad_grads <= 5) UNSCOPED_INFO(t.name << "[" << i << "] " << s.grads[off] << " vs " << ref.grads[t.offset + i]);
        }
      }
      uncovered += holders == 0;
    }
  }
  CHECK(bad_params == 0);
  CHECK(bad_grads == 0);
  CHECK(uncovered == 0);
}

// Runs `tp` shards of cfg in threads and compares them with the single model of the same Vp.
inline void check_tp_config(int tp, const GptConfig& cfg) {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 7, V = cfg.vocab;
  GptConfig single = cfg;
  single.padded_vocab = GptConfig::pad_vocab(V, tp);  // the shards derive the same Vp
  Gpt full(single, backend, B, T);
  const Batch b = make_batch(B, T, V, 21);
  const Result ref = run_once(full, b, B, T);

  ThreadGroup group(tp);
  std::vector<Result> shards(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      ThreadComm comm(group, r);
      Gpt shard(cfg.shard(tp, r), backend, B, T, &comm);
      shards[r] = run_once(shard, b, B, T);
    });
  }
  for (auto& t : threads) t.join();
  for (const Result& s : shards) {
    CHECK(s.loss == Approx(ref.loss).epsilon(1e-5));
    CHECK(s.layout.size() < ref.layout.size());
  }
  compare_shards(ref, shards);
}

}  // namespace holmes::model::test
