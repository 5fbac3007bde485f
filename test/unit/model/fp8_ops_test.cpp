// The host FP8 ops (model/cpu/fp8_ops.hpp) against what they promise: amax over the values,
// casts within half a code step of x * scale with nothing saturated, the transpose of the
// cast, exact round trips, the GEMM against a double-precision product of the decoded codes,
// and the FP8 linear layer against the exact (double) layer within the error the formats
// allow, with the bf16 fallback for shapes FP8 GEMMs cannot take.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fp8_ops.hpp"

using namespace holmes::model;

namespace {

std::vector<bf16> random_bf16(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<bf16> v(n);
  for (auto& x : v) x = float_to_bf16(d(gen));
  return v;
}

// Magnitudes uniform in [lo, hi) with random signs: no element near the subnormal floor of
// its tensor's scale, so the formats' relative error bounds hold element by element.
std::vector<bf16> random_signed(size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<bf16> v(n);
  for (auto& x : v) x = float_to_bf16(gen() % 2 ? d(gen) : -d(gen));
  return v;
}

std::vector<double> wide(const std::vector<bf16>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_float(v[i]);
  return out;
}

// Half the distance between neighbouring codes around |x| (relative 2^-(M+1) for normal
// values), in the scaled domain, plus half the smallest subnormal step.
double half_step(double scaled, Fp8Format f) {
  const int M = fp8_spec(f).mantissa_bits;
  return std::fabs(scaled) * std::ldexp(1.0, -(M + 1)) + std::ldexp(1.0, -fp8_spec(f).bias - M);
}

}  // namespace

TEST_CASE("fp8 amax: the largest magnitude, NaN wins, empty is 0", "[model][fp8]") {
  auto x = random_bf16(1000, 1);
  double want = 0;
  for (double v : wide(x)) want = std::fmax(want, std::fabs(v));
  float amax = -1;
  cpu::amax_forward(&amax, x.data(), x.size());
  CHECK(double(amax) == want);
  x[500] = float_to_bf16(-1e30f);
  cpu::amax_forward(&amax, x.data(), x.size());
  CHECK(amax == bf16_to_float(float_to_bf16(1e30f)));
  x[7] = float_to_bf16(NAN);
  cpu::amax_forward(&amax, x.data(), x.size());
  CHECK(std::isnan(amax));
  cpu::amax_forward(&amax, x.data(), 0);
  CHECK(amax == 0.0f);
}

TEST_CASE("fp8 casts: within half a step, amax in the top binade, transposes, exact round trip",
          "[model][fp8]") {
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    // Ordinary, huge (scale < 1) and tiny (scale > 2^100) tensors; 37 x 53 is odd both ways.
    // 1e-37: the scale clamps at 2^126 and amax stays below the top binade.
    for (float magnitude : {1.0f, 3e30f, 1e-33f, 1e-37f}) {
      INFO(fp8_format_name(f) << " magnitude " << magnitude);
      const int rows = 37, cols = 53;
      const auto x = random_bf16(size_t(rows) * cols, 2, magnitude);
      float amax = 0, scale_inv = 0, scale_inv_t = 0;
      cpu::amax_forward(&amax, x.data(), x.size());
      std::vector<std::uint8_t> q(x.size()), q2(x.size()), qt(x.size());
      cpu::cast_to_fp8(q.data(), &scale_inv, x.data(), x.size(), &amax, f);
      cpu::cast_transpose_to_fp8(q2.data(), qt.data(), &scale_inv_t, x.data(), rows, cols, &amax, f);
      CHECK(q == q2);
      CHECK(scale_inv == scale_inv_t);
      const double scale = 1.0 / scale_inv;
      CHECK(scale == double(fp8_scale(amax, f)));
      double largest = 0;
      bool all_close = true;
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
          const size_t i = size_t(r) * cols + c;
          CHECK(qt[size_t(c) * rows + r] == q[i]);
          const double xs = double(bf16_to_float(x[i])) * scale, got = fp8_decode(q[i], f);
          all_close = all_close && std::fabs(got - xs) <= half_step(xs, f);
          largest = std::fmax(largest, std::fabs(got));
        }
      CHECK(all_close);
      // The largest element lands in [max/2, max]: the scale wastes no binade, saturates nothing.
      CHECK(largest <= fp8_max(f));
      if (fp8_scale_exponent(amax, f) < kFp8MaxScaleExponent) CHECK(largest >= fp8_max(f) / 2);
      // Back to bf16: every code times the inverse scale, exactly.
      std::vector<bf16> back(x.size());
      cpu::cast_from_fp8(back.data(), q.data(), q.size(), &scale_inv, f);
      for (size_t i = 0; i < q.size(); ++i)
        REQUIRE(double(bf16_to_float(back[i])) == double(fp8_decode(q[i], f)) * scale_inv);
    }
  }
}

