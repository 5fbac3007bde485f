#include "engine/parallel/adamw.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/errors.hpp"

namespace holmes::parallel {

void adamw_update(model::Kernels& k, float* params, const float* grads, float* m, float* v, size_t begin, size_t end,
                  std::span<const DecayRange> ranges, const AdamWHyper& h, int64_t t, float grad_scale) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(t));
  model::AdamWStep step{.beta1 = h.beta1, .beta2 = h.beta2, .eps = h.eps, .decay_factor = 1.0f,
                        .step_size = static_cast<float>(h.lr / bc1),
                        .inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2)), .grad_scale = grad_scale};
  const float with_decay = 1.0f - h.lr * h.weight_decay;
  // Walk [begin, end) split at the decay ranges' borders; gaps get no decay.
  size_t pos = begin;
  auto run = [&](size_t a, size_t b, bool decay) {
    if (b <= a) return;
    step.decay_factor = decay ? with_decay : 1.0f;
    k.adamw_update(params + a, m + a, v + a, grads + a, b - a, step);
  };
  for (const auto& r : ranges) {
    size_t a = std::max(r.begin, pos), b = std::min(r.end, end);
    if (b <= a) continue;
    run(pos, a, false);
    run(a, b, r.decay);
    pos = b;
  }
  run(pos, end, false);
}

float clip_scale(double global_norm, double max_norm) {
  if (max_norm <= 0 || !std::isfinite(global_norm)) return 1.0f;  // a non-finite norm is reported, not hidden
  return static_cast<float>(std::min(1.0, max_norm / (global_norm + 1e-6)));
}

double lr_at(const LrConfig& c, int64_t seen, int64_t batch) {
  if (seen < c.warmup_tokens)
    return c.lr * (static_cast<double>(seen + batch) / static_cast<double>(c.warmup_tokens));
  if (c.kind == LrSchedule::kConstant) return c.lr;
  if (seen >= c.total_tokens) return c.min_lr;
  const int64_t span = std::max<int64_t>(1, c.total_tokens - c.warmup_tokens);
  const double ratio = static_cast<double>(seen - c.warmup_tokens) / static_cast<double>(span);
  const double coeff = c.kind == LrSchedule::kCosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) : 1.0 - ratio;
  return c.min_lr + coeff * (c.lr - c.min_lr);
}

}  // namespace holmes::parallel
