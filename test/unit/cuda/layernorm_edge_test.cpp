// LayerNorm (cuda/layernorm.cu) where the parity table's shapes do not reach: pointers off the
// 16-byte grid with C a multiple of the pack (the scalar path must still be taken), fewer
// channels than a warp, and enough rows for many partial-sum groups of dweight/dbias (plus a
// last group that is not full). fp32 and bf16 against the registry's CPU kernels; skips
// without a GPU.
#include <catch2/catch.hpp>

#include "cuda/layernorm.hpp"
#include "cuda_test_util.hpp"
#include "backends/backends.hpp"
#include "parity.hpp"

using namespace holmes;
using namespace holmes::cuda::parity;
using holmes::cuda::test::gpu_or_skip;
using holmes::cuda::test::random_floats;

namespace {

template <class E>
void check_layernorm(int N, int C, int shift) {
  INFO(precision_of<E>() << " N " << N << " C " << C << " shift " << shift);
  model::Backend backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Kernels& cpu = *backend.kernels;
  auto inp = random_floats(std::size_t(N) * C, 81, -3.f, 3.f), w = random_floats(C, 82);
  auto b = random_floats(C, 83), dout = random_floats(std::size_t(N) * C, 84);
  auto dinp = random_floats(std::size_t(N) * C, 85);
  for (auto* v : {&inp, &w, &b, &dout, &dinp}) round_as<E>(*v);
  auto dw = random_floats(C, 86), db = random_floats(C, 87);
  std::vector<float> out(inp.size()), mean(N), rstd(N);
  cpu.layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);

  auto g_inp = placed(store_as<E>(inp), shift), g_w = placed(store_as<E>(w), shift);
  auto g_b = placed(store_as<E>(b), shift), g_dout = placed(store_as<E>(dout), shift);
  auto g_dinp = placed(store_as<E>(dinp), shift);
  auto g_out = placed(std::vector<E>(inp.size()), shift);
  auto g_mean = Guarded<float>::poisoned(N), g_rstd = Guarded<float>::poisoned(N);
  Guarded<float> g_dw(dw), g_db(db);
  cuda::layernorm_forward(g_out.dev() + shift, g_mean.dev(), g_rstd.dev(), g_inp.dev() + shift,
                          g_w.dev() + shift, g_b.dev() + shift, N, C);
  const double tol = std::is_same_v<E, model::bf16> ? 1e-2 : 1e-5;
  CHECK(normalized_error(placed_values(g_out, shift), widened(out)) <= tol);
  CHECK(normalized_error(g_mean.values(), widened(mean)) <= 1e-5);
  CHECK(normalized_error(g_rstd.values(), widened(rstd)) <= 1e-5);

  cpu.layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                         mean.data(), rstd.data(), N, C);
  cuda::layernorm_backward(g_dinp.dev() + shift, g_dw.dev(), g_db.dev(), g_dout.dev() + shift,
                           g_inp.dev() + shift, g_w.dev() + shift, g_mean.dev(), g_rstd.dev(), N,
                           C);
  CHECK(normalized_error(placed_values(g_dinp, shift), widened(dinp)) <= tol);
  CHECK(normalized_error(g_dw.values(), widened(dw)) <= 1e-5);
  CHECK(normalized_error(g_db.values(), widened(db)) <= 1e-5);
  for (const auto& g : {g_out.guards(), g_dinp.guards(), g_dw.guards(), g_db.guards()})
    CHECK(g.empty());
}

}  // namespace

TEST_CASE("CUDA LayerNorm: misaligned pointers, narrow rows, many row groups", "[cuda][layernorm]") {
  if (!gpu_or_skip()) return;
  for (int shift : {0, 1}) {
    check_layernorm<float>(13, 64, shift);  // shifted: C fits packs, the pointers do not
    check_layernorm<model::bf16>(13, 64, shift);
  }
  check_layernorm<float>(9, 7, 0);  // fewer channels than lanes
  check_layernorm<model::bf16>(9, 7, 0);
  check_layernorm<float>(1000, 48, 0);  // 16 groups of 64 rows, the last one of 40
  check_layernorm<model::bf16>(1000, 48, 0);
}
