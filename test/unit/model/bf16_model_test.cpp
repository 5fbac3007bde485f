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
#include "model/registry/registry.hpp"
#include "model_test_util.hpp"

using namespace holmes::model;

namespace {

std::vector<float> wide(const bf16* p, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = bf16_to_float(p[i]);
  return v;
}

void narrow(bf16* out, const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16(v[i]);
}

// The CPU kernels, plus bf16 overloads that store in bf16 and compute in fp32.
class EmulatedBf16 final : public Kernels {
 public:
  explicit EmulatedBf16(Kernels& fp32) : k_(fp32) {}
  const char* name() const override { return "cpu-bf16-emulation"; }
  bool supports(Precision) const override { return true; }
  int bf16_calls = 0;

  // fp32: the CPU kernels.
  void embedding_forward(float* o, const int* t, const float* w, const float* p, int B, int T, int C, int vb, int Vl) override {
    k_.embedding_forward(o, t, w, p, B, T, C, vb, Vl);
  }
  void embedding_backward(float* dw, float* dp, const float* d, const int* t, int B, int T, int C, int vb, int Vl) override {
    k_.embedding_backward(dw, dp, d, t, B, T, C, vb, Vl);
  }
  void layernorm_forward(float* o, float* m, float* r, const float* i, const float* w, const float* b, int N, int C) override {
    k_.layernorm_forward(o, m, r, i, w, b, N, C);
  }
  void layernorm_backward(float* di, float* dw, float* db, const float* d, const float* i, const float* w,
                          const float* m, const float* r, int N, int C) override {
    k_.layernorm_backward(di, dw, db, d, i, w, m, r, N, C);
  }
  void matmul_forward(float* o, const float* i, const float* w, const float* b, int N, int C, int OC) override {
    k_.matmul_forward(o, i, w, b, N, C, OC);
  }
  void matmul_backward(float* di, float* dw, float* db, const float* d, const float* i, const float* w, int N, int C,
                       int OC) override {
    k_.matmul_backward(di, dw, db, d, i, w, N, C, OC);
  }
  void attention_forward(float* o, float* a, const float* q, int B, int T, int C, int NH) override {
    k_.attention_forward(o, a, q, B, T, C, NH);
  }
  void attention_backward(float* dq, float* s, const float* d, const float* q, const float* o, const float* a, int B,
                          int T, int C, int NH) override {
    k_.attention_backward(dq, s, d, q, o, a, B, T, C, NH);
  }
  void gelu_forward(float* o, const float* i, size_t n) override { k_.gelu_forward(o, i, n); }
  void gelu_backward(float* di, const float* i, const float* d, size_t n) override { k_.gelu_backward(di, i, d, n); }
  void residual_forward(float* o, const float* a, const float* b, size_t n) override { k_.residual_forward(o, a, b, n); }
  void residual_backward(float* da, float* db, const float* d, size_t n) override { k_.residual_backward(da, db, d, n); }
  void crossentropy_max_forward(float* m, const float* l, int N, int Vl, int vb, int V) override {
    k_.crossentropy_max_forward(m, l, N, Vl, vb, V);
  }
  void crossentropy_stats_forward(float* s, const float* l, const float* m, const int* t, int N, int Vl, int vb,
                                  int V) override {
    k_.crossentropy_stats_forward(s, l, m, t, N, Vl, vb, V);
  }
  void crossentropy_forward(float* o, const float* s, const float* m, int N) override { k_.crossentropy_forward(o, s, m, N); }
  void crossentropy_backward(float* dl, const float* l, const float* m, const float* s, const int* t, float d, int N,
                             int Vl, int vb, int V) override {
    k_.crossentropy_backward(dl, l, m, s, t, d, N, Vl, vb, V);
  }
  void mean_forward(float* m, const float* x, int N) override { k_.mean_forward(m, x, N); }
  void scale_forward(float* x, float s, size_t n) override { k_.scale_forward(x, s, n); }
  void sum_squares_forward(double* sq, const float* x, size_t n) override { k_.sum_squares_forward(sq, x, n); }
  void adamw_update(float* p, float* m, float* v, const float* g, size_t n, const AdamWStep& s) override {
    k_.adamw_update(p, m, v, g, n, s);
  }

