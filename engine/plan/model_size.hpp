// The planner's view of the model's counts (model/counts.hpp: parameters, FLOPs and the
// buffers a block keeps, one computation shared with the model): what train.recompute and the
// schedule make a block keep per micro-batch, what the replay costs, what a stage keeps
// besides its blocks. Sizes in bytes; `act_bytes` is 2 for bf16 activations, 4 for fp32.
// Legend of model/gpt_config.hpp: C hidden, T sequence length, B micro-batch, t tensor degree.
#pragma once

#include <cstdint>

#include "engine/spec/job_spec.hpp"
#include "model/counts.hpp"
#include "model/gpt_config.hpp"

namespace holmes::plan {

using model::block_forward_flops_per_token;
using model::block_params;
using model::embedding_params;
using model::final_norm_params;
using model::head_forward_flops_per_token;
using model::model_params;
using model::padded_vocab;
using model::stage_train_flops;
using model::stage_weight_grad_flops;
using model::total_params;
using model::train_flops_per_token;
using model::untied_head_params;

// What a block keeps for its backward (model::ActivationPolicy): train.recompute resolved
// (never auto here) and whether the backward is split into B and W (zero-bubble schedules),
// with the pipeline schedule that decides it (parallel.schedule resolved: zb-h1 splits).
struct ActivationMode {
  spec::Recompute recompute = spec::Recompute::kNone;
  bool split_backward = false;
  spec::Schedule schedule = spec::Schedule::k1f1b;
  int chunks = 1;  // model chunks per stage: parallel.virtual_stages under interleaved, else 1
  // data.document_mask: attention masks per document. The fused (cuDNN) attention masks in its
  // graph (cuda/cudnn_sdpa.hpp), so a block keeps what an unmasked one keeps; a rank may hold
  // one document bias more (document_bias_bytes).
  bool document_mask = false;
  static ActivationMode of(spec::Recompute r, spec::Schedule s, int chunks = 1) {
    return {r, s == spec::Schedule::kZbH1, s, s == spec::Schedule::kInterleaved ? chunks : 1};
  }
  bool operator==(const ActivationMode&) const = default;
};

// The attention the planner presumes for a precision: bf16 is cuDNN's fused attention (fp32
// softmax statistics B (NH/t) T, no probabilities), with or without document masking (the
// same rule as cuda::Attention::plan, which takes cuDNN for bf16 where it has an engine, masked
// or not); fp32 the exact form (probabilities B (NH/t) T^2 fp32).
model::AttentionPlan presumed_attention(int act_bytes, int64_t micro_batch, int64_t seq_len, int64_t local_heads);

// The document bias of a document-masked bf16 rank: (B, T, T) bf16, one per rank (shared by its
// layers and heads), which the fused attention holds when cuDNN takes the mask as a bias rather
// than from the positions in its graph (cuda/cudnn_sdpa.hpp SdpaMask); counted whichever it
// takes. 0 without the mask or in fp32.
double document_bias_bytes(int64_t seq_len, int64_t micro_batch, int act_bytes, ActivationMode mode);

// Activation bytes one block keeps per micro-batch for its backward, per tensor-parallel rank:
// the buffers model::Gpt keeps for a layer in a slot (model::layer_buffers kept under `mode`,
// model::kept_in_slot), with the presumed attention. A test ties each mode to
// model::Gpt::layer_slot_bytes.
double block_activation_bytes(const model::GptConfig& global, int64_t seq_len, int64_t micro_batch, int tp,
                              int act_bytes, ActivationMode mode = {});
// The replayed buffers: one layer's worth of what `mode` does not keep, shared by every layer
// and micro-batch of a rank (0 for none).
double recompute_work_bytes(const model::GptConfig& global, int64_t seq_len, int64_t micro_batch, int tp,
                            int act_bytes, ActivationMode mode);
// What a stage keeps per micro-batch besides its blocks: its input (a C per token), the
// bf16 boundary copy of its output (non-last stage), the embedding output's gradient under a
// split backward (first stage) and on the last stage the head: the final norm's output and
// statistics, the logits (a Vp/t), the losses and cross-entropy statistics (16 bytes).
double stage_extra_activation_bytes(const model::GptConfig& global, int64_t seq_len, int64_t micro_batch, int tp,
                                    int act_bytes, ActivationMode mode, bool first, bool last);
// Extra forward FLOPs the replay adds per token per block on one tensor-parallel rank (the
// train FLOPs, 3x forward, do not count them): selective replays an unfused attention (4 T C
// where attention keeps probabilities: act_bytes 4), full the block's forward but the GEMMs
// whose outputs the backward does not read (model::BlockCounts::replay_skipped); a split
// backward replays again before W.
double recompute_flops_per_token(const model::GptConfig& global, int64_t seq_len, int tp, int act_bytes,
                                 ActivationMode mode);

}  // namespace holmes::plan
