// FP8 on the GPU against its CPU twins (model/cpu/fp8_ops.hpp), through the parity harness
// (parity.hpp: outputs start as NaN poison, guards around every buffer), plus what needs no
// GPU: the host encoder against CUDA's own conversion functions (cuda_fp8.h, whose host
// versions emulate cvt.rn.satfinite), and the FP8 rules of validate_gemm / GemmRunner.
//
// Rows (GPU): amax, cast, cast-transpose and cast-back over aligned, odd and misaligned
// tensors, ordinary, huge (scale < 1), tiny (the scale clamped at 2^126), saturated
// (every value at the format's largest finite magnitude) and NaN-holding ones: codes, amax
// and inverse scales bit for bit. The FP8 GEMM (e4m3 x e4m3, e5m2 x e4m3, e4m3 x e5m2; bf16
// with bias, fp32 accumulating) against the twin's GEMM on the same codes: within one bf16
// rounding plus fp32 accumulation noise of sum |terms|. The FP8 linear layer forward and
// backward against the twin on aligned and odd shapes (the same FP8 / bf16 choice per GEMM),
// run twice for identical bits. Skips without a GPU.
#include <catch2/catch.hpp>
#include <cuda_fp8.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda/check.hpp"
#include "cuda/fp8_cast.hpp"
#include "cuda/gemm.hpp"
#include "cuda/matmul_fp8.hpp"
#include "cuda_test_util.hpp"
#include "gemm_reference.hpp"
#include "model/cpu/fp8_ops.hpp"
#include "parity.hpp"

using namespace holmes;
using namespace holmes::cuda::parity;
using holmes::cuda::test::gpu_or_skip;
using model::Fp8Format;

namespace {

__nv_fp8_interpretation_t kind_of(Fp8Format f) { return f == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2; }

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

TEST_CASE("fp8 host encoder and decoder match CUDA's conversions bit for bit", "[cuda][fp8]") {
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    INFO(model::fp8_format_name(f));
    for (int c = 0; c < 256; ++c) {
      const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), kind_of(f));
      const float want = __half2float(__half(h)), got = model::fp8_decode(std::uint8_t(c), f);
      INFO("code " << c);
      if (std::isnan(want))
        REQUIRE(std::isnan(got));
      else
        REQUIRE(std::memcmp(&want, &got, 4) == 0);
    }
    // Every sign, exponent and top 11 mantissa bits, with the low 12 bits at the patterns
    // that decide rounding: exact ties (0), just above and below them, and the extremes.
    std::size_t mismatches = 0, checked = 0;
    std::uint32_t first_bad = 0;
    for (std::uint32_t top = 0; top < (1u << 20); ++top)
      for (std::uint32_t low : {0x000u, 0x001u, 0x7FFu, 0x800u, 0x801u, 0xFFFu}) {
        const std::uint32_t bits = (top << 12) | low;
        const float x = from_bits(bits);
        const auto want = static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind_of(f)));
        if (model::fp8_encode(x, f) != want && mismatches++ == 0) first_bad = bits;
        ++checked;
      }
    INFO("first mismatch at float bits 0x" << std::hex << first_bad);
    CHECK(mismatches == 0);
    CHECK(checked == 6u << 20);
  }
}

