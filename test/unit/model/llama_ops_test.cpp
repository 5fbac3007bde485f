// Llama's CPU ops (rmsnorm, rope, swiglu, grouped-query attention): backward against central
// finite differences of the forward, forward against direct double-precision formulas, with odd
// sizes beside aligned ones; grouped-query attention also against multi-head attention with
// the key/value heads repeated (what Hugging Face's repeat_kv does).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>

#include "backends/backends.hpp"
#include "test/unit/model/check_util.hpp"

using holmes::model::Kernels;
using holmes::model::test::check_gradient;
using holmes::model::test::probe;
using holmes::model::test::random_vec;

namespace {

std::unique_ptr<Kernels> kernels() { return holmes::backends::make_backend(holmes::backends::Device::kCpu).kernels; }

// The rotary table of Gpt (llama_block.cpp): (T, HS) = [cos | sin] of t * theta^(-2i/HS).
std::vector<float> rope_table(int T, int HS, double theta) {
  std::vector<float> cs(static_cast<size_t>(T) * HS);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < HS / 2; ++i) {
      const double a = t * std::pow(theta, -2.0 * i / HS);
      cs[t * HS + i] = static_cast<float>(std::cos(a));
      cs[t * HS + HS / 2 + i] = static_cast<float>(std::sin(a));
    }
  return cs;
}

}  // namespace

TEST_CASE("rmsnorm: forward is x / rms(x) * w, backward matches finite differences and accumulates",
          "[model][ops][llama]") {
  auto k = kernels();
  for (auto [N, C] : {std::pair{7, 20}, std::pair{8, 64}}) {
    CAPTURE(N, C);
    const float eps = 1e-5f;
    auto inp = random_vec(N * C, 31, 2.0f), w = random_vec(C, 32), wout = random_vec(N * C, 33);
    std::vector<float> out(N * C), rstd(N), dinp(N * C, 0.5f), dw(C, 0.25f);
    auto loss = [&] {
      k->rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
      return probe(out, wout);
    };
    loss();
    for (int n = 0; n < N; ++n) {
      double ms = 0;
      for (int c = 0; c < C; ++c) ms += double(inp[n * C + c]) * inp[n * C + c];
      const double r = 1.0 / std::sqrt(ms / C + eps);
      CHECK(rstd[n] == Approx(r).epsilon(1e-6));
      for (int c : {0, C - 1}) CHECK(out[n * C + c] == Approx(inp[n * C + c] * r * w[c]).epsilon(1e-5));
    }
    k->rmsnorm_backward(dinp.data(), dw.data(), wout.data(), inp.data(), w.data(), rstd.data(), N, C);
    for (auto& d : dinp) d -= 0.5f;  // both accumulated onto the values we seeded
    for (auto& d : dw) d -= 0.25f;
    check_gradient("dinp", inp, dinp, loss, 1e-2f, 2e-3);
    check_gradient("dweight", w, dw, loss);
  }
}

TEST_CASE("rope: Hugging Face's rotate-half on the first H heads of each row, backward is its transpose",
          "[model][ops][llama]") {
  auto k = kernels();
  // Rows of 3 heads of HS = 6 (stride 18 + 4 extra channels): heads 0, 1 rotate, head 2 and
  // the tail stay.
  const int B = 2, T = 5, H = 2, HS = 6, stride = 22;
  const auto cs = rope_table(T + 3, HS, 10000.0);  // more rows than T: only t < T are read
  auto x = random_vec(B * T * stride, 41), wout = random_vec(B * T * stride, 42);
  std::vector<float> out(x.size(), 7.0f);
  auto loss = [&] {
    std::fill(out.begin(), out.end(), 7.0f);
    k->rope_forward(out.data(), x.data(), cs.data(), B, T, H, HS, stride);
    return probe(out, wout);
  };
  loss();
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < stride; ++c) {
        const size_t i = (static_cast<size_t>(b) * T + t) * stride + c;
        if (c >= H * HS) {
          REQUIRE(out[i] == 7.0f);  // not touched
          continue;
        }
        // q_embed = q * cos + rotate_half(q) * sin, rotate_half(q) = [-q2, q1].
        const int h = c / HS, j = c % HS, half = HS / 2, p = j % half;
        const double angle = t * std::pow(10000.0, -2.0 * p / HS);
        const float* head = &x[(static_cast<size_t>(b) * T + t) * stride + h * HS];
        const double rot = j < half ? -head[j + half] : head[j - half];
        REQUIRE(out[i] == Approx(head[j] * std::cos(angle) + rot * std::sin(angle)).margin(1e-6));
      }
  std::vector<float> dx(x.size(), 0.0f);
  k->rope_backward(dx.data(), wout.data(), cs.data(), B, T, H, HS, stride);
  for (int r = 0; r < B * T; ++r)
    for (int c = H * HS; c < stride; ++c) dx[r * stride + c] = 0.0f;  // untouched: no gradient path
  std::vector<float> xs = x;
  check_gradient("dinp", x, dx, [&] {
    // Channels past H*HS do not flow through rope: probe only the rotated ones.
    std::vector<float> o(x.size(), 0.0f);
    k->rope_forward(o.data(), x.data(), cs.data(), B, T, H, HS, stride);
    double s = 0;
    for (int r = 0; r < B * T; ++r)
      for (int c = 0; c < H * HS; ++c) s += double(o[r * stride + c]) * wout[r * stride + c];
    return s;
  });
  // In place (as the model runs it) equals out of place; backward undoes forward.
  std::vector<float> y = xs;
  k->rope_forward(y.data(), y.data(), cs.data(), B, T, H, HS, stride);
  for (int r = 0; r < B * T; ++r)
    for (int c = 0; c < H * HS; ++c) REQUIRE(y[r * stride + c] == out[r * stride + c]);
  k->rope_backward(y.data(), y.data(), cs.data(), B, T, H, HS, stride);
  for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(xs[i]).margin(1e-6));
}

