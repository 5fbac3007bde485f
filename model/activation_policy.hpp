// What a block keeps of a micro-batch for its backward and how the backward may split: the
// activation policy of model::Gpt (gpt.hpp), which the counts (counts.hpp) and the blocks of
// every architecture read.
#pragma once

namespace holmes::model {

// What a block keeps for its backward (train.recompute; docs/training.md has the memory per mode):
//   kNone       every activation of every layer, per micro-batch in flight;
//   kSelective  the GEMM outputs (qkv, the MLP's pre-activation), the residual stream (res2,
//               res3) and, for a fused attention (no probabilities kept), its output and state.
//               The norms, the MLP's activation function and an unfused attention's softmax are
//               replayed from those before the layer's backward (Korthikanti et al. 2022);
//   kFull       the layer's output only (the next layer's input): the layer's forward is replayed
//               before its backward, all but its last GEMM, which the backward does not read.
// What is replayed goes into one layer's buffers that every layer and slot share, so memory
// no longer grows with layers x micro-batches for them. The replay runs the forward's own
// kernels on the same inputs, so its values are the forward's bit for bit (deterministic
// kernels; the TP sums a full replay repeats are too).
enum class Recompute { kNone, kSelective, kFull };
const char* recompute_name(Recompute r);  // "none", "selective", "full"

struct ActivationPolicy {
  Recompute recompute = Recompute::kNone;
  // The backward of a micro-batch runs as two passes a schedule may separate (zero-bubble,
  // arXiv 2401.10241): B (backward with Pass::kInput: every input gradient, the norms' weight
  // gradients) and W (backward_weights: the GEMMs' weight gradients and the embedding's).
  // Each layer then keeps the gradients of its GEMM outputs from B to W in its slot. Such a
  // model still runs a whole backward (Pass::kAll) as one pass, for a W that would follow its
  // B at once.
  bool split_backward = false;
  // Micro-batches may carry document positions (data.document_mask): the attention method is
  // chosen to mask (Kernels::plan_attention) and a position buffer is kept per slot.
  bool document_mask = false;
};

// Which part of a micro-batch's backward a call runs: both, or B / W of split_backward.
enum class Pass { kAll, kInput, kWeights };

}  // namespace holmes::model
