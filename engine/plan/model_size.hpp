// Parameter, FLOP and activation counts of the GPT-2 architecture the trainer runs:
// token + learned position embeddings, pre-LN blocks (attention with biases, MLP 4C with
// GELU), final LN, LM head tied to the token embedding. Computed from spec numbers only
// (engine/plan does not depend on model/). Legend: L layers, C hidden, NH heads, V vocab
// (padded: Vp), T sequence length, B micro-batch, t tensor-parallel degree.
#pragma once

#include <cstdint>

namespace holmes::plan {

struct GptShape {
  int layers = 0;       // L
  int hidden = 0;       // C
  int heads = 0;        // NH
  int vocab = 0;        // V before padding
  int max_seq_len = 0;  // learned positions
};

// Vocabulary padded to a multiple of max(128, 64 t), as the model pads it.
int64_t padded_vocab(int vocab, int tp);

// Parameters of one transformer block: 12 C^2 + 13 C.
int64_t block_params(int64_t hidden);
// Token embedding Vp C + position embedding max_seq_len C.
int64_t embedding_params(const GptShape& s, int tp);
// Final layer norm: 2 C.
int64_t final_norm_params(int64_t hidden);
// Whole model as held in memory: the padded vocabulary rows included, the tied LM head
// counted once (model::ParamLayout(config).size() of the tp = 1 model; a test ties them).
int64_t total_params(const GptShape& s, int tp);
// The model's parameters as users count them: the real vocabulary rows only (what an export
// holds; model::full_model_params). This is the number the plan and the log print.
int64_t model_params(const GptShape& s);

// Forward FLOPs of one block per token at sequence length T: 24 C^2 + 4 T C
// (QKV 6C^2, attention scores and weighted sum 4TC, projection 2C^2, MLP 16C^2).
double block_forward_flops_per_token(int64_t hidden, int64_t seq_len);
// Forward FLOPs of the LM head per token: 2 C Vp.
double head_forward_flops_per_token(int64_t hidden, int64_t vocab_padded);
// Training (3x forward) FLOPs one tensor-parallel rank of a pipeline stage computes for
// `tokens` tokens: n blocks, plus the LM head on the last stage. What the cost model divides
// by the device speed, and what a calibration divides by the measured compute time.
double stage_train_flops(const GptShape& s, int layers, bool last, int tp, int64_t seq_len, double tokens);
// Training (forward + backward = 3x forward) FLOPs of the whole model per token.
double train_flops_per_token(const GptShape& s, int tp, int64_t seq_len);

// Activation bytes one block keeps per micro-batch for backward, per tensor-parallel rank,
// without recomputation (Korthikanti et al. 2022, 16-bit activations):
//   T B C (10 + 24/t + 5 NH T / (C t)).
// `act_bytes` is 2 for bf16 and 4 for fp32 (the formula scales with it).
double block_activation_bytes(const GptShape& s, int64_t seq_len, int64_t micro_batch, int tp, int act_bytes);
// Logits and their softmax gradient on the last stage per micro-batch: T B Vp/t (act + 4) bytes.
double head_activation_bytes(const GptShape& s, int64_t seq_len, int64_t micro_batch, int tp, int act_bytes);

}  // namespace holmes::plan
