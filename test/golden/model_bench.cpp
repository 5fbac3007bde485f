// Times holmes' CPU training step (forward + backward + clip + AdamW) for one GPT shape;
// driven by scripts/bench_vs_pytorch.sh, which runs PyTorch on the same shape.
// Usage: holmes-model-bench L C NH V B T [steps] [warmup]
// Prints: holmes: tokens_per_s=... ms_per_step=... peak_rss_mb=... gflops=...
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/parallel/adamw.hpp"
#include "model/cpu/blas_core.hpp"
#include "backends/backends.hpp"
#include "model/gpt.hpp"
#include "model/gpt2/gpt2.hpp"

using namespace holmes;

int main(int argc, char** argv) {
  if (argc < 7) {
    fmt::print(stderr, "usage: holmes-model-bench L C NH V B T [steps] [warmup]\n");
    return 2;
  }
  const int L = std::atoi(argv[1]), C = std::atoi(argv[2]), NH = std::atoi(argv[3]);
  const int V = std::atoi(argv[4]), B = std::atoi(argv[5]), T = std::atoi(argv[6]);
  const int steps = argc > 7 ? std::atoi(argv[7]) : 10, warmup = argc > 8 ? std::atoi(argv[8]) : 2;
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Gpt gpt(model::gpt2::config(L, C, NH, V, std::max(T, 1024)), backend, B, T);
  gpt.init_weights(1);
  const size_t P = gpt.num_params();
  std::vector<parallel::DecayRange> ranges;
  for (const auto& t : gpt.layout().tensors()) ranges.push_back({t.offset, t.offset + t.numel, t.weight_decay});
  std::vector<float> m(P, 0.0f), v(P, 0.0f);
  std::vector<int> tokens(B * T), targets(B * T);
  for (int i = 0; i < B * T; ++i) {
    tokens[i] = (i * 7919) % V;
    targets[i] = (i * 104729 + 13) % V;
  }
  const parallel::AdamWHyper hyper{};
  double total_s = 0;
  float loss = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    gpt.zero_grad();
    loss = gpt.forward(tokens.data(), targets.data(), B, T);
    gpt.backward();
    double sq = 0;
    backend.kernels->sum_squares_forward(&sq, gpt.grads(), P);
    const float scale = parallel::clip_scale(std::sqrt(sq), 1.0);
    parallel::adamw_update(*backend.kernels, gpt.params(), gpt.grads(), m.data(), v.data(), 0, P, ranges, hyper, s + 1, scale);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s >= warmup) total_s += dt;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double ms = 1e3 * total_s / steps;
  fmt::print("holmes: openblas core {}\n", model::cpu::ensure_fast_blas());
  fmt::print("holmes: tokens_per_s={:.1f} ms_per_step={:.1f} peak_rss_mb={:.0f} gflops={:.1f} loss={:.4f}\n",
             B * T / (ms / 1e3), ms, ru.ru_maxrss / 1024.0, gpt.flops_per_step(B, T) / (ms * 1e6), loss);
  return 0;
}