TEST_CASE("validate_gemm: the FP8 rules, each named", "[cuda][fp8]") {
  using namespace holmes::cuda;
  GemmShape s;
  s.m = 32;
  s.n = 64;
  s.k = 48;
  s.ab_type = DType::kE4M3;
  s.c_type = DType::kBf16;
  CHECK_NOTHROW(validate_gemm(s));
  s.b_type = DType::kE5M2;
  CHECK_NOTHROW(validate_gemm(s));
  CHECK_THAT(describe(s), Catch::Contains("e4m3xe5m2->bf16"));
  const auto message_of = test::validate_message;
  GemmShape t = s;
  t.ab_type = DType::kE5M2;
  CHECK_THAT(message_of(t), Catch::Contains("e5m2 x e5m2"));
  t = s;
  t.b_type = DType::kBf16;
  CHECK_THAT(message_of(t), Catch::Contains("both A and B FP8"));
  t = s;
  t.trans_a = true;
  CHECK_THAT(message_of(t), Catch::Contains("trans_b true"));
  t = s;
  t.trans_b = false;
  CHECK_THAT(message_of(t), Catch::Contains("trans_b true"));
  t = s;
  t.k = 40;
  CHECK_THAT(message_of(t), Catch::Contains("k with FP8 = 40"));
  t = s;
  t.n = 60;  // 120 bytes of bf16
  CHECK_THAT(message_of(t), Catch::Contains("ldc with FP8 = 60"));
  t.c_type = DType::kF32;  // 240 bytes: fine
  CHECK_NOTHROW(validate_gemm(t));
  t.bias = true;
  CHECK_THAT(message_of(t), Catch::Contains("bias only with bf16 C"));
  t = s;
  t.batch = 2;
  t.stride_c = 32 * 64;
  CHECK_THAT(message_of(t), Catch::Contains("batch with FP8 = 2"));
  t = s;
  t.epilogue = GemmEpilogue::kGelu;
  CHECK_THAT(message_of(t), Catch::Contains("GELU epilogue with FP8"));
  t = s;
  t.c_type = DType::kE4M3;
  CHECK_THAT(message_of(t), Catch::Contains("c_type FP8"));
  GemmShape b16;
  b16.m = b16.n = b16.k = 8;
  b16.ab_type = DType::kBf16;
  b16.b_type = DType::kF32;
  CHECK_THAT(message_of(b16), Catch::Contains("b_type different"));
  b16.b_type.reset();
  b16.fp8_fast_accum = true;
  CHECK_THAT(message_of(b16), Catch::Contains("fp8_fast_accum without FP8"));
}

TEST_CASE("GemmRunner: FP8 goes through run_fp8 with both scales, checked before the GPU", "[cuda][fp8]") {
  using namespace holmes::cuda;
  GemmRunner runner;
  GemmShape s;
  s.m = 16;
  s.n = 16;
  s.k = 16;
  s.ab_type = DType::kE4M3;
  s.c_type = DType::kBf16;
  float fake[4];  // never dereferenced: the checks come first
  CHECK_THROWS_WITH(runner.run(fake, fake, fake, nullptr, s, 1.f, 0.f), Catch::Contains("use run_fp8"));
  CHECK_THROWS_WITH(runner.run_fp8(fake, fake, fake, nullptr, GemmScales{fake, nullptr}, s, 1.f, 0.f),
                    Catch::Contains("null FP8 scale pointer"));
  GemmShape plain = s;
  plain.ab_type = DType::kBf16;
  CHECK_THROWS_WITH(runner.run_fp8(fake, fake, fake, nullptr, GemmScales{fake, fake}, plain, 1.f, 0.f),
                    Catch::Contains("run_fp8 takes FP8 operands"));
  CHECK(runner.cached_plans() == 0);
}

// ---- GPU parity ----

namespace {

// Bit-exact comparison of two byte vectors: the row's error is the number of differing bytes.
void exact_row(Table& t, const std::string& op, const std::string& precision, const std::string& shape,
               const std::string& output, const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
               const std::string& guards) {
  double diff = got.size() == want.size() ? 0 : INFINITY;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) diff += got[i] != want[i];
  t.add({op, precision, shape, output, diff, 0, guards.empty() ? "" : output + ": " + guards});
}

// The bits of floats compared exactly (NaN == NaN when both are NaN).
void exact_float_row(Table& t, const std::string& op, const std::string& precision, const std::string& shape,
                     const std::string& output, const std::vector<float>& got, const std::vector<float>& want,
                     const std::string& guards) {
  double diff = got.size() == want.size() ? 0 : INFINITY;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i)
    diff += !(std::isnan(got[i]) && std::isnan(want[i])) && std::memcmp(&got[i], &want[i], 4) != 0;
  t.add({op, precision, shape, output, diff, 0, guards.empty() ? "" : output + ": " + guards});
}

template <class F>
void run_case(Table& t, const std::string& op, const std::string& precision, const std::string& shape, F f) {
  try {
    f();
  } catch (const std::exception& e) {
    t.fail(op, precision, shape, e.what());
  }
}

struct Tensor {
  const char* name;
  int rows, cols;
  float magnitude;  // normal(0, magnitude) values
  int special;      // 0 none, 1 saturated (every value +-max/scale), 2 a NaN, 3 an infinity
};

