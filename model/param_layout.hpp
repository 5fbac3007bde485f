// The parameters of one rank's shard in ONE contiguous float buffer, with a size table.
//
// Order in the buffer, the same for every architecture (architecture.hpp):
//   first stage: the token embedding (Vl, C), then learned positions (max_seq_len, C) where the
//     architecture has them;
//   per layer l of the stage: Architecture::layer_tensors(cfg, l), names with the GLOBAL layer
//     index, so names are the same whatever the pipeline split;
//   last stage: the final norm's weight (C) and bias (C, where it has one), then an untied LM
//     head (Vl, C) or, on a last stage that is not the first with a tied head, its own copy of
//     the token embedding (its gradient is summed with the first stage's: Megatron's embedding
//     group).
// Shapes follow torch.nn.Linear, (out, in). The token embedding and an LM head hold vocabulary
// rows [vocab_begin, vocab_begin + Vl) of the padded (Vp, C) table (rows >= V are padding,
// initialised to 0 and never looked up). Names are the architecture's (gpt2: Hugging Face
// GPT-2's without "transformer."; llama: LlamaForCausalLM's).
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
  // The token embedding that is also the LM head (tie_embeddings), or its tied copy.
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
  // Tensors of the embedding (before the first layer) and of each layer (the architecture's
  // layer_tensors).
  size_t embedding_tensors() const { return embedding_tensors_; }
  size_t tensors_per_layer() const { return tensors_per_layer_; }

  // Offset in the flat buffer of the full-tensor element `full_index` (row-major in
  // full_shape) if this shard holds it, else -1. Used by init and resharding.
  static int64_t shard_offset(const ParamTensor& t, int64_t full_index);

 private:
  void add(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> full_shape,
           bool decay, int split_dim, int split_parts, const GptConfig& cfg, int layer);

  std::vector<ParamTensor> tensors_;
  size_t size_ = 0;
  size_t embedding_tensors_ = 0, tensors_per_layer_ = 0;
};

// The names the model code looks tensors up by (Architecture::role_names): the token
// embedding, the learned positions ("" without), the final norm's weight and bias ("" without)
// and the LM head's weight (the embedding's name when tied).
struct RoleNames {
  std::string embedding, positions, final_norm_weight, final_norm_bias, head;
};
RoleNames role_names(const GptConfig& cfg);

}  // namespace holmes::model
