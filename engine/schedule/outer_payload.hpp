// The layout of the outer exchange's payloads (parallel.outer diloco: the owner-slice exchange
// engine/parallel/outer_sync.hpp runs and the planner prices, engine/plan/replicas.hpp): how
// many bytes a run of weights takes as outer_dtype on the wire, and how a member's slice is cut
// into one part per replica. Pure; both sides read these, so the bytes priced are the bytes sent.
#pragma once

#include <cstddef>

#include "engine/spec/choices.hpp"

namespace holmes::schedule {

// int8 payloads carry one fp32 scale per kOuterChunk values.
inline constexpr int kOuterChunk = 256;

// The payload of `elements` weights as `dtype`: 4, 2 or 1 byte a weight (int8: plus one fp32
// scale per kOuterChunk values, the scales first).
double outer_payload_bytes(spec::OuterDtype dtype, double elements);
// The same as the runtime allocates and sends it: rounded up to whole 4-byte words.
size_t outer_payload_size(spec::OuterDtype dtype, size_t elements);

// The owner-slice exchange of one member's slice of `elements` weights over `replicas`
// members: the slice is cut into N parts of outer_part(elements, N) = ceil(elements / N)
// weights; each member sends every other part's payload to its owner ((N - 1) part payloads),
// the owner averages and all-gathers its part's payload ((N - 1) again). Bytes one member
// sends per outer sync: 2 (N - 1) outer_payload_bytes(outer_part(elements, N)), about
// 2 (N - 1) / N of the slice's payload (each part payload rounded up to 4 bytes on the wire:
// outer_payload_size).
double outer_part(double elements, int replicas);
double outer_exchange_bytes(spec::OuterDtype dtype, double elements, int replicas);

}  // namespace holmes::schedule
