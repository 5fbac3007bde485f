// AdamW against a hand-computed step, clipping, the learning-rate schedule.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "common/errors.hpp"
#include "engine/parallel/adamw.hpp"
#include "backends/backends.hpp"

using namespace holmes::parallel;

namespace {

// The arithmetic is the backend's (Kernels::adamw_update / sum_squares_forward): the CPU's here.
holmes::model::Kernels& cpu() {
  static holmes::model::Backend backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  return *backend.kernels;
}

double grad_sq_sum(const float* g, size_t begin, size_t end) {
  double sq = 0;
  cpu().sum_squares_forward(&sq, g + begin, end - begin);
  return sq;
}

}  // namespace

TEST_CASE("AdamW matches a hand-computed two-step update, decay only where the layout says", "[train]") {
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, m(3, 0.0f), v(3, 0.0f);
  // Element 1 sits in a no-decay range (a bias); element 2 is in no range and must not decay
  // either... except here it is covered by the second decaying range.
  std::vector<DecayRange> ranges = {{0, 1, true}, {1, 2, false}, {2, 3, true}};
  AdamWHyper h{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  std::vector<float> g1 = {0.5f, -0.1f, 0.0f};
  adamw_update(cpu(), p.data(), g1.data(), m.data(), v.data(), 0, 3, ranges, h, 1, 1.0f);
  // Step 1: m_hat = g, v_hat = g^2, so the step is lr * sign(g); decay multiplies by 1 - lr*wd.
  CHECK(p[0] == Approx(0.99 - 0.1).epsilon(1e-6));
  CHECK(p[1] == Approx(-2.0 + 0.1).epsilon(1e-6));
  CHECK(p[2] == Approx(0.495).epsilon(1e-6));  // zero grad: only the decay moves it
  CHECK(m[0] == Approx(0.05));
  CHECK(v[0] == Approx(0.00025).epsilon(1e-4));  // 1 - 0.999f is not exact in float
  std::vector<float> g2 = {0.2f, 0.3f, -0.4f};
  adamw_update(cpu(), p.data(), g2.data(), m.data(), v.data(), 0, 3, ranges, h, 2, 1.0f);
  CHECK(p[0] == Approx(0.791242484).epsilon(1e-6));
  CHECK(p[1] == Approx(-1.949418991).epsilon(1e-6));
  CHECK(p[2] == Approx(0.564463680).epsilon(1e-6));
}

TEST_CASE("AdamW updates only its shard (begin to end) and applies the grad scale", "[train]") {
  std::vector<float> p(10, 1.0f), g(10, 2.0f), m(10, 0.0f), v(10, 0.0f);
  std::vector<DecayRange> ranges = {{0, 10, true}};
  AdamWHyper h{.lr = 0.01f, .weight_decay = 0.0f};
  adamw_update(cpu(), p.data(), g.data(), m.data(), v.data(), 3, 7, ranges, h, 1, 0.5f);
  for (int i = 0; i < 10; ++i) {
    bool inside = i >= 3 && i < 7;
    CHECK(p[i] == Approx(inside ? 0.99 : 1.0).epsilon(1e-6));
    CHECK(m[i] == Approx(inside ? 0.1 * 1.0 : 0.0));  // (1 - b1) * g * scale
  }
  // Gaps between decay ranges get no decay (zero grads, so only decay could move them).
  std::vector<float> q(6, 1.0f), zero(6, 0.0f), m2(6, 0.0f), v2(6, 0.0f);
  std::vector<DecayRange> holes = {{1, 2, true}, {4, 5, true}};
  adamw_update(cpu(), q.data(), zero.data(), m2.data(), v2.data(), 0, 6, holes, {.lr = 0.1f, .weight_decay = 0.5f}, 1, 1.0f);
  CHECK(q == std::vector<float>{1.0f, 0.95f, 1.0f, 1.0f, 0.95f, 1.0f});
}

TEST_CASE("gradient clipping scales the global norm down to the limit", "[train]") {
  std::vector<float> g = {3.0f, 4.0f, 0.0f, 12.0f};  // norm 13
  double sq = grad_sq_sum(g.data(), 0, 2) + grad_sq_sum(g.data(), 2, 4);  // two shards
  CHECK(sq == Approx(169.0));
  float s = clip_scale(std::sqrt(sq), 1.0);
  CHECK(s == Approx(1.0 / 13.0).epsilon(1e-5));
  double clipped = 0;
  for (float x : g) clipped += (x * s) * (x * s);
  CHECK(std::sqrt(clipped) == Approx(1.0).epsilon(1e-5));
  CHECK(clip_scale(0.5, 1.0) == 1.0f);  // below the limit: untouched
  CHECK(clip_scale(13.0, 0.0) == 1.0f);  // 0 disables clipping
}

TEST_CASE("learning rate: linear warm-up then cosine / linear / constant decay to min_lr", "[train]") {
  LrConfig c{.lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .total_steps = 110, .kind = LrSchedule::kCosine};
  CHECK(lr_at(c, 0) == Approx(0.1));
  CHECK(lr_at(c, 4) == Approx(0.5));
  CHECK(lr_at(c, 9) == Approx(1.0));
  CHECK(lr_at(c, 10) == Approx(1.0));
  CHECK(lr_at(c, 60) == Approx(0.55));  // half-way: cos(pi/2) = 0
  CHECK(lr_at(c, 35) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25))));
  CHECK(lr_at(c, 110) == Approx(0.1));
  CHECK(lr_at(c, 500) == Approx(0.1));
  for (int64_t s = 10; s < 110; ++s) CHECK(lr_at(c, s + 1) <= lr_at(c, s) + 1e-12);  // monotone decay
  c.kind = LrSchedule::kLinear;
  CHECK(lr_at(c, 60) == Approx(0.55));
  CHECK(lr_at(c, 35) == Approx(1.0 - 0.9 * 0.25));
  c.kind = LrSchedule::kConstant;
  CHECK(lr_at(c, 5) == Approx(0.6));
  CHECK(lr_at(c, 100) == Approx(1.0));
  c.warmup_steps = 0;
  c.kind = LrSchedule::kCosine;
  CHECK(lr_at(c, 0) == Approx(1.0));
}