TEST_CASE("rope: a rotated query-key product depends on the distance of the positions only", "[model][ops][llama]") {
  // q.k after rotation at positions (t1, t2) equals the same q.k at (t1 + d, t2 + d): what
  // makes rotary embeddings relative.
  auto k = kernels();
  const int HS = 8, T = 12;
  const auto cs = rope_table(T, HS, 500000.0);
  const auto q = random_vec(HS, 43), key = random_vec(HS, 44);
  auto at = [&](const std::vector<float>& v, int t) {
    std::vector<float> rows(static_cast<size_t>(T) * HS, 0.0f), out(rows.size());
    std::copy(v.begin(), v.end(), rows.begin() + t * HS);
    k->rope_forward(out.data(), rows.data(), cs.data(), 1, T, 1, HS, HS);
    return std::vector<float>(out.begin() + t * HS, out.begin() + (t + 1) * HS);
  };
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
    return s;
  };
  const double base = dot(at(q, 5), at(key, 2));
  CHECK(dot(at(q, 9), at(key, 6)) == Approx(base).epsilon(1e-5));
  CHECK(dot(at(q, 3), at(key, 0)) == Approx(base).epsilon(1e-5));
  CHECK(std::fabs(dot(at(q, 5), at(key, 3)) - base) > 1e-4);  // another distance, another product
}

TEST_CASE("swiglu: silu(gate) * up, backward matches finite differences", "[model][ops][llama]") {
  auto k = kernels();
  for (auto [N, F] : {std::pair{7, 13}, std::pair{4, 64}}) {
    CAPTURE(N, F);
    auto inp = random_vec(N * 2 * F, 51, 2.0f), wout = random_vec(N * F, 52);
    std::vector<float> out(N * F), dinp(N * 2 * F);
    auto loss = [&] {
      k->swiglu_forward(out.data(), inp.data(), N, F);
      return probe(out, wout);
    };
    loss();
    for (int n : {0, N - 1})
      for (int i : {0, F - 1}) {
        const double g = inp[n * 2 * F + i], u = inp[n * 2 * F + F + i];
        CHECK(out[n * F + i] == Approx(g / (1 + std::exp(-g)) * u).epsilon(1e-5));
      }
    k->swiglu_backward(dinp.data(), inp.data(), wout.data(), N, F);
    check_gradient("dinp", inp, dinp, loss, 1e-3f);
  }
}

TEST_CASE("grouped-query attention: backward matches finite differences", "[model][ops][llama]") {
  auto k = kernels();
  for (auto [B, T, NH, KVH, HS] : {std::tuple{2, 7, 4, 2, 5}, std::tuple{1, 8, 3, 1, 4}}) {
    CAPTURE(B, T, NH, KVH, HS);
    const int C = NH * HS, W = (NH + 2 * KVH) * HS;
    auto qkv = random_vec(B * T * W, 53), wout = random_vec(B * T * C, 54);
    std::vector<float> out(B * T * C), att(B * NH * T * T), scratch(att.size()), dqkv(qkv.size());
    auto loss = [&] {
      k->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, KVH);
      return probe(out, wout);
    };
    loss();
    k->attention_backward(dqkv.data(), scratch.data(), wout.data(), qkv.data(), nullptr, att.data(), B, T, C, NH,
                          KVH);
    check_gradient("dqkv", qkv, dqkv, loss, 1e-2f, 1e-3, 2e-2, 1000);
  }
}

