// Shared helpers of the CUDA parity tests: the skip line ctest recognises, host-side bf16
// rounding (so the CPU reference sees exactly the values the GPU sees) and random data.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/device_buffer.hpp"

namespace holmes::cuda::test {

// True when a GPU is usable. Otherwise prints the line that test/CMakeLists.txt maps to
// "skipped" (SKIP_REGULAR_EXPRESSION) and the caller returns: Catch2 v2 has no SKIP.
inline bool gpu_or_skip() {
  static std::string why;
  static const bool have = !query_gpus(&why).empty();
  if (!have) std::printf("HOLMES_SKIP: no CUDA device (%s)\n", why.c_str());
  return have;
}

// fp32 -> bf16 bits, round to nearest even (finite inputs; the tests make no NaN).
inline std::uint16_t bf16_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float bf16_value(std::uint16_t b) {
  std::uint32_t u = std::uint32_t{b} << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.f,
                                        float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// n integers uniform in [0, hi) (token ids, targets).
inline std::vector<int> random_ints(std::size_t n, int hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(0, hi - 1);
  std::vector<int> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Rounds every value to bf16 in place and returns the bf16 bit patterns.
inline std::vector<std::uint16_t> round_to_bf16(std::vector<float>& v) {
  std::vector<std::uint16_t> bits(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    bits[i] = bf16_bits(v[i]);
    v[i] = bf16_value(bits[i]);
  }
  return bits;
}

inline std::vector<float> from_bf16(const std::vector<std::uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) v[i] = bf16_value(bits[i]);
  return v;
}

// One attention shape: B sequences of T tokens, C query channels over NH heads, KVH key/value
// heads.
struct AttentionShape {
  int B, T, C, NH, KVH;
  constexpr int HS() const { return C / NH; }
  constexpr int W() const { return (NH + 2 * KVH) * HS(); }  // qkv row: [q NH | k KVH | v KVH] heads
};

// Each token's position in its document for B rows of T tokens, documents of lengths cycling
// through `lens` (row b starts at lens[b % size]; the last document of a row is cut short).
inline std::vector<int> document_positions(int B, int T, const std::vector<int>& lens) {
  std::vector<int> pos;
  for (int b = 0; b < B; ++b) {
    std::size_t k = std::size_t(b);
    int at = 0;
    for (int t = 0; t < T; ++t) {
      if (at == lens[k % lens.size()]) at = 0, ++k;
      pos.push_back(at++);
    }
  }
  return pos;
}

// A device buffer of `bytes` poisoned with NaN (0xFF bytes are a NaN in fp32 and bf16), for
// outputs a kernel must write in full.
inline DeviceBuffer nan_buffer(std::size_t bytes) {
  DeviceBuffer b(bytes);
  std::vector<unsigned char> ff(bytes, 0xFF);
  b.upload(ff.data(), bytes);
  return b;
}

// The first n values of a device buffer of fp32 or bf16 (widened), after the device is done.
inline std::vector<float> download_values(const DeviceBuffer& b, std::size_t n, bool bf16) {
  HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
  if (!bf16) return to_host<float>(b, n);
  return from_bf16(to_host<std::uint16_t>(b, n));
}

// max |got - want| / max |want|; infinite when anything is not finite or the sizes differ.
inline double normalized_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double err = 0, scale = 1e-30;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::fmax(err, std::fabs(double(got[i]) - want[i]));
    scale = std::fmax(scale, std::fabs(double(want[i])));
  }
  return err / scale;
}

// Largest |got - want| / (atol + rtol * |want|); <= 1 means within tolerance. A size
// mismatch, a non-finite got, or a NaN want (a broken reference, whose NaN ratio fmax would
// skip) is infinite; an infinite want must be met exactly.
inline double worst_ratio(const std::vector<float>& got, const std::vector<double>& want,
                          double atol, double rtol) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i])) {
      if (!(double(got[i]) == want[i])) return INFINITY;
      continue;
    }
    double err = std::fabs(double(got[i]) - want[i]);
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::fmax(worst, err / (atol + rtol * std::fabs(want[i])));
  }
  return worst;
}

}  // namespace holmes::cuda::test
