// bfloat16 as the model and its kernels store it: the top 16 bits of an IEEE fp32 value.
// On the host this is a plain 2-byte storage type (the CPU computes in fp32); CUDA code
// reinterprets it as __nv_bfloat16, which has the same size and layout. The host
// conversions round to nearest even, as the GPU's __float2bfloat16 does, so CPU references
// and parity tests see the same rounding as device code.
#pragma once

#include <cstdint>
#include <cstring>

namespace holmes::model {

struct bf16 {
  std::uint16_t bits = 0;
};
static_assert(sizeof(bf16) == 2);

// (memcpy, not std::bit_cast: nvcc compiles the .cu files that include this as C++17.)
inline float bf16_to_float(bf16 h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline bf16 float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)  // NaN stays a (quiet) NaN
    return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bf16{static_cast<std::uint16_t>(u >> 16)};
}

}  // namespace holmes::model
