// 8-bit floating point as the FP8 GEMMs store it (OCP FP8, the formats of Hopper's tensor
// cores), and the per-tensor scale of the FP8 recipe (docs/cuda.md, "FP8").
//
//   E4M3 ("fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111 is
//                NaN; largest finite 448 (0x7E), smallest subnormal 2^-9.
//   E5M2:        1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like: S.11111.00 is
//                infinity, S.11111.xx (xx != 0) NaN; largest finite 57344 (0x7B), smallest
//                subnormal 2^-16.
//
// fp8_encode rounds to nearest, ties to even, and saturates every value beyond the largest
// finite one (infinities included) to it, keeping the sign: what the GPU's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) (PTX cvt.rn.satfinite) does. NaN becomes the
// canonical NaN 0x7F in both formats (the sign is dropped, as the GPU does). So the host
// twins see the very bytes the GPU's casts write; test/unit/cuda compares the two bit for bit.
//
// The scale of a tensor is a power of two chosen from its amax (largest |x|): the largest
// 2^e with amax * 2^e <= the format's largest finite value. Power-of-two scales make
// quantising (x * scale, then the cast) and unscaling (the GEMM's product times 1/scale)
// exact multiplications, so the only rounding is the cast itself, on the GPU and in the CPU
// twin alike. This header is also compiled by nvcc (C++17) for the scale, which the device
// computes from the amax it measured.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define HOLMES_FP8_HD __host__ __device__
#else
#define HOLMES_FP8_HD
#endif

namespace holmes::model {

enum class Fp8Format : std::uint8_t { kE4M3, kE5M2 };

inline const char* fp8_format_name(Fp8Format f) { return f == Fp8Format::kE4M3 ? "e4m3" : "e5m2"; }

// The facts of one format that encoding, decoding and scaling need.
struct Fp8Spec {
  int exponent_bits, mantissa_bits, bias;
  float max_finite;
  std::uint8_t max_code;  // the largest finite magnitude's code (sign bit clear)
};

HOLMES_FP8_HD inline Fp8Spec fp8_spec(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? Fp8Spec{4, 3, 7, 448.0f, 0x7E} : Fp8Spec{5, 2, 15, 57344.0f, 0x7B};
}

HOLMES_FP8_HD inline float fp8_max(Fp8Format f) { return fp8_spec(f).max_finite; }

constexpr std::uint8_t kFp8NaN = 0x7F;  // the canonical NaN code of both formats

// ---- the codes (host) ----

namespace detail {

// q rounded to the nearest integer, ties to even; q >= 0 and exact (a double holding a float
// times a power of two).
inline double round_half_even(double q) {
  const double whole = std::floor(q);
  const double frac = q - whole;  // exact: q has at most 24 significant bits
  if (frac > 0.5) return whole + 1;
  if (frac < 0.5) return whole;
  return std::fmod(whole, 2.0) == 0 ? whole : whole + 1;
}

}  // namespace detail

inline float fp8_decode(std::uint8_t code, Fp8Format f) {
  const Fp8Spec s = fp8_spec(f);
  const bool negative = (code & 0x80) != 0;
  const int magnitude = code & 0x7F;
  const int exponent = magnitude >> s.mantissa_bits;
  const int mantissa = magnitude & ((1 << s.mantissa_bits) - 1);
  const int top = (1 << s.exponent_bits) - 1;
  float value;
  if (f == Fp8Format::kE4M3 && magnitude == 0x7F) {
    return NAN;
  } else if (f == Fp8Format::kE5M2 && exponent == top) {
    if (mantissa != 0) return NAN;
    value = INFINITY;
  } else if (exponent == 0) {  // subnormal: mantissa * 2^(1 - bias - M)
    value = std::ldexp(static_cast<float>(mantissa), 1 - s.bias - s.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<float>((1 << s.mantissa_bits) + mantissa), exponent - s.bias - s.mantissa_bits);
  }
  return negative ? -value : value;
}

inline std::uint8_t fp8_encode(float x, Fp8Format f) {
  if (std::isnan(x)) return kFp8NaN;
  const Fp8Spec s = fp8_spec(f);
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= s.max_finite) return sign | s.max_code;  // saturate (infinities too)
  const int min_normal_exp = 1 - s.bias;
  int exp2 = 0;
  std::frexp(a, &exp2);  // a = m * 2^exp2, m in [0.5, 1): floor(log2 a) = exp2 - 1
  const int e = exp2 - 1;
  std::uint32_t code;
  if (a == 0 || e < min_normal_exp) {
    // Subnormal range: a in units of the smallest subnormal, rounded; a result of 2^M is the
    // smallest normal, whose code is exactly 2^M as well.
    code = static_cast<std::uint32_t>(detail::round_half_even(std::ldexp(a, s.bias - 1 + s.mantissa_bits)));
  } else {
    // a = q * 2^(e - M) with q in [2^M, 2^(M+1)); rounding q up to 2^(M+1) carries into the
    // exponent field by itself.
    const double q = detail::round_half_even(std::ldexp(a, s.mantissa_bits - e));
    code = (static_cast<std::uint32_t>(e + s.bias) << s.mantissa_bits) +
           static_cast<std::uint32_t>(q) - (1u << s.mantissa_bits);
  }
  // a < max_finite, and max_finite is a code, so rounding to nearest never passes it.
  return static_cast<std::uint8_t>(sign | code);
}

