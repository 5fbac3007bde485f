// GPT-2 model configuration: the global model and the shard one rank holds.
//
// Dimension legend (used in every shape comment under model/ and cuda/):
//   B   sequences in a micro-batch            T   sequence length (T <= max_seq_len)
//   N   = B * T, rows of a flattened activation
//   C   hidden size (channels)                NH  attention heads, HS = C / NH head size
//   L   transformer layers (global)           V   vocabulary size, Vp padded vocabulary
//   TP  tensor-parallel degree; a shard holds Cl = C/TP attention channels (NHl = NH/TP heads),
//       Fl = 4C/TP MLP channels and Vl = Vp/TP vocabulary rows starting at vocab_begin.
// With tp_size == 1 and one pipeline stage holding every layer this is a plain GPT-2.
#pragma once

#include <cstdint>
#include <string>

namespace holmes::model {

struct GptConfig {
  // Global model.
  int layers = 0;        // L
  int hidden = 0;        // C
  int heads = 0;         // NH
  int vocab = 0;         // V (real tokens)
  int padded_vocab = 0;  // Vp; 0 = derive with pad_vocab(vocab, tp_size) (finalize keeps a set value)
  int max_seq_len = 0;   // rows of the learned position embedding

  // Tensor-parallel shard (Megatron-LM): column-parallel QKV and MLP-in, row-parallel
  // attention-out and MLP-out, vocabulary-parallel embedding and cross-entropy.
  int tp_size = 1;
  int tp_rank = 0;

  // Pipeline stage: layers [first_layer, first_layer + stage_layers). stage_layers < 0 means
  // "all layers from first_layer to L". The first stage holds wte + wpe, the last stage the
  // final LayerNorm and the LM head (tied to wte: a last stage that is not also the first
  // holds its own copy of wte whose gradient must be summed with the first stage's).
  int first_layer = 0;
  int stage_layers = -1;
  bool has_embedding = true;
  bool has_head = true;

  // Vp: a multiple of max(128, 64 * tp) at or above V, so GEMMs and vocabulary shards align.
  static int pad_vocab(int vocab, int tp);

  // Resolves padded_vocab and stage_layers; throws holmes::UserError naming the field, the
  // value seen and what is accepted when the configuration is not a valid GPT shard.
  void finalize();

  // A plain single-rank GPT-2 of the given size (tp = 1, one stage).
  static GptConfig gpt2(int layers, int hidden, int heads, int vocab, int max_seq_len);

  // This (global) model's shard for one rank: TP rank `tp_rank` of `tp_size`, pipeline layers
  // [first_layer, first_layer + stage_layers) (stage_layers < 0: to the last layer), with
  // the embedding on the stage that starts at layer 0 and the head on the one that ends at L.
  // Vp is re-derived for tp_size, so every rank of a job gets the same padding. Finalized.
  GptConfig shard(int tp_size, int tp_rank, int first_layer = 0, int stage_layers = -1) const;

  int head_size() const { return hidden / heads; }            // HS
  int local_heads() const { return heads / tp_size; }         // NHl
  int local_channels() const { return hidden / tp_size; }     // Cl
  int local_mlp() const { return 4 * hidden / tp_size; }      // Fl
  int local_vocab() const { return padded_vocab / tp_size; }  // Vl
  int vocab_begin() const { return tp_rank * local_vocab(); }
  int num_stage_layers() const { return stage_layers < 0 ? layers - first_layer : stage_layers; }

  std::string to_string() const;
};

}  // namespace holmes::model
