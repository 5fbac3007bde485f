// The parameters of one rank's shard in ONE contiguous float buffer, with a size table.
//
// GPT-2 (arch gpt2): names follow Hugging Face GPT-2 ("wte", "wpe", "h.<l>.attn.c_attn.weight", "ln_f.bias");
// <l> is the GLOBAL layer index, so names are the same whatever the pipeline split.
// Shapes follow torch.nn.Linear, (out, in): HF's Conv1D weights are the transpose.
// Order in the buffer: wte, wpe (first stage), then per layer l of the stage
//   h.l.ln_1.weight (C)           h.l.ln_1.bias (C)
//   h.l.attn.c_attn.weight (3Cl, C)  column-parallel, rows = [q | k | v] blocks of this rank
//   h.l.attn.c_attn.bias (3Cl)
//   h.l.attn.c_proj.weight (C, Cl)   row-parallel      h.l.attn.c_proj.bias (C)  replicated
//   h.l.ln_2.weight (C)           h.l.ln_2.bias (C)
//   h.l.mlp.c_fc.weight (Fl, C)   column-parallel     h.l.mlp.c_fc.bias (Fl)
//   h.l.mlp.c_proj.weight (C, Fl) row-parallel        h.l.mlp.c_proj.bias (C)  replicated
// then ln_f.weight, ln_f.bias (C) and, on a last stage that is not the first, its own wte.
// wte is (Vl, C): vocabulary rows [vocab_begin, vocab_begin + Vl) of the padded (Vp, C) table
// (rows >= V are padding, initialised to 0 and never looked up). wpe is (max_seq_len, C).
// Llama (arch llama): names are Hugging Face LlamaForCausalLM's, with the global layer index.
// Order: model.embed_tokens.weight (Vl, C) on the first stage, then per layer l
//   model.layers.l.input_layernorm.weight (C)
//   model.layers.l.self_attn.q_proj.weight (Cl, C)   column-parallel (this rank's query heads)
//   model.layers.l.self_attn.k_proj.weight (KVl, C)  column-parallel (its key/value heads)
//   model.layers.l.self_attn.v_proj.weight (KVl, C)  column-parallel
//   model.layers.l.self_attn.o_proj.weight (C, Cl)   row-parallel
//   model.layers.l.post_attention_layernorm.weight (C)
//   model.layers.l.mlp.gate_proj.weight (Fl, C)      column-parallel
//   model.layers.l.mlp.up_proj.weight (Fl, C)        column-parallel
//   model.layers.l.mlp.down_proj.weight (C, Fl)      row-parallel
// then model.norm.weight (C) and lm_head.weight (Vl, C) on the last stage (with
// tie_embeddings: no lm_head; the last stage's own copy of model.embed_tokens.weight when it is
// not the first stage, as GPT-2's wte). q, k, v are adjacent, so the three are one (Cl + 2 KVl,
// C) matrix and one GEMM; gate and up likewise one (2 Fl, C) matrix whose output rows are
// [gate | up], SwiGLU's input.
// Layer-major order keeps each layer's gradients contiguous, which suits bucketed
// reduce-scatter while backward still runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"

namespace holmes::model {

// One tensor of the shard and how it maps onto the full (unsharded) tensor.
struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;       // shard shape
  std::vector<int64_t> full_shape;  // shape of the full tensor in the unsharded model
  size_t offset = 0;                // first element in the flat buffer
  size_t numel = 0;                 // product of shape
  bool weight_decay = false;        // true for matrices and embeddings; false for biases, LN
  // Tensor-parallel mapping: split_dim < 0 means replicated (every TP rank holds all of it).
  // Otherwise dimension split_dim of the full tensor is made of split_parts equal blocks
  // (3 for c_attn: q, k, v; else 1) and this shard holds slice tp_index of tp_count of
  // EVERY block, concatenated in block order.
  int split_dim = -1;
  int split_parts = 1;
  int tp_index = 0;
  int tp_count = 1;
  // Tied copy of wte held by a last stage that is not the first stage: its gradient must be
  // summed with the first stage's wte gradient (Megatron's embedding group).
  bool tied_copy = false;
  // The token embedding that is also the LM head (gpt2's wte, llama's embed_tokens with
  // tie_embeddings), or its tied copy.
  bool tied_embedding = false;
  // Dimension 0 is the padded vocabulary (embedding, its copy, an untied LM head): rows >= V
  // are padding.
  bool vocab_rows = false;
  int layer = -1;  // global layer index, -1 for embeddings and ln_f
};

class ParamLayout {
 public:
  ParamLayout() = default;
  // Builds the size table of the shard described by cfg (cfg must be finalized).
  explicit ParamLayout(const GptConfig& cfg);

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  size_t size() const { return size_; }  // floats in the buffer (= sum of numel)
  // The tensor called `name`; throws std::out_of_range when this shard has none.
  const ParamTensor& at(const std::string& name) const;
  const ParamTensor* find(const std::string& name) const;
  // Tensors of the embedding (before the first layer) and of each layer, as the layout of
  // this arch makes them.
  size_t embedding_tensors() const { return embedding_tensors_; }
  size_t tensors_per_layer() const { return tensors_per_layer_; }

  // Offset in the flat buffer of the full-tensor element `full_index` (row-major in
  // full_shape) if this shard holds it, else -1. Used by init and resharding.
  static int64_t shard_offset(const ParamTensor& t, int64_t full_index);

 private:
  void add(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> full_shape,
           bool decay, int split_dim, int split_parts, const GptConfig& cfg, int layer);
  void add_gpt2(const GptConfig& cfg);
  void add_llama(const GptConfig& cfg);

  std::vector<ParamTensor> tensors_;
  size_t size_ = 0;
  size_t embedding_tensors_ = 0, tensors_per_layer_ = 0;
};

// The names the model code looks tensors up by, per arch: the token embedding, the learned
// positions ("" for llama), the final norm's weight and bias ("" for llama) and the LM head's
// weight (the embedding's name when tied).
struct RoleNames {
  std::string embedding, positions, final_norm_weight, final_norm_bias, head;
};
RoleNames role_names(const GptConfig& cfg);

}  // namespace holmes::model
