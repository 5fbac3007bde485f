// The optimizer ops (cuda/optimizer.cu) on both of their paths: 16-byte packs with a tail of
// n % 4 elements, and every element alone when a pointer is off the 16-byte grid; the
// results must match the CPU twin either way (adamw and scale element for element). Also
// sum_squares with n = 0 (no change) and many blocks. Skips without a GPU.
#include <catch2/catch.hpp>

#include "cuda/optimizer.hpp"
#include "cuda_test_util.hpp"
#include "backends/backends.hpp"
#include "parity.hpp"

using namespace holmes;
using namespace holmes::cuda::parity;
using holmes::cuda::test::gpu_or_skip;
using holmes::cuda::test::random_floats;

TEST_CASE("CUDA optimizer ops: packed and element paths agree with the CPU twin",
          "[cuda][optimizer]") {
  if (!gpu_or_skip()) return;
  model::Backend backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Kernels& cpu = *backend.kernels;
  for (std::size_t n : {std::size_t{3}, std::size_t{4}, std::size_t{4097}, std::size_t{300001}})
    for (int shift : {0, 1}) {
      INFO("n " << n << " shift " << shift);
      auto p = random_floats(n, 91), m = random_floats(n, 92), v = random_floats(n, 93, 0.f, 1.f);
      const auto g = random_floats(n, 94);
      const model::AdamWStep st{.beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-6f, .decay_factor = 0.99f,
                                .step_size = 0.02f, .inv_sqrt_bc2 = 2.0f, .grad_scale = 0.5f};
      auto g_p = placed(p, shift), g_m = placed(m, shift), g_v = placed(v, shift);
      auto g_g = placed(g, shift);
      cpu.adamw_update(p.data(), m.data(), v.data(), g.data(), n, st);
      cuda::adamw_update(g_p.dev() + shift, g_m.dev() + shift, g_v.dev() + shift,
                         g_g.dev() + shift, n, st);
      CHECK(normalized_error(placed_values(g_p, shift), widened(p)) <= 1e-5);
      CHECK(normalized_error(placed_values(g_m, shift), widened(m)) <= 1e-5);
      CHECK(normalized_error(placed_values(g_v, shift), widened(v)) <= 1e-5);

      double sq = 0.75;
      cpu.sum_squares_forward(&sq, g.data(), n);
      Guarded<double> g_sq(std::vector<double>{0.75});
      cuda::sum_squares_forward(g_sq.dev(), g_g.dev() + shift, n);
      CHECK(g_sq.values()[0] == Approx(sq).epsilon(1e-12));

      auto x = g;
      cpu.scale_forward(x.data(), -1.5f, n);
      cuda::scale_forward(g_g.dev() + shift, -1.5f, n);
      CHECK(placed_values(g_g, shift) == widened(x));  // one multiply: exact
      for (const auto& guard : {g_p.guards(), g_m.guards(), g_v.guards(), g_g.guards()})
        CHECK(guard.empty());
    }
}

TEST_CASE("CUDA sum_squares_forward with n = 0 leaves the sum as it was", "[cuda][optimizer]") {
  if (!gpu_or_skip()) return;
  Guarded<double> g_sq(std::vector<double>{3.25});
  Guarded<float> g_x(std::vector<float>{1.0f});
  cuda::sum_squares_forward(g_sq.dev(), g_x.dev(), 0);
  CHECK(g_sq.values()[0] == 3.25);
}