TEST_CASE("fp8 casts: a NaN or an infinity in the tensor makes every code NaN", "[model][fp8]") {
  for (float poison : {NAN, INFINITY}) {
    auto x = random_bf16(64, 3);
    x[10] = float_to_bf16(poison);
    float amax = 0, scale_inv = 0;
    cpu::amax_forward(&amax, x.data(), x.size());
    std::vector<std::uint8_t> q(x.size());
    cpu::cast_to_fp8(q.data(), &scale_inv, x.data(), x.size(), &amax, Fp8Format::kE4M3);
    for (auto c : q) REQUIRE(c == kFp8NaN);
    CHECK(std::isnan(scale_inv));
  }
}

TEST_CASE("fp8 GEMM: decoded product in double, scales and bias applied", "[model][fp8]") {
  std::mt19937 gen(5);
  const int m = 13, n = 24, k = 48;
  std::vector<std::uint8_t> a(size_t(m) * k), b(size_t(n) * k);
  for (auto& c : a) c = std::uint8_t(gen() % 256);
  for (auto& c : b) c = std::uint8_t(gen() % 256);
  // Keep the codes finite (no NaN/inf codes), so the product is a number.
  for (auto& c : a) if ((c & 0x7F) >= 0x78) c &= 0x87;
  for (auto& c : b) if ((c & 0x7F) >= 0x78) c &= 0x87;
  const auto bias = random_bf16(n, 6);
  const float sa = 0.25f, sb = 1.0f / 1024;
  std::vector<bf16> c16(size_t(m) * n, float_to_bf16(NAN));
  std::vector<float> c32(size_t(m) * n, 1.5f);
  cpu::fp8_gemm(c16.data(), a.data(), Fp8Format::kE4M3, sa, b.data(), Fp8Format::kE5M2, sb, bias.data(), m, n, k, 1.0f);
  cpu::fp8_gemm(c32.data(), a.data(), Fp8Format::kE4M3, sa, b.data(), Fp8Format::kE5M2, sb, m, n, k, 2.0f, 1.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double t = double(fp8_decode(a[size_t(i) * k + p], Fp8Format::kE4M3)) *
                         fp8_decode(b[size_t(j) * k + p], Fp8Format::kE5M2);
        sum += t;
        mag += std::fabs(t);
      }
      const double want16 = sum * sa * sb + bf16_to_float(bias[j]);
      const double want32 = 2.0 * sum * sa * sb + 1.5;
      const double got16 = bf16_to_float(c16[size_t(i) * n + j]), got32 = c32[size_t(i) * n + j];
      // fp32 sums of exact products (at most k 2^-24 = 2^-18.4 of the magnitudes), then one
      // bf16 rounding (at most 2^-8 of the value).
      REQUIRE(std::fabs(got16 - want16) <= std::ldexp(std::fabs(want16), -8) + std::ldexp(mag * sa * sb, -18) + 1e-30);
      REQUIRE(std::fabs(got32 - want32) <= std::ldexp(2 * mag * sa * sb + 1.5, -18));
    }
  CHECK_THROWS_AS(cpu::fp8_gemm(c32.data(), a.data(), Fp8Format::kE5M2, 1, b.data(), Fp8Format::kE5M2, 1, m, n, k, 1, 0),
                  std::invalid_argument);
}

