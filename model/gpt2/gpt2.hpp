// GPT-2 (model.arch gpt2): learned position embedding, pre-LayerNorm blocks (fused q/k/v
// projection with biases, causal multi-head attention, row-parallel output projection; MLP of
// 4C with GELU), final LayerNorm, LM head tied to the token embedding. Tensor names are
// Hugging Face GPT-2's without the "transformer." prefix (layer l: "h.<l>.attn.c_attn.weight").
#pragma once

#include <memory>

#include "model/architecture.hpp"

namespace holmes::model::gpt2 {

// A plain single-rank GPT-2 of the given size (tp = 1, one stage), finalized.
GptConfig config(int layers, int hidden, int heads, int vocab, int max_seq_len);

std::unique_ptr<Architecture> make_architecture();

}  // namespace holmes::model::gpt2