std::vector<model::bf16> make_values(const Tensor& s, unsigned seed, Fp8Format f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, s.magnitude);
  std::vector<model::bf16> v(std::size_t(s.rows) * s.cols);
  for (std::size_t i = 0; i < v.size(); ++i) {
    float x = d(gen);
    // Saturated: magnitudes that are exactly the format's largest value after scaling (a
    // power of two times it), alternating signs.
    if (s.special == 1) x = (i % 2 ? -1.0f : 1.0f) * model::fp8_max(f) * 0.25f;
    v[i] = model::float_to_bf16(x);
  }
  if (s.special == 2) v[v.size() / 2] = model::float_to_bf16(NAN);
  if (s.special == 3) v[v.size() / 3] = model::float_to_bf16(-INFINITY);
  return v;
}

std::string label(const Tensor& s) {
  return std::string(s.name) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
}

void cast_rows(Table& t, const Tensor& s, Fp8Format f) {
  const std::string p = model::fp8_format_name(f), shape = label(s);
  const std::size_t n = std::size_t(s.rows) * s.cols;
  const auto x = make_values(s, 40 + s.rows, f);
  float amax = 0, inv = 0;
  model::cpu::amax_forward(&amax, x.data(), n);
  std::vector<std::uint8_t> q(n), qt(n);
  model::cpu::cast_transpose_to_fp8(q.data(), qt.data(), &inv, x.data(), s.rows, s.cols, &amax, f);
  std::vector<model::bf16> back(n);
  model::cpu::cast_from_fp8(back.data(), q.data(), n, &inv, f);
  // Aligned, and shifted one element (2 bytes off for the bf16 input, 1 for the codes) to
  // take the scalar paths.
  for (int shift : {0, 1}) {
    const std::string sh = shape + (shift ? " +1" : "");
    run_case(t, "amax_forward", p, sh, [&] {
      auto g_x = placed(x, shift);
      auto g_amax = Guarded<float>::poisoned(1);
      cuda::amax_forward(g_amax.dev(), g_x.dev() + shift, n);
      exact_float_row(t, "amax_forward", p, sh, "amax", g_amax.download(), {amax}, g_amax.guards());
    });
    run_case(t, "cast_to_fp8", p, sh, [&] {
      auto g_x = placed(x, shift);
      Guarded<float> g_amax(std::vector<float>{amax});
      auto g_q = placed(std::vector<std::uint8_t>(n, kPoisonByte), shift);
      auto g_inv = Guarded<float>::poisoned(1);
      cuda::cast_to_fp8(g_q.dev() + shift, g_inv.dev(), g_x.dev() + shift, n, g_amax.dev(), f);
      const auto got = g_q.download();
      exact_row(t, "cast_to_fp8", p, sh, "out", {got.begin() + shift, got.end()}, q, g_q.guards());
      exact_float_row(t, "cast_to_fp8", p, sh, "scale_inv", g_inv.download(), {inv}, g_inv.guards());
    });
    run_case(t, "cast_from_fp8", p, sh, [&] {
      auto g_q = placed(q, shift);
      Guarded<float> g_inv(std::vector<float>{inv});
      auto g_back = placed(std::vector<model::bf16>(n, model::bf16{0xFFFF}), shift);
      cuda::cast_from_fp8(g_back.dev() + shift, g_q.dev() + shift, n, g_inv.dev(), f);
      const auto got = g_back.download();
      std::vector<float> gf(n), wf(n);  // exact values; any NaN equals any NaN
      for (std::size_t i = 0; i < n; ++i) gf[i] = model::bf16_to_float(got[i + shift]), wf[i] = model::bf16_to_float(back[i]);
      exact_float_row(t, "cast_from_fp8", p, sh, "out", gf, wf, g_back.guards());
    });
  }
  run_case(t, "cast_transpose_to_fp8", p, shape, [&] {
    Guarded<model::bf16> g_x(x);
    Guarded<float> g_amax(std::vector<float>{amax});
    auto g_q = Guarded<std::uint8_t>::poisoned(n), g_qt = Guarded<std::uint8_t>::poisoned(n);
    auto g_qt_only = Guarded<std::uint8_t>::poisoned(n);
    auto g_inv = Guarded<float>::poisoned(1);
    cuda::cast_transpose_to_fp8(g_q.dev(), g_qt.dev(), g_inv.dev(), g_x.dev(), s.rows, s.cols, g_amax.dev(), f);
    cuda::cast_transpose_to_fp8(nullptr, g_qt_only.dev(), nullptr, g_x.dev(), s.rows, s.cols, g_amax.dev(), f);
    exact_row(t, "cast_transpose_to_fp8", p, shape, "out", g_q.download(), q, g_q.guards());
    exact_row(t, "cast_transpose_to_fp8", p, shape, "out_t", g_qt.download(), qt, g_qt.guards());
    exact_row(t, "cast_transpose_to_fp8", p, shape, "out_t alone", g_qt_only.download(), qt, g_qt_only.guards());
    exact_float_row(t, "cast_transpose_to_fp8", p, shape, "scale_inv", g_inv.download(), {inv}, g_inv.guards());
  });
}

}  // namespace

