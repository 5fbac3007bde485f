// Every CPU op: backward against central finite differences of its forward, with odd sizes
// (C=20, T=7, V=37) beside aligned ones.
#include <catch2/catch.hpp>

#include <memory>

#include "backends/backends.hpp"
#include "test/unit/model/check_util.hpp"

using holmes::model::Kernels;
using holmes::model::test::check_gradient;
using holmes::model::test::probe;
using holmes::model::test::random_vec;

namespace {
std::unique_ptr<Kernels> kernels() { return holmes::backends::make_backend(holmes::backends::Device::kCpu).kernels; }
}  // namespace

TEST_CASE("matmul backward matches finite differences", "[model][ops]") {
  auto k = kernels();
  for (auto [N, C, OC] : {std::tuple{7, 20, 13}, std::tuple{16, 32, 64}}) {
    auto inp = random_vec(N * C, 1), w = random_vec(OC * C, 2), b = random_vec(OC, 3);
    auto wout = random_vec(N * OC, 4);
    std::vector<float> out(N * OC), dinp(N * C), dw(OC * C, 0.f), db(OC, 0.f);
    auto loss = [&] { k->matmul_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC); return probe(out, wout); };
    k->matmul_backward(dinp.data(), dw.data(), db.data(), wout.data(), inp.data(), w.data(), N, C, OC);
    check_gradient("dinp", inp, dinp, loss);
    check_gradient("dweight", w, dw, loss);
    check_gradient("dbias", b, db, loss);
    // The weight and bias gradients accumulate: a second backward doubles them.
    auto dw2 = dw;
    k->matmul_backward(dinp.data(), dw2.data(), db.data(), wout.data(), inp.data(), w.data(), N, C, OC);
    CHECK(dw2[5] == Approx(2 * dw[5]));
  }
}

TEST_CASE("layernorm backward matches finite differences and accumulates into dinp", "[model][ops]") {
  auto k = kernels();
  for (auto [N, C] : {std::pair{7, 20}, std::pair{8, 64}}) {
    auto inp = random_vec(N * C, 5, 2.0f), w = random_vec(C, 6), b = random_vec(C, 7);
    auto wout = random_vec(N * C, 8);
    std::vector<float> out(N * C), mean(N), rstd(N), dinp(N * C, 0.5f), dw(C, 0.f), db(C, 0.f);
    auto loss = [&] {
      k->layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
      return probe(out, wout);
    };
    loss();
    k->layernorm_backward(dinp.data(), dw.data(), db.data(), wout.data(), inp.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
    for (auto& d : dinp) d -= 0.5f;  // it accumulated onto the 0.5 we seeded
    check_gradient("dinp", inp, dinp, loss, 1e-2f, 2e-3);
    check_gradient("dweight", w, dw, loss);
    check_gradient("dbias", b, db, loss);
  }
}

TEST_CASE("causal attention backward matches finite differences", "[model][ops]") {
  auto k = kernels();
  for (auto [B, T, C, NH] : {std::tuple{2, 7, 20, 4}, std::tuple{1, 8, 16, 2}}) {
    auto qkv = random_vec(B * T * 3 * C, 9);
    auto wout = random_vec(B * T * C, 10);
    std::vector<float> out(B * T * C), att(B * NH * T * T), scratch(B * NH * T * T), dqkv(B * T * 3 * C);
    auto loss = [&] { k->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, NH); return probe(out, wout); };
    loss();
    // Causality: row t of the probabilities sums to 1 and is 0 beyond t.
    CHECK(att[1] == 0.0f);
    double row = 0;
    for (int t2 = 0; t2 < T; ++t2) row += att[(T - 1) * T + t2];
    CHECK(row == Approx(1.0).epsilon(1e-5));
    k->attention_backward(dqkv.data(), scratch.data(), wout.data(), qkv.data(), nullptr, att.data(), B, T, C, NH, NH);
    check_gradient("dqkv", qkv, dqkv, loss, 1e-2f, 1e-3, 2e-2, 1000);
  }
}

