// Sharded models against the single-rank model: two tensor-parallel shards in threads with
// an in-process all-reduce, and two pipeline stages chained by hand, must give the same
// weights, loss and gradients as tp=1 with one stage.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <thread>

#include "backends/backends.hpp"
#include "test/unit/model/model_checks.hpp"
#include "test/unit/model/model_test_util.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes::backends;
using namespace holmes::model;
using holmes::model::test::Batch;
using namespace holmes::model::test;

namespace {

void check_tp(int tp, int layers, int C, int NH, int V) { check_tp_config(tp, gpt2::config(layers, C, NH, V, 9)); }

}  // namespace

TEST_CASE("tp=2 shards match tp=1: weights, loss and every gradient", "[model][tp]") {
  SECTION("V=37: the second vocabulary shard is all padding") { check_tp(2, 2, 20, 4, 37); }
  SECTION("V=100: both vocabulary shards hold real tokens") { check_tp(2, 2, 20, 4, 100); }
}

TEST_CASE("tp=4 shards match tp=1", "[model][tp]") { check_tp(4, 1, 32, 4, 300); }

TEST_CASE("two pipeline stages chained by hand match one stage", "[model][pp]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 7;
  GptConfig cfg = gpt2::config(3, 20, 4, 37, 9);
  Gpt full(cfg, backend, B, T);
  const Batch b = test::make_batch(B, T, cfg.vocab, 22);
  const Result ref = run_once(full, b, B, T);

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
  SECTION("untied head, grouped-query") { check_tp_config(2, llama::config(2, 24, 4, 2, 36, 100, 9)); }
  SECTION("tied head, multi-head") {
    GptConfig c = llama::config(1, 24, 4, 4, 40, 37, 9);
    c.tie_embeddings = true;
    c.finalize();
    check_tp_config(2, c);
  }
}

TEST_CASE("llama: tp=4 shards match tp=1", "[model][tp][llama]") {
  check_tp_config(4, llama::config(1, 32, 8, 4, 64, 300, 9));
}

TEST_CASE("llama: two pipeline stages chained by hand match one stage, untied head on the last", "[model][pp][llama]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 7;
  const GptConfig cfg = llama::config(3, 24, 4, 2, 36, 37, 9);
  Gpt full(cfg, backend, B, T);
  const Batch b = test::make_batch(B, T, cfg.vocab, 23);
  const Result ref = run_once(full, b, B, T);
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