TEST_CASE("fp8 casts match the CPU twin bit for bit: aligned, odd, misaligned, saturated, tiny, NaN",
          "[cuda][fp8]") {
  if (!gpu_or_skip()) return;
  Table t;
  const std::vector<Tensor> tensors = {
      {"aligned", 64, 128, 1.0f, 0}, {"odd", 37, 53, 1.0f, 0},     {"ragged", 5, 3, 1.0f, 0},
      {"huge", 33, 40, 3e30f, 0},    {"tiny", 33, 40, 1e-37f, 0},  {"saturated", 16, 48, 1.0f, 1},
      {"nan", 31, 17, 1.0f, 2},      {"inf", 31, 17, 1.0f, 3},     {"tall", 1030, 7, 1.0f, 0},
  };
  for (Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2})
    for (const Tensor& s : tensors) cast_rows(t, s, f);
  t.print();
  for (const Row& r : t.rows()) {
    INFO(format_row(r));
    CHECK(r.ok());
  }
}

namespace {

std::vector<std::uint8_t> random_codes(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& c : v) {
    c = static_cast<std::uint8_t>(gen() % 256);
    if ((c & 0x7F) >= 0x78) c &= 0x87;  // finite in both formats
  }
  return v;
}

// Error against the twin, scaled per element: `rounding` |want| for the output's one rounding
// (bf16: one unit in the last place is at most 2^-7 of the value; 0 for fp32) plus 2^-12 of
// the element's sum of |terms| (cancellation-proof) for the accumulation: Hopper's FP8 tensor
// cores keep about 14 bits in their partial sums between promotions to fp32, the twin sums in
// fp32 in another order. A wrong scale, format or transpose is off by far more. <= 1 passes.
double gemm_error(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& mag,
                  double rounding) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::fmax(worst, std::fabs(got[i] - want[i]) / (rounding * std::fabs(want[i]) + std::ldexp(mag[i], -12) + 1e-30));
  }
  return worst;
}

}  // namespace