TEST_CASE("gelu and residual backward match finite differences", "[model][ops]") {
  auto k = kernels();
  const size_t n = 37;
  auto x = random_vec(n, 11, 2.0f), y = random_vec(n, 12), wout = random_vec(n, 13);
  std::vector<float> out(n), dx(n);
  auto gelu_loss = [&] { k->gelu_forward(out.data(), x.data(), n); return probe(out, wout); };
  gelu_loss();
  CHECK(out[0] == Approx(0.5 * x[0] * (1 + std::tanh(0.7978845608 * (x[0] + 0.044715 * x[0] * x[0] * x[0])))).margin(1e-6));
  k->gelu_backward(dx.data(), x.data(), wout.data(), n);
  check_gradient("gelu dinp", x, dx, gelu_loss, 1e-3f);

  std::vector<float> da(n, 0.f), db(n, 1.f);
  auto res_loss = [&] { k->residual_forward(out.data(), x.data(), y.data(), n); return probe(out, wout); };
  k->residual_backward(da.data(), db.data(), wout.data(), n);
  for (auto& d : db) d -= 1.f;
  check_gradient("residual da", x, da, res_loss);
  check_gradient("residual db", y, db, res_loss);
}

TEST_CASE("embedding backward matches finite differences, shards split the vocabulary", "[model][ops]") {
  auto k = kernels();
  const int B = 2, T = 7, C = 20, V = 37, maxT = 9;
  std::vector<int> tokens(B * T);
  for (int i = 0; i < B * T; ++i) tokens[i] = (i * 11 + 3) % V;
  tokens[3] = tokens[9];  // a repeated token: its rows must accumulate
  auto wte = random_vec(V * C, 14), wpe = random_vec(maxT * C, 15), wout = random_vec(B * T * C, 16);
  std::vector<float> out(B * T * C), dwte(V * C, 0.f), dwpe(maxT * C, 0.f);
  auto loss = [&] {
    k->embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, 0, V);
    return probe(out, wout);
  };
  k->embedding_backward(dwte.data(), dwpe.data(), wout.data(), tokens.data(), B, T, C, 0, V);
  check_gradient("dwte", wte, dwte, loss, 1e-2f, 1e-3, 2e-2, 2000);
  check_gradient("dwpe", wpe, dwpe, loss);

  // Two vocabulary shards without positions sum to the full lookup without positions.
  std::vector<float> full(B * T * C), lo(B * T * C), hi(B * T * C);
  k->embedding_forward(full.data(), tokens.data(), wte.data(), nullptr, B, T, C, 0, V);
  k->embedding_forward(lo.data(), tokens.data(), wte.data(), nullptr, B, T, C, 0, 19);
  k->embedding_forward(hi.data(), tokens.data(), wte.data() + 19 * C, nullptr, B, T, C, 19, V - 19);
  for (size_t i = 0; i < full.size(); ++i) REQUIRE(lo[i] + hi[i] == full[i]);
}

TEST_CASE("cross-entropy over a padded vocabulary matches finite differences", "[model][ops]") {
  auto k = kernels();
  const int N = 7, V = 37, Vp = 128;
  auto logits = random_vec(N * Vp, 17, 3.0f);
  std::vector<int> targets(N);
  for (int n = 0; n < N; ++n) targets[n] = (n * 5 + 1) % V;
  targets[2] = V - 1;
  std::vector<float> row_max(N), stats(2 * N), losses(N), dlogits(N * Vp);
  auto loss = [&] {
    k->crossentropy_max_forward(row_max.data(), logits.data(), N, Vp, 0, V);
    k->crossentropy_stats_forward(stats.data(), logits.data(), row_max.data(), targets.data(), N, Vp, 0, V);
    k->crossentropy_forward(losses.data(), stats.data(), row_max.data(), N);
    double s = 0;
    for (float l : losses) s += l;
    return s;
  };
  loss();
  // Reference loss for row 0 in double, ignoring the padded columns.
  double z = 0, mx = -1e30;
  for (int v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(logits[v]));
  for (int v = 0; v < V; ++v) z += std::exp(logits[v] - mx);
  CHECK(losses[0] == Approx(std::log(z) + mx - logits[targets[0]]).epsilon(1e-5));
  k->crossentropy_backward(dlogits.data(), logits.data(), row_max.data(), stats.data(), targets.data(),
                           1.0f, N, Vp, 0, V);
  for (int v = V; v < Vp; ++v) REQUIRE(dlogits[v] == 0.0f);  // padding gets no gradient
  check_gradient("dlogits", logits, dlogits, loss, 1e-2f, 1e-3, 2e-2, 1000);
}
