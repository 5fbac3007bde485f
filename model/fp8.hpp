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
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/dtype.hpp"

#if defined(__CUDACC__)
#define HOLMES_FP8_HD __host__ __device__
#else
#define HOLMES_FP8_HD
#endif

namespace holmes::model {

// The formats are the FP8 values of holmes::DType (common/dtype.hpp): every `DType f` below
// is DType::kE4M3 or DType::kE5M2 (is_fp8(f)); any other reads as E5M2.

// The facts of one format that encoding, decoding and scaling need.
struct Fp8Spec {
  int exponent_bits, mantissa_bits, bias;
  float max_finite;
  std::uint8_t max_code;  // the largest finite magnitude's code (sign bit clear)
};

HOLMES_FP8_HD inline Fp8Spec fp8_spec(DType f) {
  return f == DType::kE4M3 ? Fp8Spec{4, 3, 7, 448.0f, 0x7E} : Fp8Spec{5, 2, 15, 57344.0f, 0x7B};
}

HOLMES_FP8_HD inline float fp8_max(DType f) { return fp8_spec(f).max_finite; }

constexpr std::uint8_t kFp8NaN = 0x7F;  // the canonical NaN code of both formats

// ---- the codes (host) ----

inline float fp8_decode(std::uint8_t code, DType f) {
  const Fp8Spec s = fp8_spec(f);
  const bool negative = (code & 0x80) != 0;
  const int magnitude = code & 0x7F;
  const int exponent = magnitude >> s.mantissa_bits;
  const int mantissa = magnitude & ((1 << s.mantissa_bits) - 1);
  const int top = (1 << s.exponent_bits) - 1;
  float value;
  if (f == DType::kE4M3 && magnitude == 0x7F) {
    return NAN;
  } else if (f == DType::kE5M2 && exponent == top) {
    if (mantissa != 0) return NAN;
    value = INFINITY;
  } else if (exponent == 0) {  // subnormal: mantissa * 2^(1 - bias - M)
    value = std::ldexp(static_cast<float>(mantissa), 1 - s.bias - s.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<float>((1 << s.mantissa_bits) + mantissa), exponent - s.bias - s.mantissa_bits);
  }
  return negative ? -value : value;
}

// On the float's bits (a few integer operations, no floating-point rounding mode involved).
inline std::uint8_t fp8_encode(float x, DType f) {
  const Fp8Spec s = fp8_spec(f);
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 24) & 0x80);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return kFp8NaN;
  std::uint32_t max_bits;
  std::memcpy(&max_bits, &s.max_finite, sizeof max_bits);
  if (a >= max_bits) return sign | s.max_code;  // saturate (infinities too)
  const int M = s.mantissa_bits;
  const int e = static_cast<int>(a >> 23) - 127;  // floor(log2 |x|) for normal floats
  const int min_normal_exp = 1 - s.bias;
  std::uint32_t code;
  if (e >= min_normal_exp) {
    // Keep M of the 23 mantissa bits, rounding to nearest even on the bits (a carry moves
    // into the exponent by itself), then re-bias the exponent from 127 to the format's.
    const int drop = 23 - M;
    const std::uint32_t rounded = a + ((1u << (drop - 1)) - 1) + ((a >> drop) & 1u);
    code = (rounded >> drop) - (static_cast<std::uint32_t>(127 - s.bias) << M);
  } else {
    // Below the smallest normal: |x| in units of the smallest subnormal 2^(min_normal_exp - M),
    // q = m * 2^(e - 23 - min_normal_exp + M) with the implicit bit; rounded to nearest even.
    // (A float subnormal or a value under half the smallest subnormal gives 0; a q of 2^M is
    // the smallest normal, whose code is 2^M too.)
    const int shift = 23 + min_normal_exp - M - e;
    if (shift > 25 || (a >> 23) == 0) return sign;
    const std::uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    code = (m + ((1u << (shift - 1)) - 1) + ((m >> shift) & 1u)) >> shift;
  }
  // |x| < max_finite, and max_finite is a code, so rounding to nearest never passes it.
  return static_cast<std::uint8_t>(sign | code);
}

// The floats of a tensor of n values in the FP8 wire format of the pipeline boundary
// (Kernels::fp8_pack): [amax, 1/scale, the n codes four to a float].
inline std::size_t fp8_boundary_floats(std::size_t n) { return 2 + (n + 3) / 4; }

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
HOLMES_FP8_HD inline int fp8_scale_exponent(float amax, DType f) {
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
HOLMES_FP8_HD inline float fp8_scale(float amax, DType f) {
  if (!(amax <= FLT_MAX)) return fp8_bits_float(0x7FC00000u);
  return fp8_bits_float(static_cast<std::uint32_t>(fp8_scale_exponent(amax, f) + 127) << 23);
}
HOLMES_FP8_HD inline float fp8_scale_inv(float amax, DType f) {
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
