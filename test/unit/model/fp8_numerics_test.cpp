// model/fp8.hpp against brute force: every code decoded from its bit fields by an independent
// formula, every float encoded to the representable value nearest to it (found by scanning
// all 256 codes; ties to the even code; beyond the largest finite value, that value), and
// the scale against a loop over exponents in double precision.
#include "model/fp8.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace holmes::model;

namespace {

const Fp8Format kFormats[] = {Fp8Format::kE4M3, Fp8Format::kE5M2};

// The value of a code from the format's definition, written independently of fp8_decode:
// (-1)^s * 2^(E - bias) * (1 + M / 2^m), or for E == 0 2^(1 - bias) * M / 2^m.
double definition_value(int code, int ebits, int mbits, int bias) {
  const int s = code >> 7, E = (code >> mbits) & ((1 << ebits) - 1), M = code & ((1 << mbits) - 1);
  const double frac = double(M) / double(1 << mbits);
  const double v = E == 0 ? std::pow(2.0, 1 - bias) * frac : std::pow(2.0, E - bias) * (1 + frac);
  return s ? -v : v;
}

bool is_nan_code(int code, Fp8Format f) {
  const int mag = code & 0x7F;
  return f == Fp8Format::kE4M3 ? mag == 0x7F : (mag >> 2) == 0x1F && (mag & 3) != 0;
}
bool is_inf_code(int code, Fp8Format f) { return f == Fp8Format::kE5M2 && (code & 0x7F) == 0x7C; }

// The finite codes with their values.
struct Entry {
  int code;
  double value;
};
std::vector<Entry> finite_codes(Fp8Format f) {
  std::vector<Entry> out;
  for (int c = 0; c < 256; ++c)
    if (!is_nan_code(c, f) && !is_inf_code(c, f)) out.push_back({c, double(fp8_decode(std::uint8_t(c), f))});
  return out;
}

// The code nearest to x by a scan of every finite code: ties go to the code whose lowest
// mantissa bit is 0; |x| beyond the largest finite value saturates to it; zero keeps x's sign.
int brute_force_encode(float x, Fp8Format f) {
  if (std::isnan(x)) return kFp8NaN;
  const double max = fp8_max(f);
  const double xd = x;
  if (xd >= max) return fp8_spec(f).max_code;
  if (xd <= -max) return 0x80 | fp8_spec(f).max_code;
  int best = -1;
  double best_d = INFINITY;
  for (const Entry& e : finite_codes(f)) {
    if (e.value == 0 && (e.code & 0x80) != (std::signbit(x) ? 0x80 : 0)) continue;  // zero keeps the sign
    const double d = std::fabs(xd - e.value);
    if (d < best_d || (d == best_d && (e.code & 1) == 0)) best = e.code, best_d = d;
  }
  return best;
}

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

TEST_CASE("fp8 decode: every code against the format's definition", "[model][fp8]") {
  struct Def {
    Fp8Format f;
    int ebits, mbits, bias;
  };
  for (const Def d : {Def{Fp8Format::kE4M3, 4, 3, 7}, Def{Fp8Format::kE5M2, 5, 2, 15}}) {
    INFO(fp8_format_name(d.f));
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; ++c) {
      INFO("code " << c);
      const float v = fp8_decode(std::uint8_t(c), d.f);
      if (is_nan_code(c, d.f)) {
        CHECK(std::isnan(v));
        ++nans;
      } else if (is_inf_code(c, d.f)) {
        CHECK(std::isinf(v));
        CHECK((v < 0) == (c >= 128));
        ++infs;
      } else {
        CHECK(double(v) == definition_value(c, d.ebits, d.mbits, d.bias));
        CHECK(std::signbit(v) == (c >= 128));
      }
    }
    // E4M3 (fn): S.1111.111 only; E5M2: three NaN mantissas per sign, one infinity per sign.
    CHECK(nans == (d.f == Fp8Format::kE4M3 ? 2 : 6));
    CHECK(infs == (d.f == Fp8Format::kE4M3 ? 0 : 2));
  }
  CHECK(fp8_decode(0x7E, Fp8Format::kE4M3) == 448.0f);
  CHECK(fp8_decode(0x01, Fp8Format::kE4M3) == std::ldexp(1.0f, -9));
  CHECK(fp8_decode(0x7B, Fp8Format::kE5M2) == 57344.0f);
  CHECK(fp8_decode(0x01, Fp8Format::kE5M2) == std::ldexp(1.0f, -16));
  CHECK(fp8_max(Fp8Format::kE4M3) == 448.0f);
  CHECK(fp8_max(Fp8Format::kE5M2) == 57344.0f);
}

