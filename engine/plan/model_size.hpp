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

// What a block keeps for its backward (model::ActivationPolicy): train.recompute resolved
// (never auto here) and whether the backward is split into B and W (zero-bubble schedules),
// with the pipeline schedule that decides it (parallel.schedule resolved: zb-h1 splits).
struct ActivationMode {
  spec::Recompute recompute = spec::Recompute::kNone;
  bool split_backward = false;
  spec::Schedule schedule = spec::Schedule::k1f1b;
  int chunks = 1;  // model chunks per stage: parallel.virtual_stages under interleaved, else 1
  static ActivationMode of(spec::Recompute r, spec::Schedule s, int chunks = 1) {
    return {r, s == spec::Schedule::kZbH1, s, s == spec::Schedule::kInterleaved ? chunks : 1};
  }
  bool operator==(const ActivationMode&) const = default;
};
// FLOPs of the W passes (the GEMMs' weight gradients: two per weight per token, the head's on
// the last stage) of `layers` blocks over `tokens` tokens on one tensor-parallel rank: the
// part of a split backward a zero-bubble schedule moves (model::Gpt::backward_weights).
double stage_weight_grad_flops(const GptShape& s, int layers, bool last, int tp, int64_t seq_len, double tokens);

// Activation bytes one block keeps per micro-batch for backward, per tensor-parallel rank: the
// buffers model::Gpt keeps for a layer in a slot (model/gpt_activations.cpp), a the activation
// bytes, KV = kv_channels, F = mlp, t the tensor degree, per token:
//   none:      a (4C + (C + 2KV)/t + C/t + gF/t + F/t) + n  (the two norms' inputs, the
//              residuals, q k v, attention's output, the MLP's first GEMM output (g = 1 for
//              gpt2, 2 for llama's gate | up) and its activation, the norms' fp32 statistics:
//              n = 16 bytes for LayerNorm, 8 for RMSNorm), plus attention's state;
//   selective: a (2C + (C + 2KV)/t + gF/t) (GEMM outputs and the residual stream), plus
//              attention's output and state where attention is fused (bf16: cuDNN);
//   full:      a C (the block's output);
//   split_backward adds the GEMM output gradients W reads: a (2C + (C + 2KV)/t + gF/t).
// Attention's state: bf16 (cuDNN flash attention) B (NH/t) T fp32 softmax statistics, fp32
// B (NH/t) T^2 fp32 probabilities. `act_bytes` is 2 for bf16 and 4 for fp32. A test ties
// each mode to model::Gpt::layer_slot_bytes.
double block_activation_bytes(const GptShape& s, int64_t seq_len, int64_t micro_batch, int tp, int act_bytes,
                              ActivationMode mode = {});
// The replayed buffers: one layer's worth of what `mode` does not keep, shared by every layer
// and micro-batch of a rank (0 for none).
double recompute_work_bytes(const GptShape& s, int64_t seq_len, int64_t micro_batch, int tp, int act_bytes,
                            ActivationMode mode);
// What a stage keeps per micro-batch besides its blocks: its input (a C per token), the
// bf16 boundary copy of its output (non-last stage), the embedding output's gradient under a
// split backward (first stage) and on the last stage the head: the final norm's output and
// statistics, the logits (a Vp/t), the losses and cross-entropy statistics (16 bytes).
double stage_extra_activation_bytes(const GptShape& s, int64_t seq_len, int64_t micro_batch, int tp, int act_bytes,
                                    ActivationMode mode, bool first, bool last);
// Extra forward FLOPs the replay adds per token per block on one tensor-parallel rank (the
// train FLOPs, 3x forward, do not count them): selective replays an unfused attention (4 T C
// where attention keeps probabilities: act_bytes 4), full the block's forward but its last
// GEMM; a split backward replays again before W.
double recompute_flops_per_token(const GptShape& s, int64_t seq_len, int tp, int act_bytes, ActivationMode mode);

}  // namespace holmes::plan