TEST_CASE("fp8 GEMM matches the CPU twin: formats, bf16 with bias, fp32 accumulating", "[cuda][fp8]") {
  if (!gpu_or_skip()) return;
  using cuda::DType;
  Table t;
  cuda::GemmRunner runner;
  struct Case {
    int m, n, k;
    Fp8Format a, b;
  };
  const std::vector<Case> cases = {{64, 128, 96, Fp8Format::kE4M3, Fp8Format::kE4M3},
                                   {37, 24, 48, Fp8Format::kE5M2, Fp8Format::kE4M3},
                                   {5, 8, 16, Fp8Format::kE4M3, Fp8Format::kE5M2},
                                   {256, 64, 1024, Fp8Format::kE5M2, Fp8Format::kE4M3}};
  for (const Case& c : cases) {
    const std::string p = std::string(model::fp8_format_name(c.a)) + "x" + model::fp8_format_name(c.b);
    const std::string shape = "m" + std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k);
    const auto a = random_codes(std::size_t(c.m) * c.k, c.m), b = random_codes(std::size_t(c.n) * c.k, c.n + 1);
    std::vector<float> bias_f = cuda::test::random_floats(c.n, 3);
    const auto bias = store_as<model::bf16>(bias_f);
    const float sa = 0.125f, sb = 4.0f;
    // Magnitudes of the terms, for the tolerance.
    std::vector<double> mag(std::size_t(c.m) * c.n, 0);
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j)
        for (int q = 0; q < c.k; ++q)
          mag[std::size_t(i) * c.n + j] += std::fabs(double(model::fp8_decode(a[std::size_t(i) * c.k + q], c.a)) *
                                                     model::fp8_decode(b[std::size_t(j) * c.k + q], c.b) * sa * sb);
    cuda::GemmShape s;
    s.m = c.m;
    s.n = c.n;
    s.k = c.k;
    s.ab_type = c.a == Fp8Format::kE4M3 ? DType::kE4M3 : DType::kE5M2;
    s.b_type = c.b == Fp8Format::kE4M3 ? DType::kE4M3 : DType::kE5M2;
    run_case(t, "fp8_gemm", p, shape + " bf16+bias", [&] {
      std::vector<model::bf16> want(std::size_t(c.m) * c.n);
      model::cpu::fp8_gemm(want.data(), a.data(), c.a, sa, b.data(), c.b, sb, bias.data(), c.m, c.n, c.k, 1.0f);
      Guarded<std::uint8_t> g_a(a), g_b(b);
      Guarded<model::bf16> g_bias(bias);
      Guarded<float> g_sa(std::vector<float>{sa}), g_sb(std::vector<float>{sb});
      auto g_c = Guarded<model::bf16>::poisoned(want.size());
      cuda::GemmShape sb16 = s;
      sb16.c_type = DType::kBf16;
      sb16.bias = true;
      runner.run_fp8(g_c.dev(), g_a.dev(), g_b.dev(), g_bias.dev(), cuda::GemmScales{g_sa.dev(), g_sb.dev()}, sb16,
                     1.0f, 0.0f);
      std::vector<double> m2 = mag;
      for (int i = 0; i < c.m; ++i)
        for (int j = 0; j < c.n; ++j) m2[std::size_t(i) * c.n + j] += std::fabs(bias_f[j]);
      t.add({"fp8_gemm", p, shape + " bf16+bias", "c", gemm_error(g_c.values(), widened(want), m2, 1.0 / 128), 1.0,
             g_c.guards().empty() ? "" : "c: " + g_c.guards()});
    });
    run_case(t, "fp8_gemm", p, shape + " f32 beta=1", [&] {
      std::vector<float> c0 = cuda::test::random_floats(std::size_t(c.m) * c.n, 9), want = c0;
      model::cpu::fp8_gemm(want.data(), a.data(), c.a, sa, b.data(), c.b, sb, c.m, c.n, c.k, 1.0f, 1.0f);
      Guarded<std::uint8_t> g_a(a), g_b(b);
      Guarded<float> g_sa(std::vector<float>{sa}), g_sb(std::vector<float>{sb}), g_c(c0);
      cuda::GemmShape s32 = s;
      s32.c_type = DType::kF32;
      runner.run_fp8(g_c.dev(), g_a.dev(), g_b.dev(), nullptr, cuda::GemmScales{g_sa.dev(), g_sb.dev()}, s32, 1.0f,
                     1.0f);
      std::vector<double> m2 = mag;
      for (std::size_t i = 0; i < m2.size(); ++i) m2[i] += std::fabs(c0[i]);
      t.add({"fp8_gemm", p, shape + " f32 beta=1", "c", gemm_error(g_c.values(), widened(want), m2, 0.0), 1.0,
             g_c.guards().empty() ? "" : "c: " + g_c.guards()});
    });
  }
  t.print();
  for (const Row& r : t.rows()) {
    INFO(format_row(r));
    CHECK(r.ok());
  }
}

