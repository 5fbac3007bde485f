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

// The schedule of a job with a constant batch of G tokens: step s starts after s x G tokens.
static double lr_of_step(const LrConfig& c, int64_t step, int64_t tokens_per_step = 1) {
  return lr_at(c, step * tokens_per_step, tokens_per_step);
}

TEST_CASE("learning rate: linear warm-up then cosine / linear / constant decay to min_lr", "[train]") {
  LrConfig c{.lr = 1.0, .min_lr = 0.1, .warmup_tokens = 10, .total_tokens = 110, .kind = LrSchedule::kCosine};
  CHECK(lr_of_step(c, 0) == Approx(0.1));
  CHECK(lr_of_step(c, 4) == Approx(0.5));
  CHECK(lr_of_step(c, 9) == Approx(1.0));
  CHECK(lr_of_step(c, 10) == Approx(1.0));
  CHECK(lr_of_step(c, 60) == Approx(0.55));  // half-way: cos(pi/2) = 0
  CHECK(lr_of_step(c, 35) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25))));
  CHECK(lr_of_step(c, 110) == Approx(0.1));
  CHECK(lr_of_step(c, 500) == Approx(0.1));
  for (int64_t s = 10; s < 110; ++s) CHECK(lr_of_step(c, s + 1) <= lr_of_step(c, s) + 1e-12);  // monotone decay
  c.kind = LrSchedule::kLinear;
  CHECK(lr_of_step(c, 60) == Approx(0.55));
  CHECK(lr_of_step(c, 35) == Approx(1.0 - 0.9 * 0.25));
  c.kind = LrSchedule::kConstant;
  CHECK(lr_of_step(c, 5) == Approx(0.6));
  CHECK(lr_of_step(c, 100) == Approx(1.0));
  c.warmup_tokens = 0;
  c.kind = LrSchedule::kCosine;
  CHECK(lr_of_step(c, 0) == Approx(1.0));
}

TEST_CASE("learning rate by tokens seen: a constant batch gives the step schedule to the bit", "[train]") {
  // G tokens per step (not a power of two), warm-up 7 steps, decay over 50: every step's rate
  // equals the schedule in steps (warm-up and total counted as 1-token steps) exactly.
  for (LrSchedule kind : {LrSchedule::kCosine, LrSchedule::kLinear, LrSchedule::kConstant}) {
    const int64_t G = 24 * 1000;
    const LrConfig steps{.lr = 6e-4, .min_lr = 6e-5, .warmup_tokens = 7, .total_tokens = 50, .kind = kind};
    const LrConfig tokens{.lr = 6e-4, .min_lr = 6e-5, .warmup_tokens = 7 * G, .total_tokens = 50 * G, .kind = kind};
    for (int64_t s = 0; s < 60; ++s) CHECK(lr_of_step(tokens, s, G) == lr_of_step(steps, s));
  }
}

TEST_CASE("learning rate by tokens seen: a smaller batch moves along the schedule by what it trains", "[train]") {
  // Three replicas of 8 x 100 tokens, then two from step 20 (one replica lost): the rate at each
  // step is the one of the tokens seen, between the step counts of full and reduced batches.
  const int64_t full = 3 * 800, reduced = 2 * 800;
  const LrConfig c{.lr = 1.0, .min_lr = 0.0, .warmup_tokens = 5 * full, .total_tokens = 100 * full,
                   .kind = LrSchedule::kLinear};
  int64_t seen = 20 * full;
  for (int64_t step = 20; step < 60; ++step) {
    const double lr = lr_at(c, seen, reduced);
    CHECK(lr == Approx(1.0 - static_cast<double>(seen - 5 * full) / (95.0 * full)));
    // At step 20 both have seen 20 full batches; after it the full batch would be further on.
    if (step == 20) CHECK(lr == lr_of_step(c, step, full));
    else CHECK(lr > lr_of_step(c, step, full));
    seen += reduced;
  }
  // Past the end of decay: min_lr, whatever the step.
  CHECK(lr_at(c, 100 * full, reduced) == 0.0);
}
