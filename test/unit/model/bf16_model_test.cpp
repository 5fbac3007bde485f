// The model's bf16 path (model/gpt.cpp: bf16 weight copy, bf16 activations, fp32 master
// weights, gradients and statistics, fp32 stage boundaries) run on the CPU through kernels
// that emulate bf16 storage: each bf16 op widens its inputs, runs the CPU's fp32 twin and
// rounds its outputs to bf16. So the model's bookkeeping is checked here without a GPU; the
// GPU's own bf16 kernels are checked against the CPU in test/unit/cuda.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "model/bf16.hpp"
#include "model/gpt.hpp"
#include "backends/backends.hpp"
#include "model_test_util.hpp"
#include "test/support/emulated_bf16.hpp"
#include "model/gpt2/gpt2.hpp"
#include "test/support/compare.hpp"

using namespace holmes::backends;
using namespace holmes::model;
using holmes::model::test::EmulatedBf16;
using holmes::model::test::emulated_bf16_backend;
using holmes::test::rel;

namespace {

struct Out {
  float loss;
  std::vector<float> grads;
};

Out step(Gpt& g, const test::Batch& b, int B, int T) {
  g.zero_grad();
  Out o;
  o.loss = g.forward(b.tokens.data(), b.targets.data(), B, T);
  g.backward();
  o.grads.assign(g.grads(), g.grads() + g.num_params());
  return o;
}

// Gradient agreement over the whole buffer: |a - b| / |b| in the L2 sense.
double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace

TEST_CASE("bf16 model path: loss and gradients track fp32, weights are read from the bf16 copy", "[model][bf16]") {
  const int B = 3, T = 13;
  const GptConfig cfg = gpt2::config(2, 32, 4, 101, 16);
  const test::Batch b = test::make_batch(B, T, cfg.vocab, 3);
  Backend cpu = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  Backend emu = emulated_bf16_backend();
  auto* counters = static_cast<EmulatedBf16*>(emu.kernels.get());

  Gpt full(cfg, cpu, B, T);
  Gpt half(cfg, emu, B, T, nullptr, 1, holmes::DType::kBf16);
  REQUIRE(half.precision() == holmes::DType::kBf16);
  full.init_weights(9);
  half.init_weights(9);
  REQUIRE(half.read_params() == full.read_params());  // fp32 master weights are the same
  const Out f = step(full, b, B, T);
  const Out h = step(half, b, B, T);
  CHECK(counters->bf16_calls > 0);
  INFO("fp32 loss " << f.loss << ", bf16 " << h.loss);
  CHECK(rel(h.loss, f.loss) < 2e-2);
  CHECK(rel(h.loss, f.loss) > 0);  // bf16 rounding must show: the copy is really bf16
  CHECK(rel_l2(h.grads, f.grads) < 5e-2);

  // Logits come back in fp32 from either precision.
  std::vector<float> lf(static_cast<size_t>(full.config().local_vocab())), lh(lf.size());
  full.forward(b.tokens.data(), nullptr, B, T);
  half.forward(b.tokens.data(), nullptr, B, T);
  full.read_logits(5, lf);
  half.read_logits(5, lh);
  for (size_t i = 0; i < static_cast<size_t>(cfg.vocab); ++i) CHECK(std::fabs(lh[i] - lf[i]) < 0.05 + 0.02 * std::fabs(lf[i]));

  // Changing the master weights changes nothing until params_updated() refreshes the copy.
  const float before = half.forward(b.tokens.data(), b.targets.data(), B, T);
  for (size_t i = 0; i < half.num_params(); ++i) half.params()[i] *= 0.5f;
  CHECK(half.forward(b.tokens.data(), b.targets.data(), B, T) == before);
  half.params_updated();
  CHECK(half.forward(b.tokens.data(), b.targets.data(), B, T) != before);
}

TEST_CASE("bf16 model path: two pipeline stages chained through bf16 boundaries match one stage", "[model][bf16][pp]") {
  const int B = 2, T = 7;
  const GptConfig cfg = gpt2::config(3, 20, 4, 37, 9);
  const test::Batch b = test::make_batch(B, T, cfg.vocab, 22);
  Backend emu = emulated_bf16_backend();
  Gpt whole(cfg, emu, B, T, nullptr, 1, holmes::DType::kBf16);
  Gpt s0(cfg.shard(1, 0, 0, 1), emu, B, T, nullptr, 1, holmes::DType::kBf16);
  Gpt s1(cfg.shard(1, 0, 1), emu, B, T, nullptr, 1, holmes::DType::kBf16);
  whole.init_weights(4);
  s0.init_weights(4);
  s1.init_weights(4);
  const Out w = step(whole, b, B, T);
  s0.zero_grad();
  s1.zero_grad();
  s0.forward_stage(b.tokens.data(), nullptr, nullptr, B, T);
  // The boundary carries the bf16 activations' bits, two per float: half of fp32's size
  // (B*T*C = 280 here, even; an odd size rounds up).
  const size_t n = size_t(B) * T * cfg.hidden;
  CHECK(s0.boundary_floats(B, T) == n / 2);
  CHECK(whole.boundary_floats(1, 1) == (size_t(cfg.hidden) + 1) / 2);
  Gpt f32(cfg.shard(1, 0, 0, 1), emu, B, T);
  CHECK(f32.boundary_floats(B, T) == n);
  s1.forward_stage(nullptr, s0.output(), b.targets.data(), B, T);
  // Same values, same kernels: the split is exact.
  CHECK(s1.loss() == w.loss);
  s1.backward();
  s0.backward_stage(s1.input_grad());
  // Layer 0 lives on stage 0, layers 1-2 and the head on stage 1: their gradients are the
  // whole model's, exactly (the tied wte is summed over both stages).
  for (const ParamTensor& t : s1.layout().tensors()) {
    if (t.name == "wte") continue;
    const ParamTensor& ref = whole.layout().at(t.name);
    for (size_t i = 0; i < t.numel; ++i) REQUIRE(s1.grads()[t.offset + i] == w.grads[ref.offset + i]);
  }
  const ParamTensor& wte0 = s0.layout().at("wte");
  const ParamTensor& wte1 = s1.layout().at("wte");
  const ParamTensor& wte = whole.layout().at("wte");
  for (size_t i = 0; i < wte.numel; ++i)
    CHECK(s0.grads()[wte0.offset + i] + s1.grads()[wte1.offset + i] == Approx(w.grads[wte.offset + i]).margin(1e-6));
}

TEST_CASE("bf16 needs a backend with bf16 kernels", "[model][bf16]") {
  Backend cpu = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  CHECK_THROWS_WITH(Gpt(gpt2::config(1, 16, 2, 50, 8), cpu, 2, 4, nullptr, 1, holmes::DType::kBf16),
                    Catch::Contains("backend cpu has no bf16 kernels"));
}

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN and infinities", "[model][bf16]") {
  CHECK(float_to_bf16(1.0f).bits == 0x3f80);
  CHECK(bf16_to_float(bf16{0x3f80}) == 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  CHECK(float_to_bf16(1.00390625f).bits == 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  CHECK(float_to_bf16(1.01171875f).bits == 0x3f82);
  CHECK(float_to_bf16(1.0f + 1.5f / 256).bits == 0x3f81);  // above half: up
  CHECK(float_to_bf16(-2.5f).bits == 0xc020);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  CHECK(std::isinf(bf16_to_float(float_to_bf16(INFINITY))));
  CHECK(bf16_to_float(float_to_bf16(3.4e38f)) == INFINITY);  // beyond bf16's largest finite value
  for (float x : {0.1f, -7.25f, 1e-20f, 65504.0f})
    CHECK(std::fabs(bf16_to_float(float_to_bf16(x)) - x) <= std::fabs(x) / 256);
}