namespace {

// The linear layer in double on the bf16 inputs: the exact answer FP8 approximates.
struct Exact {
  std::vector<double> out, dinp, dweight;
  std::vector<double> out_mag, dinp_mag, dweight_mag;  // sums of |terms| (error scales)
};
Exact exact_linear(const std::vector<bf16>& x, const std::vector<bf16>& w, const std::vector<bf16>& dy, int N, int C,
                   int OC) {
  const auto X = wide(x), W = wide(w), D = wide(dy);
  Exact e;
  e.out.assign(size_t(N) * OC, 0);
  e.out_mag = e.out;
  e.dinp.assign(size_t(N) * C, 0);
  e.dinp_mag = e.dinp;
  e.dweight.assign(size_t(OC) * C, 0);
  e.dweight_mag = e.dweight;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o)
      for (int c = 0; c < C; ++c) {
        const double xw = X[size_t(n) * C + c] * W[size_t(o) * C + c];
        e.out[size_t(n) * OC + o] += xw, e.out_mag[size_t(n) * OC + o] += std::fabs(xw);
        const double dw = D[size_t(n) * OC + o] * W[size_t(o) * C + c];
        e.dinp[size_t(n) * C + c] += dw, e.dinp_mag[size_t(n) * C + c] += std::fabs(dw);
        const double dx = D[size_t(n) * OC + o] * X[size_t(n) * C + c];
        e.dweight[size_t(o) * C + c] += dx, e.dweight_mag[size_t(o) * C + c] += std::fabs(dx);
      }
  return e;
}

// Largest |got - want| / (rel * mag + bf16 rounding of want); <= 1 passes.
double worst(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& mag,
             double rel) {
  double w = 0;
  for (size_t i = 0; i < want.size(); ++i)
    w = std::fmax(w, std::fabs(got[i] - want[i]) / (rel * mag[i] + std::ldexp(std::fabs(want[i]), -8) + 1e-30));
  return w;
}

}  // namespace

TEST_CASE("fp8 linear layer: within the formats' error of the exact layer, bf16 for odd shapes",
          "[model][fp8]") {
  const Fp8Recipe recipe;
  // Aligned (every GEMM in FP8) and odd: N 37, C 48, OC 24 runs the forward in FP8, the
  // input gradient (k = OC = 24) and the weight gradient (k = N = 37) in bf16.
  struct Shape {
    int N, C, OC;
  };
  for (const Shape s : {Shape{64, 96, 48}, Shape{37, 48, 24}}) {
    INFO("N " << s.N << " C " << s.C << " OC " << s.OC);
    const auto x = random_signed(size_t(s.N) * s.C, 10, 0.25f, 1.0f);
    const auto w = random_signed(size_t(s.OC) * s.C, 11, 0.01f, 0.04f);
    const auto dy = random_signed(size_t(s.N) * s.OC, 12, 1e-4f, 1e-3f), bias = random_bf16(s.OC, 13);
    const Exact e = exact_linear(x, w, dy, s.N, s.C, s.OC);
    std::vector<bf16> out(size_t(s.N) * s.OC), dinp(size_t(s.N) * s.C);
    std::vector<float> dw(size_t(s.OC) * s.C, 0.5f), db(s.OC, 0.25f);
    cpu::fp8_matmul_forward(out.data(), x.data(), w.data(), bias.data(), s.N, s.C, s.OC, recipe);
    cpu::fp8_matmul_backward(dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), s.N, s.C, s.OC, recipe);
    std::vector<double> got_out = wide(out), got_dinp = wide(dinp), got_dw(dw.begin(), dw.end());
    for (int n = 0; n < s.N; ++n)
      for (int o = 0; o < s.OC; ++o) got_out[size_t(n) * s.OC + o] -= bf16_to_float(bias[o]);
    for (double& v : got_dw) v -= 0.5;
    // Each operand is off by at most half a step (2^-4 relative in E4M3, 2^-3 in E5M2; no
    // element is near its tensor's subnormal floor), so a product by (1 + ea)(1 + eb) - 1;
    // the bf16 fallbacks are far inside that.
    const double e4 = 1.0 / 16, e5 = 1.0 / 8;
    auto bound = [](double ea, double eb) { return (1 + ea) * (1 + eb) - 1 + 1e-6; };
    CHECK(worst(got_out, e.out, e.out_mag, bound(e4, e4)) <= 1.0);
    CHECK(worst(got_dinp, e.dinp, e.dinp_mag, bound(e4, e5)) <= 1.0);
    CHECK(worst(got_dw, e.dweight, e.dweight_mag, bound(e4, e5)) <= 1.0);
    // The bias gradient is the column sum of the bf16 gradient (not quantised).
    for (int o = 0; o < s.OC; ++o) {
      double sum = 0;
      for (int n = 0; n < s.N; ++n) sum += bf16_to_float(dy[size_t(n) * s.OC + o]);
      CHECK(std::fabs(db[o] - 0.25 - sum) <= 1e-6);
    }
    // FP8 is really in play (both shapes run the forward in FP8): most outputs differ from
    // the bf16 layer's.
    std::vector<bf16> plain(out.size());
    cpu::fp8_matmul_forward(plain.data(), x.data(), w.data(), nullptr, s.N, s.C, s.OC, recipe);
    std::vector<float> xf(x.size()), wf(w.size()), of(out.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_to_float(x[i]);
    for (size_t i = 0; i < w.size(); ++i) wf[i] = bf16_to_float(w[i]);
    cpu::matmul_forward(of.data(), xf.data(), wf.data(), nullptr, s.N, s.C, s.OC);
    size_t differ = 0;
    for (size_t i = 0; i < of.size(); ++i) differ += float_to_bf16(of[i]).bits != plain[i].bits;
    CHECK(differ > of.size() / 2);
  }
}

