// Branch-free exp and tanh that the compiler vectorises inside `omp simd` loops (the libm
// calls do not vectorise without -ffast-math). Relative error about 2e-7 on exp, far below
// the fp32 round-off of the sums they feed.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace holmes::model::cpu {

inline float fast_exp(float x) {
  // exp(x) = 2^k * exp(r), k = round(x / ln2), |r| <= ln2 / 2.
  x = std::min(std::max(x, -87.0f), 88.0f);  // exp(-87) is near FLT_MIN, exp(88) near FLT_MAX
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float k = (x * kLog2e + kRound) - kRound;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // ln2 split hi + lo
  // Degree-6 Taylor polynomial of exp on [-ln2/2, ln2/2] (Horner).
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t e = (static_cast<int32_t>(k) + 127) << 23;
  return p * std::bit_cast<float>(e);
}

inline float fast_tanh(float x) {
  // tanh(x) = 1 - 2 / (exp(2x) + 1); saturates cleanly for large |x| through the clamp.
  return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
}

}  // namespace holmes::model::cpu
