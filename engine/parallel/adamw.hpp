// AdamW over the flat parameter buffer (llm.c style) with decoupled weight decay, global
// gradient-norm clipping and the learning-rate schedule. Every function works on an
// explicit element range [begin, end) so the distributed optimizer can update only its
// shard; the single-process trainer passes the whole buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engine/spec/choices.hpp"

#include "model/kernels.hpp"

namespace holmes::parallel {

// A run of the flat buffer and whether weight decay applies to it (matrices yes; biases
// and LayerNorm weights no). Ranges come from the parameter layout, sorted, disjoint.
struct DecayRange {
  size_t begin = 0;
  size_t end = 0;
  bool decay = true;
};

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// One AdamW step (PyTorch's torch.optim.AdamW semantics) on elements [begin, end):
//   g = grad * grad_scale;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p *= 1 - lr * wd   (only where the range decays)
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// `t` is the 1-based step count. params, grads, m, v index the same flat buffer; elements
// of [begin, end) outside every DecayRange get no decay.
// The arithmetic runs as the backend's Kernels::adamw_update, one call per run that shares
// its decay; every pointer is memory of that backend.
void adamw_update(model::Kernels& k, float* params, const float* grads, float* m, float* v, size_t begin, size_t end,
                  std::span<const DecayRange> ranges, const AdamWHyper& h, int64_t t, float grad_scale);


// Factor the gradient is multiplied with so its global norm is at most max_norm
// (max_norm <= 0 disables clipping). Same formula as torch.nn.utils.clip_grad_norm_.
float clip_scale(double global_norm, double max_norm);

using spec::LrSchedule;  // train.lr_schedule

// The schedule runs on tokens seen (Megatron's samples): a step's rate depends on how far the job's
// data stream has gone, so a job whose global batch shrinks (an elastic job after a lost replica)
// or changes at a resume moves along the schedule by what it trained, not by its step count.
// With a constant batch it is the step schedule exactly: every figure is an integer number of
// tokens (exact in a double below 2^53), so (position + batch) / warmup rounds to the same double
// as (step + 1) / warmup_steps.
struct LrConfig {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_tokens = 0;
  int64_t total_tokens = 1;  // the end of decay
  LrSchedule kind = LrSchedule::kCosine;
};

// Learning rate of the step that starts after `seen` tokens and trains `batch` tokens: linear
// warm-up lr * (seen + batch) / warmup while seen < warmup, then decay from lr to min_lr until
// total (cosine or linear; constant stays at lr); seen at or past total gets min_lr (constant: lr).
double lr_at(const LrConfig& c, int64_t seen, int64_t batch);

}  // namespace holmes::parallel
