// The activation buffers of Gpt (gpt.hpp) as its .cpp files see them: a slot's stage input and
// head, the shared gradient scratch, and where each buffer (the architecture's per-layer ones
// too: Architecture::layer_buffers) lives in the one activation allocation. Private to model/.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "model/gpt.hpp"

namespace holmes::model {

// The current slot's stage input and head, and the gradient scratch all slots share.
template <class A>
struct Gpt::Shared {
  A* encoded;        // (B,T,C) stage input
  A* dencoded;       // (B,T,C) split backward, first stage: its gradient, kept from B for W
  float* out32;      // (B,T,C) the stage output in boundary format (bf16, non-last stage)
  A* lnf;            // (N,C) the final norm's output
  float* lnf_mean;   // (N) LayerNorm only
  float* lnf_rstd;   // (N)
  A* logits;         // (N,Vl)
  float* losses;     // (N)
  float* row_max;    // (N)
  float* ce_stats;   // (N,2)
  A* scratch;        // (B,T,C) row-parallel outputs before the residual add
  A* dres;           // (B,T,C) gradient of the residual stream
  A* dln;            // (B,T,C)
  float* datt;       // attention backward workspace
  float* grad32;     // (B,T,C) the input gradient in boundary format (bf16, non-first stage)
};

// Byte offsets of every buffer in acts_, each rounded up to 256 bytes so every buffer is
// aligned for vector loads and cuBLASLt whatever the shapes and element sizes. Layout:
// [slot 0 | slot 1 | ... | working layer | shared gradient scratch]; a slot is [stage input,
// boundary output, embedding gradient (split backward), layers, head].
struct Gpt::Offsets {
  size_t slot_bytes = 0, layer_bytes = 0;
  // Within a slot:
  size_t encoded = 0, out32 = 0, dencoded = 0, layers = 0, lnf = 0, lnf_mean = 0, lnf_rstd = 0, logits = 0,
         losses = 0, row_max = 0, ce_stats = 0;
  // Per layer buffer (the architecture's order): its offset within a slot's layer (kept) or
  // within the working layer, and for a kWeightGrad buffer of a model that does not split,
  // the offset of the one shared buffer a whole pass uses (in the shared area; unused for a
  // residual gradient, which is dres).
  std::vector<size_t> layer_at, shared_grad;
  std::vector<char> kept;
  // After the slots:
  size_t work = 0;
  size_t scratch = 0, dres = 0, dln = 0, datt = 0, grad32 = 0;
  std::vector<size_t> arch_scratch;  // Architecture::gradient_scratch
  size_t total = 0;
};

// What the kernels read (gpt.cpp): params_ in fp32, params16_ in bf16.
template <>
float* Gpt::weights<float>();
template <>
bf16* Gpt::weights<bf16>();

namespace gpt_detail {

// Hands out 256-byte aligned byte ranges from a running offset.
struct Carver {
  size_t bytes = 0;
  size_t take(size_t count, size_t elem) {
    const size_t at = bytes;
    bytes += (count * elem + 255) / 256 * 256;
    return at;
  }
};

template <class T>
T* at(std::byte* base, size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

}  // namespace gpt_detail

}  // namespace holmes::model
