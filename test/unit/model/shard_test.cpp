// Sharded models against the single-rank model: two tensor-parallel shards in threads with
// an in-process all-reduce, and two pipeline stages chained by hand, must give the same
// weights, loss and gradients as tp=1 with one stage.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <thread>

#include "backends/backends.hpp"
#include "test/unit/model/model_test_util.hpp"

using namespace holmes::backends;
using namespace holmes::model;
using holmes::model::test::Batch;

namespace {

struct Result {
  float loss = 0;
  std::vector<float> params, grads;
  ParamLayout layout;
};

Result run(Gpt& gpt, const Batch& b, int B, int T) {
  test::init_generic(gpt, 11);
  gpt.zero_grad();
  Result r;
  r.loss = gpt.forward(b.tokens.data(), b.targets.data(), B, T);
  gpt.backward();
  r.params.assign(gpt.params(), gpt.params() + gpt.num_params());
  r.grads.assign(gpt.grads(), gpt.grads() + gpt.num_params());
  r.layout = gpt.layout();
  return r;
}

bool close(float a, float b) { return std::fabs(a - b) <= 2e-6f + 2e-4f * std::fabs(b); }

// Every element of every full tensor: shards that hold it agree with the reference, and at
// least one shard holds it (split tensors: exactly one).
void compare_shards(const Result& ref, const std::vector<Result>& shards) {
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
        if (!close(s.grads[off], ref.grads[t.offset + i])) {
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
void check_tp_config(int tp, const GptConfig& cfg) {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 7, V = cfg.vocab;
  GptConfig single = cfg;
  single.padded_vocab = GptConfig::pad_vocab(V, tp);  // the shards derive the same Vp
  Gpt full(single, backend, B, T);
  const Batch b = test::make_batch(B, T, V, 21);
  const Result ref = run(full, b, B, T);

  test::ThreadGroup group(tp);
  std::vector<Result> shards(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      test::ThreadComm comm(group, r);
      Gpt shard(cfg.shard(tp, r), backend, B, T, &comm);
      shards[r] = run(shard, b, B, T);
    });
  }
  for (auto& t : threads) t.join();
  for (const Result& s : shards) {
    CHECK(s.loss == Approx(ref.loss).epsilon(1e-5));
    CHECK(s.layout.size() < ref.layout.size());
  }
  compare_shards(ref, shards);
}

void check_tp(int tp, int layers, int C, int NH, int V) { check_tp_config(tp, GptConfig::gpt2(layers, C, NH, V, 9)); }

}  // namespace

TEST_CASE("tp=2 shards match tp=1: weights, loss and every gradient", "[model][tp]") {
  SECTION("V=37: the second vocabulary shard is all padding") { check_tp(2, 2, 20, 4, 37); }
  SECTION("V=100: both vocabulary shards hold real tokens") { check_tp(2, 2, 20, 4, 100); }
}

TEST_CASE("tp=4 shards match tp=1", "[model][tp]") { check_tp(4, 1, 32, 4, 300); }

TEST_CASE("two pipeline stages chained by hand match one stage", "[model][pp]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 7;
  GptConfig cfg = GptConfig::gpt2(3, 20, 4, 37, 9);
  Gpt full(cfg, backend, B, T);
  const Batch b = test::make_batch(B, T, cfg.vocab, 22);
  const Result ref = run(full, b, B, T);

  const GptConfig c0 = cfg.shard(1, 0, 0, 1), c1 = cfg.shard(1, 0, 1);
  CHECK((c0.has_embedding && !c0.has_head && !c1.has_embedding && c1.has_head));
  Gpt s0(c0, backend, B, T), s1(c1, backend, B, T);
  test::init_generic(s0, 11);
  test::init_generic(s1, 11);
  s0.zero_grad();
  s1.zero_grad();
  s0.forward_stage(b.tokens.data(), nullptr, nullptr, B, T);
  s1.forward_stage(nullptr, s0.output(), b.targets.data(), B, T);
  CHECK(s1.loss() == Approx(ref.loss).epsilon(1e-6));
  s1.backward();
  s0.backward_stage(s1.input_grad());
  CHECK(s1.layout().at("wte").tied_copy);
  // The tied embedding's gradient is the sum of both stages' copies.
  const size_t w0 = s0.layout().at("wte").offset, w1 = s1.layout().at("wte").offset;
  const size_t n = s0.layout().at("wte").numel;
  for (size_t i = 0; i < n; ++i) s0.grads()[w0 + i] += s1.grads()[w1 + i];
  std::vector<Result> stages(2);
  for (int s = 0; s < 2; ++s) {
    Gpt& g = s == 0 ? s0 : s1;
    stages[s].params.assign(g.params(), g.params() + g.num_params());
    stages[s].grads.assign(g.grads(), g.grads() + g.num_params());
    stages[s].layout = g.layout();
  }
  // Stage 1 holds the same tied tensor: give it the summed gradient too.
  std::copy(stages[0].grads.begin() + w0, stages[0].grads.begin() + w0 + n, stages[1].grads.begin() + w1);
  compare_shards(ref, stages);
}

TEST_CASE("llama: tp=2 shards (query and key/value heads split) match tp=1", "[model][tp][llama]") {
  // 4 query heads on 2 key/value heads: each rank holds 2 query heads and their 1 kv head.
  SECTION("untied head, grouped-query") { check_tp_config(2, GptConfig::llama(2, 24, 4, 2, 36, 100, 9)); }
  SECTION("tied head, multi-head") {
    GptConfig c = GptConfig::llama(1, 24, 4, 4, 40, 37, 9);
    c.tie_embeddings = true;
    c.finalize();
    check_tp_config(2, c);
  }
}

TEST_CASE("llama: tp=4 shards match tp=1", "[model][tp][llama]") {
  check_tp_config(4, GptConfig::llama(1, 32, 8, 4, 64, 300, 9));
}

TEST_CASE("llama: two pipeline stages chained by hand match one stage, untied head on the last", "[model][pp][llama]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 7;
  const GptConfig cfg = GptConfig::llama(3, 24, 4, 2, 36, 37, 9);
  Gpt full(cfg, backend, B, T);
  const Batch b = test::make_batch(B, T, cfg.vocab, 23);
  const Result ref = run(full, b, B, T);
  const GptConfig c0 = cfg.shard(1, 0, 0, 1), c1 = cfg.shard(1, 0, 1);
  Gpt s0(c0, backend, B, T), s1(c1, backend, B, T);
  test::init_generic(s0, 11);
  test::init_generic(s1, 11);
  s0.zero_grad();
  s1.zero_grad();
  s0.forward_stage(b.tokens.data(), nullptr, nullptr, B, T);
  s1.forward_stage(nullptr, s0.output(), b.targets.data(), B, T);
  CHECK(s1.loss() == Approx(ref.loss).epsilon(1e-6));
  s1.backward();
  s0.backward_stage(s1.input_grad());
  // Untied: the embedding lives on the first stage only, the head on the last; nothing to sum.
  CHECK(s0.layout().find("lm_head.weight") == nullptr);
  CHECK(s1.layout().find("model.embed_tokens.weight") == nullptr);
  std::vector<Result> stages(2);
  for (int s = 0; s < 2; ++s) {
    Gpt& g = s == 0 ? s0 : s1;
    stages[s].params.assign(g.params(), g.params() + g.num_params());
    stages[s].grads.assign(g.grads(), g.grads() + g.num_params());
    stages[s].layout = g.layout();
  }
  compare_shards(ref, stages);
}
