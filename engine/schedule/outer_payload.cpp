#include "engine/schedule/outer_payload.hpp"

#include <algorithm>
#include <cmath>

namespace holmes::schedule {

double outer_payload_bytes(spec::OuterDtype dtype, double elements) {
  switch (dtype) {
    case spec::OuterDtype::kFp32: return 4 * elements;
    case spec::OuterDtype::kBf16: return 2 * elements;
    case spec::OuterDtype::kInt8: return elements + 4 * std::ceil(elements / kOuterChunk);
  }
  return 4 * elements;
}

size_t outer_payload_size(spec::OuterDtype dtype, size_t elements) {
  const size_t raw = static_cast<size_t>(outer_payload_bytes(dtype, static_cast<double>(elements)));
  return (raw + 3) / 4 * 4;
}

double outer_part(double elements, int replicas) { return std::ceil(elements / std::max(1, replicas)); }

double outer_exchange_bytes(spec::OuterDtype dtype, double elements, int replicas) {
  return 2.0 * (replicas - 1) * outer_payload_bytes(dtype, outer_part(elements, replicas));
}

}  // namespace holmes::schedule