// ---- the scale (host and device) ----

// The bits of a float and back (memcpy: nvcc's C++17 has no std::bit_cast).
HOLMES_FP8_HD inline std::uint32_t fp8_float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
HOLMES_FP8_HD inline float fp8_bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The largest |exponent| of a scale: 2^126 and 2^-126 are both normal floats, so a scale and
// its inverse are exact, and a GPU that flushes subnormals keeps them.
constexpr int kFp8MaxScaleExponent = 126;

// The exponent e of the scale 2^e for a tensor whose largest magnitude is amax: the largest e
// with amax * 2^e <= fp8_max(f), clamped to +-kFp8MaxScaleExponent; 0 for amax == 0.
// Computed on the bits (no log2), so the host and the device agree exactly. amax must be
// finite and >= 0 (fp8_scale handles the rest).
HOLMES_FP8_HD inline int fp8_scale_exponent(float amax, Fp8Format f) {
  if (amax == 0.0f) return 0;
  const std::uint32_t a = fp8_float_bits(amax), m = fp8_float_bits(fp8_max(f));
  const int max_exp = static_cast<int>((m >> 23) & 0xFF) - 127;
  const std::uint32_t max_mantissa = m & 0x7FFFFFu;
  int e;
  if (((a >> 23) & 0xFF) == 0) {
    e = kFp8MaxScaleExponent;  // a subnormal amax: below 2^-126, so the clamp decides
  } else {
    const int amax_exp = static_cast<int>((a >> 23) & 0xFF) - 127;
    // amax * 2^e = 1.ma * 2^(amax_exp + e) <= 1.mm * 2^max_exp
    e = max_exp - amax_exp - ((a & 0x7FFFFFu) > max_mantissa ? 1 : 0);
  }
  return e > kFp8MaxScaleExponent ? kFp8MaxScaleExponent : e < -kFp8MaxScaleExponent ? -kFp8MaxScaleExponent : e;
}

// The factor that maps a tensor into the format's range before the cast (q = cast(x * scale))
// and its inverse, by which the GEMM multiplies its product. A non-finite amax (the tensor
// holds an infinity or a NaN) gives a NaN scale: the whole tensor then casts to NaN, so the
// step's loss turns NaN as it would in bf16 rather than the saturating cast hiding it.
HOLMES_FP8_HD inline float fp8_scale(float amax, Fp8Format f) {
  if (!(amax <= FLT_MAX)) return fp8_bits_float(0x7FC00000u);
  return fp8_bits_float(static_cast<std::uint32_t>(fp8_scale_exponent(amax, f) + 127) << 23);
}
HOLMES_FP8_HD inline float fp8_scale_inv(float amax, Fp8Format f) {
  if (!(amax <= FLT_MAX)) return fp8_bits_float(0x7FC00000u);
  return fp8_bits_float(static_cast<std::uint32_t>(127 - fp8_scale_exponent(amax, f)) << 23);
}

// The largest magnitude of n values as the amax kernels define it: the maximum of their
// absolute values' bit patterns, so any NaN wins (a NaN's magnitude bits exceed infinity's)
// and the result does not depend on the order of the values.
HOLMES_FP8_HD inline std::uint32_t fp8_magnitude_bits(float x) { return fp8_float_bits(x) & 0x7FFFFFFFu; }

// The shape rule of an FP8 GEMM C[m,n] = A[m,k] B[n,k]^T (both operands stored with k
// contiguous, cuBLASLt's "TN" that Hopper's FP8 kernels require), from cuBLASLt's
// requirements for FP8: k (A's and B's leading dimension, in bytes) a multiple of 16, and C's
// rows (n elements of c_bytes) a multiple of 16 bytes. Pointers must be 16-byte aligned. The
// GPU and the CPU twin both ask this, so they take the FP8 path (or the bf16 fallback) for
// the same GEMMs.
HOLMES_FP8_HD inline bool fp8_gemm_fits(long long m, long long n, long long k, int c_bytes) {
  return m > 0 && n > 0 && k > 0 && k % 16 == 0 && (n * c_bytes) % 16 == 0;
}

}  // namespace holmes::model
