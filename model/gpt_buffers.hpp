// The activation buffers of Gpt (gpt.hpp) as its .cpp files see them: one layer's saved
// activations, a slot's head and the shared gradient scratch, and where each lives in the one
// activation allocation. Private to model/ (gpt.cpp, llama_block.cpp). The fields serve both
// architectures; for llama, "ln" buffers hold RMSNorm outputs (no mean), fch holds the fused
// gate/up projection (N,2Fl), fch_gelu the SwiGLU output (N,Fl), and dmlp the gradient of the
// SwiGLU output.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

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
  A* dencoded;       // (B,T,C) split backward, first stage: its gradient, kept from B for W
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

// Where a split backward keeps a layer's GEMM output gradients from B to W (split_backward,
// in the layer's slot), or, for a pass that does not split (kAll), the shared scratch: res3 and
// res2 are the residual stream's gradient before each block half (the shared dres then).
template <class A>
struct Gpt::LayerGrads {
  A* res3;  // (N,C) gradient of the block output: the MLP's last GEMM's output gradient
  A* fch;   // (N,Fl) gpt2 / (N,2Fl) llama: gradient of the MLP's first GEMM output
  A* res2;  // (N,C) gradient after attention: the output projection's output gradient
  A* qkv;   // (N,Cl+2KVl)
};

// The per-layer buffers: activations (LayerActs) and, for a split backward, the GEMM output
// gradients (LayerGrads). Each lives either in every layer of every slot (kept) or once in
// the working layer (replayed before use, or not needed: no bytes).
enum LayerBuf : int {
  kLn1, kLn1Mean, kLn1Rstd, kQkv, kAtty, kAtt, kRes2, kLn2, kLn2Mean, kLn2Rstd, kFch, kFchAct, kRes3,
  kGradRes3, kGradFch, kGradRes2, kGradQkv, kLayerBufs
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
  // A layer buffer: its offset within a slot's layer (kept) or within the working layer.
  size_t layer_at[kLayerBufs] = {};
  bool kept[kLayerBufs] = {};
  // After the slots:
  size_t work = 0;
  size_t scratch = 0, dres = 0, dln = 0, dqkv = 0, datty = 0, dfch = 0, dmlp = 0, datt = 0, grad32 = 0;
  size_t total = 0;
};

// The 12 tensors of one GPT-2 layer, in layout order (see param_layout.hpp for shapes).
template <class A>
struct Gpt::LayerParams {
  A *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};

template <class A>
Gpt::LayerParams<A> Gpt::layer_params(A* base, int local_layer) const {
  constexpr size_t kTensorsPerLayer = 12;  // GPT-2's (param_layout.hpp)
  const size_t first = layer_first_tensor(local_layer);
  A* t[kTensorsPerLayer];
  for (size_t j = 0; j < kTensorsPerLayer; ++j) t[j] = base + layout_.tensors()[first + j].offset;
  return {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]};
}

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