TEST_CASE("grouped-query attention equals multi-head attention on repeated key/value heads", "[model][ops][llama]") {
  auto k = kernels();
  const int B = 2, T = 9, NH = 6, KVH = 2, HS = 4, G = NH / KVH, C = NH * HS;
  const int W = (NH + 2 * KVH) * HS, W3 = 3 * C;
  auto qkv = random_vec(B * T * W, 55), dout = random_vec(B * T * C, 56);
  // The same heads in GPT-2's layout: q as is, key/value head g repeated for its G query heads.
  std::vector<float> mha(B * T * W3);
  for (int r = 0; r < B * T; ++r)
    for (int h = 0; h < NH; ++h)
      for (int i = 0; i < HS; ++i) {
        const float* row = &qkv[r * W];
        mha[r * W3 + h * HS + i] = row[h * HS + i];
        mha[r * W3 + C + h * HS + i] = row[C + (h / G) * HS + i];
        mha[r * W3 + 2 * C + h * HS + i] = row[C + KVH * HS + (h / G) * HS + i];
      }
  std::vector<float> o1(B * T * C), o2(o1.size()), att(B * NH * T * T), scratch(att.size());
  std::vector<float> d1(qkv.size()), d2(mha.size());
  k->attention_forward(o1.data(), att.data(), qkv.data(), B, T, C, NH, KVH);
  k->attention_backward(d1.data(), scratch.data(), dout.data(), qkv.data(), nullptr, att.data(), B, T, C, NH, KVH);
  std::vector<float> att2(att.size());
  k->attention_forward(o2.data(), att2.data(), mha.data(), B, T, C, NH, NH);
  k->attention_backward(d2.data(), scratch.data(), dout.data(), mha.data(), nullptr, att2.data(), B, T, C, NH, NH);
  for (size_t i = 0; i < o1.size(); ++i) REQUIRE(o1[i] == Approx(o2[i]).margin(1e-6));
  // dq alike; dk, dv of a key/value head = the sum over the query heads that repeat it.
  for (int r = 0; r < B * T; ++r)
    for (int g = 0; g < KVH; ++g)
      for (int i = 0; i < HS; ++i) {
        double dk = 0, dv = 0;
        for (int j = 0; j < G; ++j) {
          dk += d2[r * W3 + C + (g * G + j) * HS + i];
          dv += d2[r * W3 + 2 * C + (g * G + j) * HS + i];
        }
        REQUIRE(d1[r * W + C + g * HS + i] == Approx(dk).margin(1e-5));
        REQUIRE(d1[r * W + C + KVH * HS + g * HS + i] == Approx(dv).margin(1e-5));
      }
  for (int r = 0; r < B * T; ++r)
    for (int c = 0; c < C; ++c) REQUIRE(d1[r * W + c] == Approx(d2[r * W3 + c]).margin(1e-5));
}

TEST_CASE("llama ops repeat bit for bit", "[model][ops][llama]") {
  // The sums that cross threads (rmsnorm's dweight, attention's dk/dv over a group) run in a
  // fixed order.
  auto k = kernels();
  const int N = 64, C = 96, B = 2, T = 16, NH = 4, KVH = 2, HS = 8;
  const auto inp = random_vec(N * C, 61), w = random_vec(C, 62), dout = random_vec(N * C, 63);
  std::vector<float> rstd(N), out(N * C);
  k->rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, 1e-5f);
  std::vector<std::vector<float>> dw(2, std::vector<float>(C, 0.0f)), dx(2, std::vector<float>(N * C, 0.0f));
  for (int run = 0; run < 2; ++run)
    k->rmsnorm_backward(dx[run].data(), dw[run].data(), dout.data(), inp.data(), w.data(), rstd.data(), N, C);
  CHECK(std::memcmp(dw[0].data(), dw[1].data(), C * sizeof(float)) == 0);
  CHECK(std::memcmp(dx[0].data(), dx[1].data(), dx[0].size() * sizeof(float)) == 0);
  const int W = (NH + 2 * KVH) * HS, Cq = NH * HS;
  const auto qkv = random_vec(B * T * W, 64), dy = random_vec(B * T * Cq, 65);
  std::vector<float> o(B * T * Cq), att(B * NH * T * T), scratch(att.size());
  k->attention_forward(o.data(), att.data(), qkv.data(), B, T, Cq, NH, KVH);
  std::vector<std::vector<float>> dq(2, std::vector<float>(qkv.size()));
  for (int run = 0; run < 2; ++run)
    k->attention_backward(dq[run].data(), scratch.data(), dy.data(), qkv.data(), nullptr, att.data(), B, T, Cq, NH,
                          KVH);
  CHECK(std::memcmp(dq[0].data(), dq[1].data(), dq[0].size() * sizeof(float)) == 0);
}
