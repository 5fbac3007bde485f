// The CPU backend with bf16 kernels that emulate bf16 storage: each bf16 op widens its
// inputs, runs the CPU's fp32 twin and rounds its outputs to bf16 (round to nearest even,
// as the GPU stores). The model's and the trainer's bf16 bookkeeping (weight copy,
// activation buffers, fp32 stage boundaries, optimizer refresh, checkpoints) then runs on a
// machine without a GPU; the GPU's own bf16 kernels are checked against the CPU in
// test/unit/cuda.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "model/backend.hpp"
#include "model/bf16.hpp"
#include "backends/backends.hpp"

namespace holmes::model::test {

inline std::vector<float> wide(const bf16* p, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = bf16_to_float(p[i]);
  return v;
}

inline void narrow(bf16* out, const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16(v[i]);
}

// The first `cols` values of each of `rows` rows `stride` apart, rounded into out.
inline void narrow_heads(bf16* out, const std::vector<float>& v, int rows, int cols, int stride) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(r) * stride + c] = float_to_bf16(v[size_t(r) * stride + c]);
}

// The CPU kernels, plus bf16 overloads that store in bf16 and compute in fp32.
class EmulatedBf16 final : public Kernels {
 public:
  explicit EmulatedBf16(std::unique_ptr<Kernels> fp32) : own_(std::move(fp32)), k_(*own_) {}
  const char* name() const override { return "cpu-bf16-emulation"; }
  bool supports(holmes::DType p) const override { return p == holmes::DType::kF32 || p == holmes::DType::kBf16; }
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
  void attention_forward(float* o, float* a, const float* q, int B, int T, int C, int NH, int KVH) override {
    k_.attention_forward(o, a, q, B, T, C, NH, KVH);
  }
  void attention_backward(float* dq, float* s, const float* d, const float* q, const float* o, const float* a, int B,
                          int T, int C, int NH, int KVH) override {
    k_.attention_backward(dq, s, d, q, o, a, B, T, C, NH, KVH);
  }
  void rmsnorm_forward(float* o, float* r, const float* i, const float* w, int N, int C, float eps) override {
    k_.rmsnorm_forward(o, r, i, w, N, C, eps);
  }
  void rmsnorm_backward(float* di, float* dw, const float* d, const float* i, const float* w, const float* r, int N,
                        int C) override {
    k_.rmsnorm_backward(di, dw, d, i, w, r, N, C);
  }
  void rope_forward(float* o, const float* i, const float* cs, int B, int T, int H, int HS, int st) override {
    k_.rope_forward(o, i, cs, B, T, H, HS, st);
  }
  void rope_backward(float* di, const float* d, const float* cs, int B, int T, int H, int HS, int st) override {
    k_.rope_backward(di, d, cs, B, T, H, HS, st);
  }
  void swiglu_forward(float* o, const float* i, int N, int F) override { k_.swiglu_forward(o, i, N, F); }
  void swiglu_backward(float* di, const float* i, const float* d, int N, int F) override {
    k_.swiglu_backward(di, i, d, N, F);
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
  // qkv rows hold (NH + 2 KVH) heads of C / NH channels.
  static size_t qkv_size(int B, int T, int C, int NH, int KVH) { return size_t(B) * T * (NH + 2 * KVH) * (C / NH); }
  void attention_forward(bf16* out, float* att, const bf16* qkv, int B, int T, int C, int NH, int KVH) override {
    ++bf16_calls;
    std::vector<float> o(size_t(B) * T * C);
    const auto q = wide(qkv, qkv_size(B, T, C, NH, KVH));
    k_.attention_forward(o.data(), att, q.data(), B, T, C, NH, KVH);
    narrow(out, o);
  }
  void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                          const float* att, int B, int T, int C, int NH, int KVH) override {
    ++bf16_calls;
    const size_t n = size_t(B) * T * C, nq = qkv_size(B, T, C, NH, KVH);
    std::vector<float> dq(nq);
    const auto d = wide(dout, n), q = wide(qkv, nq), o = wide(out, n);
    k_.attention_backward(dq.data(), scratch, d.data(), q.data(), o.data(), att, B, T, C, NH, KVH);
    narrow(dqkv, dq);
  }
  void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* w, int N, int C, float eps) override {
    ++bf16_calls;
    std::vector<float> o(size_t(N) * C);
    const auto i = wide(inp, o.size()), ww = wide(w, C);
    k_.rmsnorm_forward(o.data(), rstd, i.data(), ww.data(), N, C, eps);
    narrow(out, o);
  }
  void rmsnorm_backward(bf16* dinp, float* dw, const bf16* dout, const bf16* inp, const bf16* w, const float* rstd,
                        int N, int C) override {
    ++bf16_calls;
    const size_t n = size_t(N) * C;
    auto di = wide(dinp, n);  // accumulates
    const auto d = wide(dout, n), i = wide(inp, n), ww = wide(w, C);
    k_.rmsnorm_backward(di.data(), dw, d.data(), i.data(), ww.data(), rstd, N, C);
    narrow(dinp, di);
  }
  // rope works in place on the rows (B*T of `stride`): widen them all, rotate, round back.
  void rope_forward(bf16* out, const bf16* inp, const float* cs, int B, int T, int H, int HS, int st) override {
    ++bf16_calls;
    auto x = wide(inp, size_t(B) * T * st);
    k_.rope_forward(x.data(), x.data(), cs, B, T, H, HS, st);
    narrow_heads(out, x, B * T, H * HS, st);
  }
  void rope_backward(bf16* dinp, const bf16* dout, const float* cs, int B, int T, int H, int HS, int st) override {
    ++bf16_calls;
    auto x = wide(dout, size_t(B) * T * st);
    k_.rope_backward(x.data(), x.data(), cs, B, T, H, HS, st);
    narrow_heads(dinp, x, B * T, H * HS, st);
  }
  void swiglu_forward(bf16* out, const bf16* inp, int N, int F) override {
    ++bf16_calls;
    std::vector<float> o(size_t(N) * F);
    const auto i = wide(inp, 2 * o.size());
    k_.swiglu_forward(o.data(), i.data(), N, F);
    narrow(out, o);
  }
  void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int N, int F) override {
    ++bf16_calls;
    std::vector<float> di(2 * size_t(N) * F);
    const auto i = wide(inp, di.size()), d = wide(dout, size_t(N) * F);
    k_.swiglu_backward(di.data(), i.data(), d.data(), N, F);
    narrow(dinp, di);
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
  std::unique_ptr<Kernels> own_;
  Kernels& k_;
};

// The CPU backend with kernels that emulate bf16 storage.
inline Backend emulated_bf16_backend() {
  Backend b = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  b.kernels = std::make_unique<EmulatedBf16>(std::move(b.kernels));
  return b;
}

}  // namespace holmes::model::test
