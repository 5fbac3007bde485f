// Llama (model.arch llama): token embedding, pre-RMSNorm blocks (q, k, v projections with
// rotary positions on q and k and grouped-query attention, o projection; SwiGLU MLP of
// gate, up and down), final RMSNorm, LM head untied unless tie_embeddings; no biases. Tensor
// names are Hugging Face LlamaForCausalLM's ("model.layers.<l>.self_attn.q_proj.weight").
#pragma once

#include <memory>

#include "model/architecture.hpp"

namespace holmes::model::llama {

// A plain single-rank Llama: kv_heads 0 = heads, ffn_hidden 0 = default_ffn_hidden; untied
// head, rope_theta 500000, norm_eps 1e-5 (change and finalize() again for others).
GptConfig config(int layers, int hidden, int heads, int kv_heads, int ffn_hidden, int vocab, int max_seq_len);

// Llama's MLP width rule: 2/3 of 4C, rounded up to a multiple of `multiple`.
int default_ffn_hidden(int hidden, int multiple);

std::unique_ptr<Architecture> make_architecture();

}  // namespace holmes::model::llama
