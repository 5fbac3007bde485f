// The FP8 training recipe (train.precision: fp8; docs/cuda.md, "FP8"): which GEMMs run in FP8,
// in which formats, scaled how. The linear layers' GEMMs (QKV, attention output, MLP up / gate
// / down; the LM head when `lm_head`) quantise their inputs per tensor and multiply on FP8
// tensor cores with fp32 accumulation; every other op, the master weights, the gradients and
// the optimizer state stay as bf16 mixed precision has them.
//
// Scaling is current ("just in time", torchtitan's tensorwise dynamic scaling): each GEMM
// input's scale comes from its own amax, measured right before the cast, as a power of two
// (model/fp8.hpp). So there is no scaling state to carry between steps, and what a step
// computes depends only on its weights and data: a resume is exact with nothing but the
// recipe in the checkpoint.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

#include "model/fp8.hpp"

namespace holmes::model {

struct Fp8Recipe {
  // Weights and the GEMMs' input activations: E4M3 (the backward GEMMs multiply gradients by
  // these, and E5M2 x E5M2 has no FP8 GEMM).
  Fp8Format forward = Fp8Format::kE4M3;
  Fp8Format backward = Fp8Format::kE5M2;  // the gradients of the GEMMs' outputs
  bool lm_head = false;                   // the LM head's GEMMs in FP8 too (else bf16)

  auto operator<=>(const Fp8Recipe&) const = default;
};

// One line for logs: "fp8 e4m3 weights/activations, e5m2 gradients, current per-tensor
// power-of-two scaling, LM head bf16".
std::string describe(const Fp8Recipe& r);

// The recipe as a checkpoint records it, "e4m3/e5m2/current/head=bf16", and back;
// parse_fp8_recipe returns nullopt for text it does not recognise.
std::string recipe_text(const Fp8Recipe& r);
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view text);

}  // namespace holmes::model
