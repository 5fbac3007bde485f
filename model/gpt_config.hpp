// Decoder model configuration (any registered architecture): the global model and the shard
// one rank holds.
//
// Dimension legend (used in every shape comment under model/ and cuda/):
//   B   sequences in a micro-batch            T   sequence length (T <= max_seq_len)
//   N   = B * T, rows of a flattened activation
//   C   hidden size (channels)                NH  attention heads, HS = C / NH head size
//   KVH key/value heads (grouped-query attention; NH for GPT-2), KV = KVH * HS
//   F   MLP hidden size (ffn_hidden; GPT-2: 4C)
//   L   transformer layers (global)           V   vocabulary size, Vp padded vocabulary
//   TP  tensor-parallel degree; a shard holds Cl = C/TP query channels (NHl = NH/TP heads),
//       KVl = KV/TP key/value channels (KVHl = KVH/TP heads), Fl = F/TP MLP channels and
//       Vl = Vp/TP vocabulary rows starting at vocab_begin.
// With tp_size == 1 and one pipeline stage holding every layer this is the plain model.
//
// The architecture (model.arch) names an entry of the registry (architecture.hpp), which holds
// its rules, tensors, counts and block: model/gpt2/ (learned positions, LayerNorm, GELU MLP of
// 4C, biases, tied head), model/llama/ (rotary positions, RMSNorm, SwiGLU MLP of F, no biases,
// grouped-query attention, untied head unless tie_embeddings).
#pragma once

#include <cstdint>
#include <string>

namespace holmes::model {

class Architecture;  // architecture.hpp

inline constexpr const char* kDefaultArch = "gpt2";  // model.arch when a spec or a file names none

// Throws holmes::UserError "model config: FIELD = VALUE is invalid; expected ACCEPTED" unless ok
// (the rules of finalize and of each architecture).
void require_config(bool ok, const std::string& field, long value, const std::string& accepted);

struct GptConfig {
  std::string arch = kDefaultArch;  // a registered architecture (architecture.hpp)
  // Global model.
  int layers = 0;        // L
  int hidden = 0;        // C
  int heads = 0;         // NH
  int vocab = 0;         // V (real tokens)
  int padded_vocab = 0;  // Vp; 0 = derive with pad_vocab(vocab, tp_size) (finalize keeps a set value)
  int max_seq_len = 0;   // gpt2: rows of the learned position embedding; llama: of the rotary table
  // The options an architecture may read (Architecture::options; the others must keep the
  // values its finalize() gives them, e.g. gpt2: kv_heads = heads, ffn_hidden = 4C, norm_eps
  // 1e-5, tied head).
  int kv_heads = 0;             // KVH; 0 = heads
  int ffn_hidden = 0;           // F; 0 = the architecture's rule (gpt2 4C; llama 2/3 x 4C rounded)
  int ffn_multiple = 256;       // the derived F is rounded up to a multiple of this (llama)
  double rope_theta = 500000.0;  // rotary base
  float norm_eps = 1e-5f;       // the norms' epsilon (GPT-2's LayerNorm uses 1e-5)
  bool tie_embeddings = true;   // LM head = token embedding (gpt2 always; llama default false)

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
  // Resolves padded_vocab, stage_layers and the architecture's derived sizes; throws
  // holmes::UserError naming the field, the value seen and what is accepted when the
  // configuration is not a valid shard of its architecture (or names none registered).
  void finalize();
  // Plain single-rank models of an architecture: model/gpt2/gpt2.hpp gpt2::config, model/llama/
  // llama.hpp llama::config.

  // This (global) model's shard for one rank: TP rank `tp_rank` of `tp_size`, pipeline layers
  // [first_layer, first_layer + stage_layers) (stage_layers < 0: to the last layer), with
  // the embedding on the stage that starts at layer 0 and the head on the one that ends at L.
  // Vp is re-derived for tp_size, so every rank of a job gets the same padding. Finalized.
  GptConfig shard(int tp_size, int tp_rank, int first_layer = 0, int stage_layers = -1) const;
  // The whole model this shard belongs to: tp = 1, one stage, padded_vocab kept (the job's
  // padding). Finalized.
  GptConfig global() const;
  // "" when `other` is the same global model (arch and every size; padding and sharding
  // aside), else the differences as "model.KEY SAVED (this job: WANT)" joined by ", ", named
  // as the job spec names them.
  std::string differences(const GptConfig& other) const;

  // The registered architecture `arch` names (holmes::UserError when none).
  const Architecture& architecture() const;
  bool reads(unsigned option) const;  // whether the architecture reads that ConfigOption
  int head_size() const { return hidden / heads; }            // HS
  int local_heads() const { return heads / tp_size; }         // NHl
  int local_kv_heads() const { return kv_heads / tp_size; }   // KVHl
  int local_channels() const { return hidden / tp_size; }     // Cl
  int local_kv_channels() const { return local_kv_heads() * head_size(); }  // KVl
  int local_qkv() const { return local_channels() + 2 * local_kv_channels(); }  // Cl + 2 KVl
  int local_mlp() const { return ffn_hidden / tp_size; }      // Fl
  int local_vocab() const { return padded_vocab / tp_size; }  // Vl
  int vocab_begin() const { return tp_rank * local_vocab(); }
  int num_stage_layers() const { return stage_layers < 0 ? layers - first_layer : stage_layers; }

  std::string to_string() const;
  // The global model for logs (Architecture::describe): "GPT-2 L=12 C=768 NH=12 V=50257
  // (padded 50304)" or "Llama L=32 C=4096 NH=32 KVH=8 F=14336 V=128256 (padded 128256),
  // rope_theta 500000, untied head".
  std::string describe() const;
};

}  // namespace holmes::model
