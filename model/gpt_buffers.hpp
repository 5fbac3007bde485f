// The activation buffers of Gpt (gpt.hpp) as its .cpp files see them: one layer's saved
// activations, a slot's head and the shared gradient scratch, and where each lives in the one
// activation allocation. Private to model/ (gpt.cpp, llama_block.cpp). The fields serve both
// architectures; for llama, "ln" buffers hold RMSNorm outputs (no mean), fch holds the fused
// gate/up projection (N,2Fl), fch_gelu the SwiGLU output (N,Fl), and dmlp the gradient of the
// SwiGLU output.
#pragma once

#include <cstddef>

#include "model/gpt.hpp"

namespace holmes::model {

// Saved activations of one layer, each sized for (max_B, max_T).
template <class A>
struct Gpt::LayerActs {
  A* ln1;           // (N,C)
  float* ln1_mean;  // (N)
  float* ln1_rstd;  // (N)
  A* qkv;           // (N,Cl+2KVl): gpt2 (N,3Cl); llama with q and k rotated
  A* atty;          // (N,Cl)
  float* att;       // attention state (Kernels::plan_attention)
  A* res2;          // (N,C) residual after attention
  A* ln2;           // (N,C)
  float* ln2_mean;  // (N)
  float* ln2_rstd;  // (N)
  A* fch;           // (N,Fl) MLP pre-activation
  A* fch_gelu;      // (N,Fl)
  A* res3;          // (N,C) layer output
};

// The current slot's stage input and head, and the gradient scratch all slots share.
template <class A>
struct Gpt::Shared {
  A* encoded;        // (B,T,C) stage input
  float* out32;      // (B,T,C) the stage output in boundary format (bf16, non-last stage)
  A* lnf;            // (N,C)
  float* lnf_mean;   // (N)
  float* lnf_rstd;   // (N)
  A* logits;         // (N,Vl)
  float* losses;     // (N)
  float* row_max;    // (N)
  float* ce_stats;   // (N,2)
  A* scratch;        // (B,T,C) row-parallel outputs before the residual add
  A* dres;           // (B,T,C) gradient of the residual stream
  A* dln;            // (B,T,C)
  A* dqkv;           // (B,T,Cl+2KVl)
  A* datty;          // (B,T,Cl)
  A* dfch;           // (B,T,Fl) gpt2; (B,T,2Fl) llama (gate/up gradient)
  A* dmlp;           // (B,T,Fl) llama: gradient of the SwiGLU output
  float* datt;       // attention backward workspace
  float* grad32;     // (B,T,C) the input gradient in boundary format (bf16, non-first stage)
};

// Byte offsets of every buffer in acts_, each rounded up to 256 bytes so every buffer is
// aligned for vector loads and cuBLASLt whatever the shapes and element sizes.
struct Gpt::Offsets {
  size_t slot_bytes = 0, layer_bytes = 0;
  // Within a slot:
  size_t encoded = 0, out32 = 0, layers = 0, lnf = 0, lnf_mean = 0, lnf_rstd = 0, logits = 0,
         losses = 0, row_max = 0, ce_stats = 0;
  // Within a layer (from its start):
  size_t ln1 = 0, ln1_mean = 0, ln1_rstd = 0, qkv = 0, atty = 0, att = 0, res2 = 0, ln2 = 0,
         ln2_mean = 0, ln2_rstd = 0, fch = 0, fch_gelu = 0, res3 = 0;
  // After the slots:
  size_t scratch = 0, dres = 0, dln = 0, dqkv = 0, datty = 0, dfch = 0, dmlp = 0, datt = 0, grad32 = 0;
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