TEST_CASE("fp8 encode: codes round-trip, the largest finite value is the only saturation point", "[model][fp8]") {
  for (Fp8Format f : kFormats) {
    INFO(fp8_format_name(f));
    for (int c = 0; c < 256; ++c) {
      INFO("code " << c);
      const float v = fp8_decode(std::uint8_t(c), f);
      const std::uint8_t back = fp8_encode(v, f);
      if (is_nan_code(c, f)) {
        CHECK(back == kFp8NaN);
      } else if (is_inf_code(c, f)) {
        CHECK(back == ((c & 0x80) | fp8_spec(f).max_code));  // SATFINITE: infinities saturate
      } else {
        CHECK(int(back) == c);
        // decode(encode(decode(c))) == decode(c), -0 included (bits compared)
        const float again = fp8_decode(back, f);
        CHECK(std::memcmp(&v, &again, 4) == 0);
      }
    }
  }
}

TEST_CASE("fp8 encode: nearest code, ties to even, at every midpoint and its neighbours", "[model][fp8]") {
  for (Fp8Format f : kFormats) {
    INFO(fp8_format_name(f));
    std::vector<Entry> pos;
    for (const Entry& e : finite_codes(f))
      if (e.code < 0x80) pos.push_back(e);
    std::sort(pos.begin(), pos.end(), [](const Entry& a, const Entry& b) { return a.value < b.value; });
    std::vector<float> xs;
    for (size_t i = 0; i + 1 < pos.size(); ++i) {
      const float lo = float(pos[i].value), hi = float(pos[i + 1].value);
      const float mid = float((pos[i].value + pos[i + 1].value) / 2);  // exact: few significant bits
      for (float x : {lo, hi, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY),
                      std::nextafter(lo, INFINITY), std::nextafter(hi, 0.0f)})
        xs.push_back(x);
    }
    const float max = fp8_max(f);
    // Past the largest finite value: its midpoint with the next power-of-two step, beyond,
    // the float maximum, infinity; below the smallest subnormal: half of it (a tie with zero),
    // float subnormals.
    const float step = max - float(pos[pos.size() - 2].value);
    for (float x : {max + step / 2, std::nextafter(max, INFINITY), max * 2, 1e30f, FLT_MAX, INFINITY,
                    float(pos[1].value / 2), std::nextafter(float(pos[1].value / 2), INFINITY),
                    std::nextafter(float(pos[1].value / 2), 0.0f), from_bits(1), from_bits(0x007FFFFF), 0.0f})
      xs.push_back(x);
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> exponent(-30, 20), mantissa(1, 2);
    for (int i = 0; i < 20000; ++i) xs.push_back(std::ldexp(mantissa(gen), int(exponent(gen))));
    size_t checked = 0;
    for (float x : xs)
      for (float sx : {x, -x}) {
        INFO("x = " << sx);
        REQUIRE(int(fp8_encode(sx, f)) == brute_force_encode(sx, f));
        ++checked;
      }
    CHECK(checked > 40000);
    CHECK(fp8_encode(NAN, f) == kFp8NaN);
    CHECK(fp8_encode(-NAN, f) == kFp8NaN);
  }
  // Ties: 2^-10 is half of E4M3's smallest subnormal (to +0), 464 half-way from 448 to 480
  // (480 would be NaN's code: saturates to 448), 1.0625 between 1 (even) and 1.125.
  CHECK(fp8_encode(std::ldexp(1.0f, -10), Fp8Format::kE4M3) == 0x00);
  CHECK(fp8_encode(-std::ldexp(1.0f, -10), Fp8Format::kE4M3) == 0x80);
  CHECK(fp8_encode(464.0f, Fp8Format::kE4M3) == 0x7E);
  CHECK(fp8_encode(1.0625f, Fp8Format::kE4M3) == 0x38);
  CHECK(fp8_encode(1.1875f, Fp8Format::kE4M3) == 0x3A);  // between 1.125 (odd) and 1.25 (even)
}