TEST_CASE("fp8 linear layer: shapes FP8 cannot take give the bf16 layer exactly", "[model][fp8]") {
  // C = 20, OC = 12, N = 9: no GEMM fits (k of 20, 12, 9 are not multiples of 16).
  const int N = 9, C = 20, OC = 12;
  const auto x = random_bf16(size_t(N) * C, 20), w = random_bf16(size_t(OC) * C, 21), dy = random_bf16(size_t(N) * OC, 22);
  std::vector<bf16> out(size_t(N) * OC), dinp(size_t(N) * C);
  std::vector<float> dw(size_t(OC) * C, 0.0f);
  cpu::fp8_matmul_forward(out.data(), x.data(), w.data(), nullptr, N, C, OC, Fp8Recipe{});
  cpu::fp8_matmul_backward(dinp.data(), dw.data(), nullptr, dy.data(), x.data(), w.data(), N, C, OC, Fp8Recipe{});
  std::vector<float> xf(x.size()), wf(w.size()), df(dy.size()), of(out.size()), dif(dinp.size()), dwf(dw.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_to_float(x[i]);
  for (size_t i = 0; i < w.size(); ++i) wf[i] = bf16_to_float(w[i]);
  for (size_t i = 0; i < dy.size(); ++i) df[i] = bf16_to_float(dy[i]);
  cpu::matmul_forward(of.data(), xf.data(), wf.data(), nullptr, N, C, OC);
  cpu::matmul_backward(dif.data(), dwf.data(), nullptr, df.data(), xf.data(), wf.data(), N, C, OC);
  for (size_t i = 0; i < of.size(); ++i) REQUIRE(out[i].bits == float_to_bf16(of[i]).bits);
  for (size_t i = 0; i < dif.size(); ++i) REQUIRE(dinp[i].bits == float_to_bf16(dif[i]).bits);
  for (size_t i = 0; i < dwf.size(); ++i) REQUIRE(dw[i] == dwf[i]);
}

TEST_CASE("fp8 recipe: text round trip, unknown or unsupported recipes refused", "[model][fp8]") {
  Fp8Recipe r;
  CHECK(recipe_text(r) == "e4m3/e5m2/current/head=bf16");
  CHECK(parse_fp8_recipe(recipe_text(r)) == r);
  r.backward = Fp8Format::kE4M3;
  r.lm_head = true;
  CHECK(parse_fp8_recipe(recipe_text(r)) == r);
  CHECK(describe(r).find("LM head fp8") != std::string::npos);
  for (const char* bad : {"", "e4m3/e5m2/current", "e5m2/e5m2/current/head=bf16", "e4m3/e5m2/delayed/head=bf16",
                          "e4m3/e5m2/current/head=fp16", "e4m3/e5m2/current/head=bf16/x"})
    CHECK_FALSE(parse_fp8_recipe(bad).has_value());
}
