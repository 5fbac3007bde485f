// Element types as a value: what a tensor, a collective or a GEMM operand holds. fp32, bf16
// (the top 16 bits of an fp32: model/bf16.hpp) and the two FP8 formats of the OCP standard,
// E4M3 and E5M2, whose codes mean their value divided by a per-tensor scale kept beside them
// (model/fp8.hpp). The model's activations, comm's collectives, cuda's GEMM operands and the
// planner's byte counts all take this one type; a new format is one enumerator here and the
// cases below.
#pragma once

#include <cstddef>
#include <cstdint>

namespace holmes {

enum class DType : std::uint8_t { kF32, kBf16, kE4M3, kE5M2 };

constexpr std::size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBf16: return 2;
    case DType::kE4M3:
    case DType::kE5M2: return 1;
  }
  return 0;
}

// "fp32", "bf16", "e4m3", "e5m2": as train.precision and the logs spell them.
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kBf16: return "bf16";
    case DType::kE4M3: return "e4m3";
    case DType::kE5M2: return "e5m2";
  }
  return "?";
}

// FP8: a tensor of this type needs its scale to mean anything.
constexpr bool is_fp8(DType t) { return t == DType::kE4M3 || t == DType::kE5M2; }

}  // namespace holmes