  // bf16: widen, fp32 twin, round.
  void convert(bf16* out, const float* inp, size_t n) override {
    ++bf16_calls;
    narrow(out, std::vector<float>(inp, inp + n));
  }
  void convert(float* out, const bf16* inp, size_t n) override {
    ++bf16_calls;
    const auto v = wide(inp, n);
    std::copy(v.begin(), v.end(), out);
  }
  void embedding_forward(bf16* out, const int* tok, const bf16* wte, const bf16* wpe, int B, int T, int C, int vb,
                         int Vl) override {
    ++bf16_calls;
    std::vector<float> o(size_t(B) * T * C), w = wide(wte, size_t(Vl) * C);
    std::vector<float> p = wpe ? wide(wpe, size_t(T) * C) : std::vector<float>();
    k_.embedding_forward(o.data(), tok, w.data(), wpe ? p.data() : nullptr, B, T, C, vb, Vl);
    narrow(out, o);
  }
  void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tok, int B, int T, int C, int vb,
                          int Vl) override {
    ++bf16_calls;
    const auto d = wide(dout, size_t(B) * T * C);
    k_.embedding_backward(dwte, dwpe, d.data(), tok, B, T, C, vb, Vl);
  }
  void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b, int N,
                         int C) override {
    ++bf16_calls;
    std::vector<float> o(size_t(N) * C);
    const auto i = wide(inp, o.size()), ww = wide(w, C), bb = wide(b, C);
    k_.layernorm_forward(o.data(), mean, rstd, i.data(), ww.data(), bb.data(), N, C);
    narrow(out, o);
  }
  void layernorm_backward(bf16* dinp, float* dw, float* db, const bf16* dout, const bf16* inp, const bf16* w,
                          const float* mean, const float* rstd, int N, int C) override {
    ++bf16_calls;
    const size_t n = size_t(N) * C;
    auto di = wide(dinp, n);  // accumulates
    const auto d = wide(dout, n), i = wide(inp, n), ww = wide(w, C);
    k_.layernorm_backward(di.data(), dw, db, d.data(), i.data(), ww.data(), mean, rstd, N, C);
    narrow(dinp, di);
  }
  void matmul_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* b, int N, int C, int OC) override {
    ++bf16_calls;
    std::vector<float> o(size_t(N) * OC);
    const auto i = wide(inp, size_t(N) * C), ww = wide(w, size_t(OC) * C);
    const auto bb = b ? wide(b, OC) : std::vector<float>();
    k_.matmul_forward(o.data(), i.data(), ww.data(), b ? bb.data() : nullptr, N, C, OC);
    narrow(out, o);
  }
  void matmul_backward(bf16* dinp, float* dw, float* db, const bf16* dout, const bf16* inp, const bf16* w, int N,
                       int C, int OC) override {
    ++bf16_calls;
    std::vector<float> di(size_t(N) * C);
    const auto d = wide(dout, size_t(N) * OC), i = wide(inp, size_t(N) * C), ww = wide(w, size_t(OC) * C);
    k_.matmul_backward(dinp ? di.data() : nullptr, dw, db, d.data(), i.data(), ww.data(), N, C, OC);
    if (dinp) narrow(dinp, di);
  }
  void attention_forward(bf16* out, float* att, const bf16* qkv, int B, int T, int C, int NH) override {
    ++bf16_calls;
    std::vector<float> o(size_t(B) * T * C);
    const auto q = wide(qkv, size_t(B) * T * 3 * C);
    k_.attention_forward(o.data(), att, q.data(), B, T, C, NH);
    narrow(out, o);
  }
  void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                          const float* att, int B, int T, int C, int NH) override {
    ++bf16_calls;
    const size_t n = size_t(B) * T * C;
    std::vector<float> dq(3 * n);
    const auto d = wide(dout, n), q = wide(qkv, 3 * n), o = wide(out, n);
    k_.attention_backward(dq.data(), scratch, d.data(), q.data(), o.data(), att, B, T, C, NH);
    narrow(dqkv, dq);
  }
  void gelu_forward(bf16* out, const bf16* inp, size_t n) override {
    ++bf16_calls;
    std::vector<float> o(n);
    const auto i = wide(inp, n);
    k_.gelu_forward(o.data(), i.data(), n);
    narrow(out, o);
  }
  void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, size_t n) override {
    ++bf16_calls;
    std::vector<float> di(n);
    const auto i = wide(inp, n), d = wide(dout, n);
    k_.gelu_backward(di.data(), i.data(), d.data(), n);
    narrow(dinp, di);
  }
  void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n) override {
    ++bf16_calls;
    std::vector<float> o(n);
    const auto x = wide(a, n), y = wide(b, n);
    k_.residual_forward(o.data(), x.data(), y.data(), n);
    narrow(out, o);
  }
  void residual_backward(bf16* da, bf16* db, const bf16* dout, size_t n) override {
    ++bf16_calls;
    const auto d = wide(dout, n);
    auto x = da ? wide(da, n) : std::vector<float>(), y = db ? wide(db, n) : std::vector<float>();
    k_.residual_backward(da ? x.data() : nullptr, db ? y.data() : nullptr, d.data(), n);
    if (da) narrow(da, x);
    if (db) narrow(db, y);
  }
  void crossentropy_max_forward(float* m, const bf16* logits, int N, int Vl, int vb, int V) override {
    ++bf16_calls;
    const auto l = wide(logits, size_t(N) * Vl);
    k_.crossentropy_max_forward(m, l.data(), N, Vl, vb, V);
  }
  void crossentropy_stats_forward(float* s, const bf16* logits, const float* m, const int* t, int N, int Vl, int vb,
                                  int V) override {
    ++bf16_calls;
    const auto l = wide(logits, size_t(N) * Vl);
    k_.crossentropy_stats_forward(s, l.data(), m, t, N, Vl, vb, V);
  }
  void crossentropy_backward(bf16* dlogits, const bf16* logits, const float* m, const float* s, const int* t, float d,
                             int N, int Vl, int vb, int V) override {
    ++bf16_calls;
    auto l = wide(logits, size_t(N) * Vl);
    k_.crossentropy_backward(l.data(), l.data(), m, s, t, d, N, Vl, vb, V);
    narrow(dlogits, l);
  }

 private:
  Kernels& k_;
};

