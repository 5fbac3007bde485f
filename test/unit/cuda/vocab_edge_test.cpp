// The vocabulary ops (cuda/vocab.cu) where the parity table's shapes do not reach: pointers off
// the 16-byte grid (the scalar head of a row, and in-place backward with logits and dlogits
// misaligned differently), GPT-2's Vl = 50304 (many packs per thread), a shard that holds
// only padding, and embedding backward with one long run of one token or no token of the
// shard at all. Against the registry's CPU kernels; skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>

#include "cuda/vocab.hpp"
#include "cuda_test_util.hpp"
#include "backends/backends.hpp"
#include "parity.hpp"

using namespace holmes;
using namespace holmes::cuda::parity;
using holmes::cuda::test::gpu_or_skip;
using holmes::cuda::test::random_floats;
using holmes::cuda::test::random_ints;

namespace {

// Cross-entropy of N rows of one shard: fused and two-pass forward and backward from
// logits placed on the 16-byte grid or one element off it, against the CPU.
template <class E>
void check_crossentropy(int N, int Vl, int vocab_begin, int V, bool shift) {
  INFO(precision_of<E>() << " N " << N << " Vl " << Vl << " vocab_begin " << vocab_begin
                         << " V " << V << (shift ? " shifted" : " aligned"));
  model::Backend backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Kernels& cpu = *backend.kernels;
  auto logits = random_floats(std::size_t(N) * Vl, 61, -6.f, 6.f);
  round_as<E>(logits);
  const auto targets = random_ints(N, V, 62);
  std::vector<float> row_max(N), stats(2 * N), dlogits(logits.size());
  cpu.crossentropy_max_forward(row_max.data(), logits.data(), N, Vl, vocab_begin, V);
  cpu.crossentropy_stats_forward(stats.data(), logits.data(), row_max.data(), targets.data(), N,
                                 Vl, vocab_begin, V);
  cpu.crossentropy_backward(dlogits.data(), logits.data(), row_max.data(), stats.data(),
                            targets.data(), 0.5f, N, Vl, vocab_begin, V);

  Guarded<int> g_tgt(targets);
  Guarded<E> g_logits = placed(store_as<E>(logits), shift ? 1 : 0);
  auto* l = g_logits.dev() + (shift ? 1 : 0);
  auto g_max = Guarded<float>::poisoned(N), g_stats = Guarded<float>::poisoned(2 * N);
  auto g_fmax = Guarded<float>::poisoned(N), g_fstats = Guarded<float>::poisoned(2 * N);
  cuda::crossentropy_max_forward(g_max.dev(), l, N, Vl, vocab_begin, V);
  cuda::crossentropy_stats_forward(g_stats.dev(), l, g_max.dev(), g_tgt.dev(), N, Vl, vocab_begin,
                                   V);
  cuda::crossentropy_fused_forward(g_fmax.dev(), g_fstats.dev(), l, g_tgt.dev(), N, Vl,
                                   vocab_begin, V);
  CHECK(g_max.values() == widened(row_max));  // a max of the same values: exact
  CHECK(g_fmax.values() == widened(row_max));
  CHECK(normalized_error(g_stats.values(), widened(stats)) <= 1e-5);
  CHECK(normalized_error(g_fstats.values(), widened(stats)) <= 1e-5);

  // Out of place into an aligned buffer (so a shifted input goes the all-scalar way), then in
  // place.
  const double tol = std::is_same_v<E, model::bf16> ? 1e-2 : 1e-5;
  auto g_d = Guarded<E>::poisoned(logits.size());
  cuda::crossentropy_backward(g_d.dev(), l, g_max.dev(), g_stats.dev(), g_tgt.dev(), 0.5f, N, Vl,
                              vocab_begin, V);
  CHECK(normalized_error(g_d.values(), widened(dlogits)) <= tol);
  cuda::crossentropy_backward(l, l, g_max.dev(), g_stats.dev(), g_tgt.dev(), 0.5f, N, Vl,
                              vocab_begin, V);
  const auto inplace = shift ? placed_values(g_logits, 1) : g_logits.values();
  CHECK(normalized_error(inplace, widened(dlogits)) <= tol);
  CHECK(g_logits.guards().empty());
  CHECK(g_d.guards().empty());
}

}  // namespace

TEST_CASE("CUDA cross-entropy: misaligned rows, GPT-2's vocabulary, in place", "[cuda][vocab]") {
  if (!gpu_or_skip()) return;
  for (bool shift : {false, true}) {
    check_crossentropy<float>(5, 50304, 0, 50257, shift);   // 47 padded columns
    check_crossentropy<model::bf16>(5, 50304, 0, 50257, shift);
    check_crossentropy<float>(9, 13, 26, 37, shift);        // second shard: 11 valid of 13
    check_crossentropy<model::bf16>(9, 13, 26, 37, shift);
  }
}