TEST_CASE("fp8 scale: the largest power of two keeping amax finite, clamped, NaN for non-finite amax",
          "[model][fp8]") {
  auto brute = [](float amax, Fp8Format f) {
    int best = -kFp8MaxScaleExponent;
    for (int e = -kFp8MaxScaleExponent; e <= kFp8MaxScaleExponent; ++e)
      if (std::ldexp(double(amax), e) <= double(fp8_max(f))) best = e;
    return best;
  };
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> exponent(-140, 127), mantissa(1, 2);
  for (Fp8Format f : kFormats) {
    INFO(fp8_format_name(f));
    std::vector<float> amaxes = {1.0f, fp8_max(f), std::nextafter(fp8_max(f), INFINITY), std::nextafter(fp8_max(f), 0.f),
                                 fp8_max(f) / 2, 1e-30f, 1e-38f, from_bits(1), FLT_MAX, 3.0f, 0.875f};
    for (int i = 0; i < 5000; ++i) amaxes.push_back(std::ldexp(mantissa(gen), int(exponent(gen))));
    for (float a : amaxes) {
      INFO("amax = " << a);
      const int e = fp8_scale_exponent(a, f);
      REQUIRE(e == brute(a, f));
      const float s = fp8_scale(a, f), inv = fp8_scale_inv(a, f);
      CHECK(double(s) == std::ldexp(1.0, e));
      CHECK(double(inv) == std::ldexp(1.0, -e));
      CHECK(std::isnormal(s));
      CHECK(std::isnormal(inv));
      // amax lands in the format's range: at or below the maximum and, unless clamped,
      // above half of it (no wasted exponent).
      CHECK(double(a) * s <= fp8_max(f));
      if (e < kFp8MaxScaleExponent) CHECK(double(a) * s * 2 > fp8_max(f));
    }
    CHECK(fp8_scale(0.0f, f) == 1.0f);
    CHECK(fp8_scale_inv(0.0f, f) == 1.0f);
    CHECK(std::isnan(fp8_scale(INFINITY, f)));
    CHECK(std::isnan(fp8_scale(NAN, f)));
    CHECK(std::isnan(fp8_scale_inv(INFINITY, f)));
  }
  CHECK(fp8_scale(448.0f, Fp8Format::kE4M3) == 1.0f);
  CHECK(fp8_scale(449.0f, Fp8Format::kE4M3) == 0.5f);
  CHECK(fp8_scale(1.0f, Fp8Format::kE4M3) == 256.0f);  // 256 <= 448 < 512
  CHECK(fp8_scale(1.0f, Fp8Format::kE5M2) == 32768.0f);
}

TEST_CASE("fp8 magnitude bits order values by |x| and put NaN above infinity", "[model][fp8]") {
  CHECK(fp8_magnitude_bits(-3.0f) > fp8_magnitude_bits(2.0f));
  CHECK(fp8_magnitude_bits(INFINITY) > fp8_magnitude_bits(FLT_MAX));
  CHECK(fp8_magnitude_bits(NAN) > fp8_magnitude_bits(-INFINITY));
  CHECK(fp8_magnitude_bits(-0.0f) == 0u);
}

TEST_CASE("fp8 GEMM shape rule: k a multiple of 16, C rows a multiple of 16 bytes", "[model][fp8]") {
  CHECK(fp8_gemm_fits(1, 8, 16, 2));
  CHECK(fp8_gemm_fits(7, 4, 32, 4));
  CHECK_FALSE(fp8_gemm_fits(16, 8, 24, 2));   // k
  CHECK_FALSE(fp8_gemm_fits(16, 12, 32, 2));  // 24 bytes of bf16
  CHECK(fp8_gemm_fits(16, 12, 32, 4));        // 48 bytes of fp32
  CHECK_FALSE(fp8_gemm_fits(0, 8, 16, 2));
}
