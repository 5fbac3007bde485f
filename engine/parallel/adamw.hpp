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

struct LrConfig {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  LrSchedule kind = LrSchedule::kCosine;
};

// Learning rate of 0-based `step`: linear warm-up lr * (step + 1) / warmup for the first
// warmup steps, then decay from lr to min_lr over the remaining steps (cosine or linear;
// constant stays at lr); steps at or past total_steps get min_lr (constant: lr).
double lr_at(const LrConfig& c, int64_t step);

}  // namespace holmes::parallel
