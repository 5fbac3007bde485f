// Whole-model gradients against finite differences: for every tensor of the layout a random
// direction d, comparing (L(p + eps d) - L(p - eps d)) / 2eps with <grad, d>, plus single
// elements of a few tensors. Odd sizes (C=20, T=7, V=37) and aligned ones.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "common/errors.hpp"
#include "backends/backends.hpp"
#include "test/unit/model/check_util.hpp"
#include "test/unit/model/model_checks.hpp"
#include "test/unit/model/model_test_util.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes::backends;
using namespace holmes::model;
using holmes::model::test::Batch;
using namespace holmes::model::test;

namespace {

// Single elements of the first attention weight and of the embedding (llama: the key
// projection, whose heads serve a group, and the head).
const std::vector<std::string> kGpt2Singles = {"h.0.attn.c_attn.weight", "wpe"};
std::vector<std::string> llama_singles(const GptConfig& c) {
  return {"model.layers.0.self_attn.k_proj.weight", role_names(c).head};
}

}  // namespace

TEST_CASE("whole-model gradients, odd sizes C=20 T=7 V=37", "[model][gradcheck]") {
  check_model(gpt2::config(2, 20, 4, 37, 9), 2, 7, kGpt2Singles);
}

TEST_CASE("whole-model gradients, aligned sizes C=32 T=8 V=128", "[model][gradcheck]") {
  check_model(gpt2::config(2, 32, 4, 128, 8), 2, 8, kGpt2Singles);
}

TEST_CASE("llama whole-model gradients, odd sizes C=24 (HS 6) T=7 V=37 F=36, 4 query on 2 kv heads",
          "[model][gradcheck][llama]") {
  const GptConfig c = llama::config(2, 24, 4, 2, 36, 37, 9);
  check_model(c, 2, 7, llama_singles(c), 3e-3f);
}

TEST_CASE("llama whole-model gradients, aligned sizes C=32 T=8 V=128, multi-query, tied head",
          "[model][gradcheck][llama]") {
  GptConfig c = llama::config(2, 32, 4, 1, 64, 128, 8);
  c.tie_embeddings = true;
  c.finalize();
  check_model(c, 2, 8, llama_singles(c), 1e-3f);
}

TEST_CASE("gradient accumulation: two half-scaled micro-batches sum to their mean", "[model]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 5;
  GptConfig cfg = gpt2::config(1, 16, 2, 37, 8);
  Gpt gpt(cfg, backend, B, T);
  gpt.init_weights(9);
  const Batch b1 = test::make_batch(B, T, cfg.vocab, 1), b2 = test::make_batch(B, T, cfg.vocab, 2);
  gpt.zero_grad();
  gpt.forward(b1.tokens.data(), b1.targets.data(), B, T);
  gpt.backward(1.0f);
  std::vector<float> g1(gpt.grads(), gpt.grads() + gpt.num_params());
  gpt.zero_grad();
  gpt.forward(b2.tokens.data(), b2.targets.data(), B, T);
  gpt.backward(1.0f);
  std::vector<float> g2(gpt.grads(), gpt.grads() + gpt.num_params());
  gpt.zero_grad();
  gpt.forward(b1.tokens.data(), b1.targets.data(), B, T);
  gpt.backward(0.5f);
  gpt.forward(b2.tokens.data(), b2.targets.data(), B, T);
  gpt.backward(0.5f);
  int bad = 0;
  for (size_t i = 0; i < gpt.num_params(); ++i) {
    const float want = 0.5f * (g1[i] + g2[i]);
    if (std::fabs(gpt.grads()[i] - want) > 1e-6f + 1e-4f * std::fabs(want)) ++bad;
  }
  CHECK(bad == 0);
  CHECK_THROWS_AS(gpt.backward(), std::logic_error);  // a second backward of one forward
}

TEST_CASE("a shorter micro-batch than planned gives the same loss as a model planned for it", "[model]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  GptConfig cfg = gpt2::config(2, 20, 4, 37, 9);
  Gpt big(cfg, backend, 3, 9), exact(cfg, backend, 2, 7);
  big.init_weights(1);
  exact.init_weights(1);
  const Batch b = test::make_batch(2, 7, cfg.vocab, 5);
  CHECK(big.forward(b.tokens.data(), b.targets.data(), 2, 7) ==
        Approx(exact.forward(b.tokens.data(), b.targets.data(), 2, 7)).epsilon(1e-6));
  CHECK_THROWS_AS(exact.forward(b.tokens.data(), b.targets.data(), 3, 7), std::invalid_argument);
}

TEST_CASE("forward and backward are bitwise deterministic, bad token ids are user errors", "[model]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 2, T = 8;
  GptConfig cfg = gpt2::config(2, 32, 4, 100, 8);
  Gpt gpt(cfg, backend, B, T);
  gpt.init_weights(2);
  Batch b = test::make_batch(B, T, cfg.vocab, 6);
  std::vector<std::vector<float>> runs;
  for (int r = 0; r < 2; ++r) {
    gpt.zero_grad();
    gpt.forward(b.tokens.data(), b.targets.data(), B, T);
    gpt.backward();
    runs.emplace_back(gpt.grads(), gpt.grads() + gpt.num_params());
  }
  CHECK(runs[0] == runs[1]);
  b.tokens[5] = 100;
  CHECK_THROWS_WITH(gpt.forward(b.tokens.data(), b.targets.data(), B, T),
                    Catch::Contains("token id 100 at position 5") && Catch::Contains("[0, 100)"));
  b.tokens[5] = 1;
  b.targets[3] = -2;  // -1 is a target left out of the loss (data.mask_document_start); below is an error
  CHECK_THROWS_WITH(gpt.forward(b.tokens.data(), b.targets.data(), B, T),
                    Catch::Contains("target id -2 at position 3") && Catch::Contains("or -1"));
  b.targets[3] = -1;
  gpt.forward(b.tokens.data(), b.targets.data(), B, T);
  CHECK(gpt.losses()[3] == 0.0f);
}
