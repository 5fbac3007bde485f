// FP8 amax, casts and GEMM on the host (cuda/fp8_cast.cu and cuda/gemm.cpp are the GPU twins).
#include <cblas.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include "model/cpu/fp8_ops.hpp"

namespace holmes::model::cpu {

namespace {

// Decoded values of the 256 codes of f, built once.
const std::array<float, 256>& decode_table(Fp8Format f) {
  static const auto make = [](Fp8Format g) {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = fp8_decode(static_cast<std::uint8_t>(c), g);
    return t;
  };
  static const std::array<float, 256> e4m3 = make(Fp8Format::kE4M3), e5m2 = make(Fp8Format::kE5M2);
  return f == Fp8Format::kE4M3 ? e4m3 : e5m2;
}

std::vector<float> decoded(const std::uint8_t* codes, size_t n, Fp8Format f) {
  const auto& t = decode_table(f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = t[codes[i]];
  return v;
}

// p[m,n] = a[m,k] b[n,k]^T in fp32 (the decoded values' products are exact in fp32).
std::vector<float> product(const std::uint8_t* a, Fp8Format af, const std::uint8_t* b, Fp8Format bf, int m, int n,
                           int k) {
  const auto av = decoded(a, size_t(m) * k, af), bv = decoded(b, size_t(n) * k, bf);
  std::vector<float> p(size_t(m) * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, av.data(), k, bv.data(), k, 0.0f, p.data(), n);
  return p;
}

void check_formats(Fp8Format af, Fp8Format bf) {
  if (af == Fp8Format::kE5M2 && bf == Fp8Format::kE5M2)
    throw std::invalid_argument("fp8_gemm: e5m2 x e5m2 has no FP8 GEMM; accepted: at least one e4m3 operand");
}

}  // namespace

void amax_forward(float* amax, const bf16* x, size_t n) {
  std::uint32_t best = 0;
  for (size_t i = 0; i < n; ++i) best = std::max(best, fp8_magnitude_bits(bf16_to_float(x[i])));
  *amax = fp8_bits_float(best);
}

void cast_to_fp8(std::uint8_t* out, float* scale_inv, const bf16* inp, size_t n, const float* amax, Fp8Format f) {
  const float scale = fp8_scale(*amax, f);
  for (size_t i = 0; i < n; ++i) out[i] = fp8_encode(bf16_to_float(inp[i]) * scale, f);
  if (scale_inv) *scale_inv = fp8_scale_inv(*amax, f);
}

void cast_transpose_to_fp8(std::uint8_t* out, std::uint8_t* out_t, float* scale_inv, const bf16* inp, int rows,
                           int cols, const float* amax, Fp8Format f) {
  const float scale = fp8_scale(*amax, f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::uint8_t q = fp8_encode(bf16_to_float(inp[size_t(r) * cols + c]) * scale, f);
      if (out) out[size_t(r) * cols + c] = q;
      if (out_t) out_t[size_t(c) * rows + r] = q;
    }
  if (scale_inv) *scale_inv = fp8_scale_inv(*amax, f);
}

void cast_from_fp8(bf16* out, const std::uint8_t* inp, size_t n, const float* scale_inv, Fp8Format f) {
  const auto& t = decode_table(f);
  for (size_t i = 0; i < n; ++i) out[i] = float_to_bf16(t[inp[i]] * *scale_inv);
}

void fp8_gemm(bf16* c, const std::uint8_t* a, Fp8Format af, float a_scale_inv, const std::uint8_t* b, Fp8Format bf,
              float b_scale_inv, const bf16* bias, int m, int n, int k, float alpha) {
  check_formats(af, bf);
  const auto p = product(a, af, b, bf, m, n, k);
  // The epilogue in cuBLASLt's order: alpha * scale_a * scale_b * product, then the bias,
  // rounded once to bf16.
  const float s = alpha * a_scale_inv * b_scale_inv;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float v = s * p[size_t(i) * n + j];
      if (bias) v += bf16_to_float(bias[j]);
      c[size_t(i) * n + j] = float_to_bf16(v);
    }
}

void fp8_gemm(float* c, const std::uint8_t* a, Fp8Format af, float a_scale_inv, const std::uint8_t* b, Fp8Format bf,
              float b_scale_inv, int m, int n, int k, float alpha, float beta) {
  check_formats(af, bf);
  const auto p = product(a, af, b, bf, m, n, k);
  const float s = alpha * a_scale_inv * b_scale_inv;
  for (size_t i = 0; i < p.size(); ++i) c[i] = s * p[i] + (beta == 0.0f ? 0.0f : beta * c[i]);
}

}  // namespace holmes::model::cpu