// A host backend whose kernels emulate bf16 (same memory as the CPU backend).
struct Emulated {
  Backend cpu = make_backend("cpu");
  std::unique_ptr<EmulatedBf16> kernels = std::make_unique<EmulatedBf16>(*cpu.kernels);
  Backend backend() {
    Backend b;
    b.device = "cpu";
    b.memory = std::move(cpu.memory);
    b.kernels = std::move(kernels);
    return b;
  }
};

double rel(double a, double b) { return std::fabs(a - b) / std::max(1e-12, std::fabs(b)); }

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
  const GptConfig cfg = GptConfig::gpt2(2, 32, 4, 101, 16);
  const test::Batch b = test::make_batch(B, T, cfg.vocab, 3);
  Backend cpu = make_backend("cpu");
  Emulated e;
  Backend emu = e.backend();
  auto* counters = static_cast<EmulatedBf16*>(emu.kernels.get());

  Gpt full(cfg, cpu, B, T);
  Gpt half(cfg, emu, B, T, nullptr, 1, Precision::kBf16);
  REQUIRE(half.precision() == Precision::kBf16);
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

TEST_CASE("bf16 model path: two pipeline stages chained through fp32 boundaries match one stage", "[model][bf16][pp]") {
  const int B = 2, T = 7;
  const GptConfig cfg = GptConfig::gpt2(3, 20, 4, 37, 9);
  const test::Batch b = test::make_batch(B, T, cfg.vocab, 22);
  Emulated e;
  Backend emu = e.backend();
  Gpt whole(cfg, emu, B, T, nullptr, 1, Precision::kBf16);
  Gpt s0(cfg.shard(1, 0, 0, 1), emu, B, T, nullptr, 1, Precision::kBf16);
  Gpt s1(cfg.shard(1, 0, 1), emu, B, T, nullptr, 1, Precision::kBf16);
  whole.init_weights(4);
  s0.init_weights(4);
  s1.init_weights(4);
  const Out w = step(whole, b, B, T);
  s0.zero_grad();
  s1.zero_grad();
  s0.forward_stage(b.tokens.data(), nullptr, nullptr, B, T);
  // The boundary is fp32 and holds bf16-representable values (the stage output rounded once).
  for (size_t i = 0; i < size_t(B) * T * cfg.hidden; ++i)
    REQUIRE(bf16_to_float(float_to_bf16(s0.output()[i])) == s0.output()[i]);
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
  Backend cpu = make_backend("cpu");
  CHECK_THROWS_WITH(Gpt(GptConfig::gpt2(1, 16, 2, 50, 8), cpu, 2, 4, nullptr, 1, Precision::kBf16),
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