TEST_CASE("fp8 linear layer matches the CPU twin and repeats bit for bit", "[cuda][fp8]") {
  if (!gpu_or_skip()) return;
  Table t;
  cuda::GemmRunner runner;
  const model::Fp8Recipe recipe;
  struct Shape {
    int N, C, OC;
  };
  // aligned: every GEMM in FP8; odd: N = 37 (the weight gradient in bf16), C 48, OC 24 (the
  // input gradient in bf16); ragged: nothing fits, all bf16.
  for (const Shape s : {Shape{128, 256, 192}, Shape{37, 48, 24}, Shape{9, 20, 12}}) {
    const std::string shape = "N" + std::to_string(s.N) + " C" + std::to_string(s.C) + " OC" + std::to_string(s.OC);
    auto x = cuda::test::random_floats(std::size_t(s.N) * s.C, 1, -2, 2);
    auto w = cuda::test::random_floats(std::size_t(s.OC) * s.C, 2, -0.1f, 0.1f);
    auto dy = cuda::test::random_floats(std::size_t(s.N) * s.OC, 3, -1e-3f, 1e-3f);
    auto bias = cuda::test::random_floats(s.OC, 4);
    const auto x16 = store_as<model::bf16>(x), w16 = store_as<model::bf16>(w), dy16 = store_as<model::bf16>(dy),
               b16 = store_as<model::bf16>(bias);
    std::vector<model::bf16> out(std::size_t(s.N) * s.OC), dinp(std::size_t(s.N) * s.C);
    // Small starting gradients, so the accumulated products dominate dweight.
    std::vector<float> dw = cuda::test::random_floats(std::size_t(s.OC) * s.C, 5, -1e-2f, 1e-2f);
    std::vector<float> db = cuda::test::random_floats(s.OC, 6);
    const std::vector<float> dw0 = dw, db0 = db;
    model::cpu::fp8_matmul_forward(out.data(), x16.data(), w16.data(), b16.data(), s.N, s.C, s.OC, recipe);
    model::cpu::fp8_matmul_backward(dinp.data(), dw.data(), db.data(), dy16.data(), x16.data(), w16.data(), s.N, s.C,
                                    s.OC, recipe);
    run_case(t, "fp8_matmul", "e4m3/e5m2", shape, [&] {
      Guarded<model::bf16> g_x(x16), g_w(w16), g_dy(dy16), g_b(b16);
      std::vector<std::vector<std::uint8_t>> bits;
      for (int rep = 0; rep < 2; ++rep) {
        auto g_out = Guarded<model::bf16>::poisoned(out.size());
        auto g_dinp = Guarded<model::bf16>::poisoned(dinp.size());
        Guarded<float> g_dw(dw0), g_db(db0);
        cuda::fp8_matmul_forward(runner, g_out.dev(), g_x.dev(), g_w.dev(), g_b.dev(), s.N, s.C, s.OC, recipe);
        cuda::fp8_matmul_backward(runner, g_dinp.dev(), g_dw.dev(), g_db.dev(), g_dy.dev(), g_x.dev(), g_w.dev(), s.N,
                                  s.C, s.OC, recipe);
        if (rep == 0) {
          // The GPU and the twin quantise to the same codes; the GEMMs differ in how they
          // sum: bf16 outputs by one rounding (2^-7) plus the tensor cores' partial sums
          // (about 14 bits, times sum |terms| / |sum|, ~sqrt(k)): 2e-2 normalized; the fp32
          // weight gradient by the partial sums alone: 4e-3. A wrong scale, format or
          // transpose is off by O(1).
          t.compare("fp8_matmul_forward", "e4m3", shape, "out", g_out.values(), widened(out), 2e-2, g_out.guards());
          t.compare("fp8_matmul_backward", "e5m2", shape, "dinp", g_dinp.values(), widened(dinp), 2e-2,
                    g_dinp.guards());
          t.compare("fp8_matmul_backward", "e5m2", shape, "dweight", g_dw.values(), widened(dw), 4e-3, g_dw.guards());
          t.compare("fp8_matmul_backward", "e5m2", shape, "dbias", g_db.values(), widened(db), 1e-5, g_db.guards());
        }
        std::vector<std::uint8_t> b;
        auto append = [&](const auto& v) {
          const auto* p = reinterpret_cast<const std::uint8_t*>(v.data());
          b.insert(b.end(), p, p + v.size() * sizeof(v[0]));
        };
        append(g_out.download());
        append(g_dinp.download());
        append(g_dw.download());
        append(g_db.download());
        bits.push_back(std::move(b));
      }
      t.add({"fp8_matmul twice", "e4m3/e5m2", shape, "all bits", bits[0] == bits[1] ? 0.0 : 1.0, 0, ""});
    });
  }
  t.print();
  for (const Row& r : t.rows()) {
    INFO(format_row(r));
    CHECK(r.ok());
  }
}
