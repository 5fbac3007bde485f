// Counts of a decoder model, pure functions of its configuration (gpt_config.hpp): parameters,
// FLOPs and the activation buffers one block keeps for its backward. The planner
// (engine/plan), the checkpoint and export read them here instead of deriving them again, and
// model::Gpt sizes its activation buffers from the same table (layer_buffers), so the
// planner's memory model and the model's allocation are one computation.
//
// Conventions: a config is finalized; "global" figures are those of its tp = 1 model (pass
// the global config), "shard" figures those of the tensor-parallel shard the config
// describes (tp_size, local_* sizes). Legend of gpt_config.hpp: L layers, C hidden, Cl = C/tp,
// V vocabulary, Vp padded, T sequence length, N = B*T rows of a micro-batch.
#pragma once

#include <cstdint>
#include <vector>

#include "model/activation_policy.hpp"
#include "model/gpt_config.hpp"
#include "model/kernels.hpp"

namespace holmes::model {

// The normalisation before the LM head (and in the blocks): LayerNorm keeps a mean and a
// reciprocal standard deviation per row for its backward, RMSNorm the latter only.
enum class NormKind { kLayerNorm, kRmsNorm };
inline int norm_stats(NormKind k) { return k == NormKind::kLayerNorm ? 2 : 1; }  // fp32 per row

// One block of an architecture, for the shard a config describes.
struct BlockCounts {
  int64_t params = 0;        // parameters of one block (tensors replicated over tp counted whole)
  int64_t gemm_weights = 0;  // elements of its GEMM weight matrices: 2 forward FLOPs per token each
  // Sums over its GEMMs of their input and output widths: the values per token an FP8 GEMM
  // casts (its input forward and again for the weight gradient, its output's gradient backward).
  int64_t gemm_in_channels = 0, gemm_out_channels = 0;
  int64_t replay_skipped = 0;      // of those, the weights of the GEMMs a full replay does not run
  int64_t attention_channels = 0;  // query channels of its causal attention: 4 T of them forward FLOPs per token
  int tp_sums = 0;  // (N, C) all-reduces over the tensor-parallel group per block and micro-batch, forward + backward
};

// What a block keeps of a micro-batch between its forward and its backward, by activation
// policy (activation_policy.hpp):
//   kReplayed   kept without recomputation only (norm outputs and statistics, activation outputs);
//   kSelective  kept unless full recomputation (GEMM outputs, the residual stream after attention);
//   kAttention  attention's output and state: selective keeps them where attention is fused
//               (no probabilities), else replays the attention;
//   kOutput     the block's output (the next block's input): always kept;
//   kWeightGrad a GEMM output's gradient that a split backward keeps from B to W (nothing
//               without split_backward).
enum class Keep { kReplayed, kSelective, kAttention, kOutput, kWeightGrad };

// One per-layer buffer of a block, for a micro-batch of N rows.
struct LayerBuffer {
  int64_t elems = 0;
  bool fp32 = false;  // fp32 whatever the activation type (statistics, attention state)
  Keep keep = Keep::kReplayed;
  // kWeightGrad only: a whole backward (Pass::kAll) finds this gradient in the residual
  // stream's gradient buffer instead of a buffer of its own.
  bool residual_grad = false;
};

// Whether `b` stays in the micro-batch's slot from the forward to the backward (else one
// working buffer every layer shares holds it: replayed before the backward, or unused).
bool kept_in_slot(const LayerBuffer& b, const ActivationPolicy& policy, bool attention_probabilities);

// ---- what the architecture says (model.arch; architecture.hpp) ----
BlockCounts block_counts(const GptConfig& cfg);  // of cfg's shard
// The per-layer buffers of cfg's shard for a micro-batch of N rows and attention `att`
// (Kernels::plan_attention), in the order the architecture's block indexes them.
std::vector<LayerBuffer> layer_buffers(const GptConfig& cfg, int64_t N, const AttentionPlan& att);
int64_t position_params(const GptConfig& cfg);  // learned position embedding (0: none)
NormKind final_norm(const GptConfig& cfg);

// ---- derived, the same for every architecture ----
// Vocabulary padded to a multiple of max(128, 64 tp) (GptConfig::pad_vocab).
int64_t padded_vocab(int64_t vocab, int tp);
int64_t block_params(const GptConfig& global);
// The first stage's embedding: Vp C, plus the learned positions.
int64_t embedding_params(const GptConfig& global, int tp);
int64_t final_norm_params(const GptConfig& global);  // C per weight and bias of the final norm
// The LM head's own weight on the last stage: Vp C for an untied head, else 0 (a tied head is
// the embedding; a last stage that is not the first holds a copy of it).
int64_t untied_head_params(const GptConfig& global, int tp);
// Whole model as held in memory: padded vocabulary rows included, a tied head counted once
// (ParamLayout of the tp = 1 model padded for tp).
int64_t total_params(const GptConfig& global, int tp);
// The parameters as users count them: the V real vocabulary rows (what an export holds).
int64_t model_params(const GptConfig& global);

// Forward FLOPs of one block per token at sequence length T: 2 per GEMM weight + 4 T C for
// attention (QK^T and the weighted sum over T keys).
double block_forward_flops_per_token(const GptConfig& global, int64_t seq_len);
// Forward FLOPs of the LM head per token: 2 C Vp.
double head_forward_flops_per_token(int64_t hidden, int64_t vocab_padded);
// Training (3x forward) FLOPs of the whole model per token.
double train_flops_per_token(const GptConfig& global, int tp, int64_t seq_len);
// Training FLOPs one tensor-parallel rank of a pipeline stage computes for `tokens` tokens:
// `layers` blocks, plus the LM head on the last stage.
double stage_train_flops(const GptConfig& global, int layers, bool last, int tp, int64_t seq_len, double tokens);
// FLOPs of the W passes (the GEMMs' weight gradients) of `layers` blocks (and the head on
// the last stage) over `tokens` tokens on one tensor-parallel rank.
double stage_weight_grad_flops(const GptConfig& global, int layers, bool last, int tp, int64_t seq_len,
                               double tokens);
// Model FLOPs of one forward + backward of a (B, T) micro-batch on the shard cfg describes
// (its stage's layers, the head when it has it).
double shard_train_flops(const GptConfig& cfg, int B, int T);

}  // namespace holmes::model
