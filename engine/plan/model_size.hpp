// Parameter, FLOP and activation counts of the architectures the trainer runs (model.arch):
//   gpt2:  token + learned position embeddings, pre-LN blocks (attention with biases, MLP 4C
//          with GELU), final LN, LM head tied to the token embedding;
//   llama: token embedding, pre-RMSNorm blocks (q, k, v with KVH key/value heads, o; SwiGLU
//          MLP gate, up, down of width F; no biases), final RMSNorm, LM head untied unless
//          tie_embeddings.
// Computed from spec numbers only (engine/plan does not depend on model/); a test ties every
// count to the model's own (model::ParamLayout, model::full_model_params,
// model::Gpt::flops_per_step, model::Gpt::activation_bytes). Legend: L layers, C hidden, NH
// heads, KV = KVH * C / NH, F MLP width, V vocab (padded: Vp), T sequence length, B
// micro-batch, t tensor-parallel degree.
#pragma once

#include <cstdint>

#include "engine/spec/job_spec.hpp"

namespace holmes::plan {

struct GptShape {
  int layers = 0;       // L
  int hidden = 0;       // C
  int heads = 0;        // NH
  int vocab = 0;        // V before padding
  int max_seq_len = 0;  // gpt2: learned positions
  spec::ModelArch arch = spec::ModelArch::kGpt2;
  int kv_heads = 0;     // KVH (0 = heads)
  int ffn_hidden = 0;   // F (0 = gpt2's 4C)
  bool tie_embeddings = true;
  bool llama() const { return arch == spec::ModelArch::kLlama; }
  int64_t kv_channels() const;  // KV = KVH * C / NH (C for gpt2)
  int64_t mlp() const;          // F
};

// The shape a job spec describes, defaults resolved: kv_heads 0 = heads, llama's ffn_hidden 0
// = 2/3 x 4C rounded up to model.ffn_multiple (the model's rule, model::GptConfig).
GptShape shape_of(const spec::ModelSection& m);

// Vocabulary padded to a multiple of max(128, 64 t), as the model pads it.
int64_t padded_vocab(int vocab, int tp);

// Parameters of one transformer block: gpt2 12 C^2 + 13 C; llama 2 C^2 + 2 C KV + 3 C F + 2 C.
int64_t block_params(const GptShape& s);
// The first stage's embedding: Vp C (+ max_seq_len C of positions for gpt2).
int64_t embedding_params(const GptShape& s, int tp);
// The final norm: 2 C (LayerNorm) or C (RMSNorm).
int64_t final_norm_params(const GptShape& s);
// The LM head's own weight on the last stage: Vp C for an untied head, else 0 (a tied head
// is the embedding; a last stage that is not the first holds a copy of it, counted by the
// cost model as such).
int64_t untied_head_params(const GptShape& s, int tp);
// Whole model as held in memory: the padded vocabulary rows included, a tied LM head counted
// once (model::ParamLayout(config).size() of the tp = 1 model; a test ties them).
int64_t total_params(const GptShape& s, int tp);
// The model's parameters as users count them: the real vocabulary rows only (what an export
// holds; model::full_model_params). This is the number the plan and the log print.
int64_t model_params(const GptShape& s);

// Forward FLOPs of one block per token at sequence length T: 2 x (its weights) + 4 T C (QK^T
// and the weighted sum over T keys): gpt2 24 C^2 + 4 T C; llama 2 (2 C^2 + 2 C KV + 3 C F) +
// 4 T C.
double block_forward_flops_per_token(const GptShape& s, int64_t seq_len);
// Forward FLOPs of the LM head per token: 2 C Vp.
double head_forward_flops_per_token(int64_t hidden, int64_t vocab_padded);
// Training (3x forward) FLOPs one tensor-parallel rank of a pipeline stage computes for
// `tokens` tokens: n blocks, plus the LM head on the last stage. What the cost model divides
// by the device speed, and what a calibration divides by the measured compute time.
double stage_train_flops(const GptShape& s, int layers, bool last, int tp, int64_t seq_len, double tokens);
// Training (forward + backward = 3x forward) FLOPs of the whole model per token.
double train_flops_per_token(const GptShape& s, int tp, int64_t seq_len);

// Activation bytes one block keeps per micro-batch for backward, per tensor-parallel rank.
// gpt2 (Korthikanti et al. 2022, 16-bit activations, without recomputation):
//   T B C (10 + 24/t + 5 NH T / (C t)).
// llama: the buffers model::Gpt keeps for a llama block (llama_block.cpp), with a the
// activation bytes: T B [a (4C + (C + 2 KV)/t + C/t + 3F/t) + 8] (the two norms' inputs, the
// residuals, rotated q k v, the attention output, [gate | up] and SwiGLU's output, two fp32
// RMSNorm statistics), plus the attention state: bf16 (cuDNN flash attention) B (NH/t) T
// fp32 softmax statistics, fp32 B (NH/t) T^2 fp32 probabilities.
// `act_bytes` is 2 for bf16 and 4 for fp32 (gpt2's formula scales with it).
double block_activation_bytes(const GptShape& s, int64_t seq_len, int64_t micro_batch, int tp, int act_bytes);
// Logits and their softmax gradient on the last stage per micro-batch: T B Vp/t (act + 4) bytes.
double head_activation_bytes(const GptShape& s, int64_t seq_len, int64_t micro_batch, int tp, int act_bytes);

}  // namespace holmes::plan