TEST_CASE("CUDA cross-entropy: a shard of padding only gives -inf, 0 and zero gradients",
          "[cuda][vocab]") {
  if (!gpu_or_skip()) return;
  const int N = 3, Vl = 16, vocab_begin = 64, V = 60;  // every global id >= V
  const auto logits = random_floats(N * Vl, 63);
  const std::vector<int> targets = {1, 30, 59};
  Guarded<float> g_logits(logits);
  Guarded<int> g_tgt(targets);
  auto g_max = Guarded<float>::poisoned(N), g_stats = Guarded<float>::poisoned(2 * N);
  cuda::crossentropy_fused_forward(g_max.dev(), g_stats.dev(), g_logits.dev(), g_tgt.dev(), N, Vl,
                                   vocab_begin, V);
  for (double m : g_max.values()) CHECK(m == -INFINITY);
  for (double s : g_stats.values()) CHECK(s == 0.0);
  // The backward of such a shard (row_max and stats from the other shards) writes zeros.
  Guarded<float> g_rmax(std::vector<float>(N, 1.0f)), g_rstats(std::vector<float>(2 * N, 2.0f));
  cuda::crossentropy_backward(g_logits.dev(), g_logits.dev(), g_rmax.dev(), g_rstats.dev(),
                              g_tgt.dev(), 1.0f, N, Vl, vocab_begin, V);
  for (double d : g_logits.values()) CHECK(d == 0.0);
}

TEST_CASE("CUDA embedding: one long run of a token, tokens of other shards, misaligned tables",
          "[cuda][vocab]") {
  if (!gpu_or_skip()) return;
  model::Backend backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Kernels& cpu = *backend.kernels;
  const int B = 2, T = 300, C = 24, N = B * T;
  const auto dout = random_floats(std::size_t(N) * C, 64);
  Guarded<float> g_dout(dout);

  // Every position holds token 7 of shard [5, 15): one run of 600 positions.
  {
    const std::vector<int> tokens(N, 7);
    auto dwte = random_floats(10 * C, 65);
    Guarded<int> g_tok(tokens);
    Guarded<float> g_dwte(dwte);
    cpu.embedding_backward(dwte.data(), nullptr, dout.data(), tokens.data(), B, T, C, 5, 10);
    cuda::embedding_backward(g_dwte.dev(), nullptr, g_dout.dev(), g_tok.dev(), B, T, C, 5, 10);
    CHECK(normalized_error(g_dwte.values(), widened(dwte)) <= 1e-5);
    CHECK(g_dwte.guards().empty());
  }
  // No token in shard [1000, 1010): dwte stays exactly as it was, dwpe still accumulates.
  {
    const auto tokens = random_ints(N, 1000, 66);
    const auto dwte = random_floats(10 * C, 67);
    auto dwpe = random_floats(T * C, 68);
    std::vector<float> cpu_dwte = dwte;
    Guarded<int> g_tok(tokens);
    Guarded<float> g_dwte(dwte), g_dwpe(dwpe);
    cpu.embedding_backward(cpu_dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, 1000,
                           10);
    cuda::embedding_backward(g_dwte.dev(), g_dwpe.dev(), g_dout.dev(), g_tok.dev(), B, T, C, 1000,
                             10);
    CHECK(g_dwte.values() == widened(dwte));
    CHECK(normalized_error(g_dwpe.values(), widened(dwpe)) <= 1e-5);
  }
  // Tables one element off the 16-byte grid: the scalar forward and backward paths.
  {
    const int Vl = 50;
    auto tokens = random_ints(N, Vl, 69);
    auto wte = random_floats(Vl * C, 70), wpe = random_floats(T * C, 71);
    round_as<model::bf16>(wte);
    round_as<model::bf16>(wpe);
    std::vector<float> out(std::size_t(N) * C);
    cpu.embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, 0, Vl);
    Guarded<int> g_tok(tokens);
    auto g_wte = placed(store_as<model::bf16>(wte), 1);
    Guarded<model::bf16> g_wpe(store_as<model::bf16>(wpe));
    auto g_out = Guarded<model::bf16>::poisoned(out.size());
    cuda::embedding_forward(g_out.dev(), g_tok.dev(), g_wte.dev() + 1, g_wpe.dev(), B, T, C, 0, Vl);
    CHECK(normalized_error(g_out.values(), widened(out)) <= 1e-2);

    auto dwte = random_floats(Vl * C, 72);
    auto bf_dout = dout;
    round_as<model::bf16>(bf_dout);
    auto g_bdout = placed(store_as<model::bf16>(bf_dout), 1);
    Guarded<float> g_dwte(dwte);
    cpu.embedding_backward(dwte.data(), nullptr, bf_dout.data(), tokens.data(), B, T, C, 0, Vl);
    cuda::embedding_backward(g_dwte.dev(), nullptr, g_bdout.dev() + 1, g_tok.dev(), B, T, C, 0, Vl);
    CHECK(normalized_error(g_dwte.values(), widened(dwte)) <= 1e-5);
  }
}
