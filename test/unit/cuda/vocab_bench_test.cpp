// Timings of the vocabulary, LayerNorm and optimizer kernels at GPT-2 124M sizes (B=16,
// T=1024, C=768, V=50304, bf16 activations): a benchmark, not a test. Hidden from ctest and
// from a plain test_cuda run (tag [.]); on a GPU run it with
//     test_cuda "[bench]"
// It prints one line per kernel (milliseconds per call, the bytes it must move, and the
// bandwidth that makes) and asserts nothing about speed.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "cuda/check.hpp"
#include "cuda/layernorm.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/optimizer.hpp"
#include "cuda/vocab.hpp"
#include "cuda_test_util.hpp"

using namespace holmes;
using namespace holmes::cuda;
using holmes::cuda::test::gpu_or_skip;

namespace {

// Mean milliseconds of `f` over 10 calls after one warm-up call.
double time_ms(const std::function<void()>& f) {
  f();
  cudaEvent_t start, stop;
  HOLMES_CUDA_CHECK(cudaEventCreate(&start));
  HOLMES_CUDA_CHECK(cudaEventCreate(&stop));
  constexpr int kCalls = 10;
  HOLMES_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < kCalls; ++i) f();
  HOLMES_CUDA_CHECK(cudaEventRecord(stop));
  HOLMES_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  HOLMES_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  HOLMES_CUDA_CHECK(cudaEventDestroy(start));
  HOLMES_CUDA_CHECK(cudaEventDestroy(stop));
  return ms / kCalls;
}

void report(const char* what, double ms, double bytes) {
  std::printf("bench: %-44s %8.3f ms  %8.1f MB  %7.1f GB/s\n", what, ms, bytes / 1e6,
              bytes / (ms * 1e-3) / 1e9);
}

// Bytes of device memory filled with a fixed pattern that is finite as fp32 and as bf16.
DeviceBuffer filled(std::size_t bytes) {
  DeviceBuffer b(bytes);
  HOLMES_CUDA_CHECK(cudaMemset(b.data(), 0x3c, bytes));
  return b;
}

}  // namespace

TEST_CASE("bench: vocabulary, LayerNorm and optimizer kernels at GPT-2 124M sizes",
          "[.][cuda][bench]") {
  if (!gpu_or_skip()) return;
  const int B = 16, T = 1024, C = 768, V = 50257, Vp = 50304, N = B * T;
  // Zipf-like tokens: P(token < k) = (k / V)^(1/3), so the commonest token appears ~450 times.
  std::mt19937 gen(1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int> tokens(N);
  for (int& t : tokens) t = std::min(V - 1, int(V * std::pow(u(gen), 3.0)));
  DeviceBuffer g_tok = to_device(tokens);

  const std::size_t NC = std::size_t(N) * C, NV = std::size_t(N) * Vp;
  DeviceBuffer act = filled(NC * 2), act2 = filled(NC * 2), dact = filled(NC * 2);
  DeviceBuffer wte = filled(std::size_t(Vp) * C * 2), wpe = filled(std::size_t(T) * C * 2);
  DeviceBuffer dwte = filled(std::size_t(Vp) * C * 4), dwpe = filled(std::size_t(T) * C * 4);
  DeviceBuffer logits = filled(NV * 2), row_max(N * 4), stats(N * 8);
  auto b16 = [](const DeviceBuffer& b) { return b.as<bf16>(); };

  report("embedding_forward bf16", time_ms([&] {
           embedding_forward(b16(act), g_tok.as<int>(), b16(wte), b16(wpe), B, T, C, 0, Vp);
         }),
         NC * 2 * 3.0);
  report("embedding_backward bf16 dout (sort + sums)", time_ms([&] {
           embedding_backward(dwte.as<float>(), dwpe.as<float>(), b16(dact), g_tok.as<int>(), B,
                              T, C, 0, Vp);
         }),
         NC * 2 * 2.0);
  report("crossentropy_fused_forward bf16", time_ms([&] {
           crossentropy_fused_forward(row_max.as<float>(), stats.as<float>(), b16(logits),
                                      g_tok.as<int>(), N, Vp, 0, V);
         }),
         NV * 2.0);
  DeviceBuffer sums = filled(N * 8);  // sums of 0.0115 each (the fill): finite gradients
  report("crossentropy_backward bf16 in place", time_ms([&] {
           crossentropy_backward(b16(logits), b16(logits), row_max.as<float>(),
                                 sums.as<float>(), g_tok.as<int>(), 1.0f / N, N, Vp, 0, V);
         }),
         NV * 4.0);

  DeviceBuffer w = filled(C * 2), bias = filled(C * 2), mean(N * 4), rstd(N * 4);
  DeviceBuffer dw = filled(C * 4), db = filled(C * 4);
  report("layernorm_forward bf16", time_ms([&] {
           layernorm_forward(b16(act2), mean.as<float>(), rstd.as<float>(), b16(act), b16(w),
                             b16(bias), N, C);
         }),
         NC * 2 * 2.0);
  report("layernorm_backward bf16", time_ms([&] {
           layernorm_backward(b16(act2), dw.as<float>(), db.as<float>(), b16(dact), b16(act),
                              b16(w), mean.as<float>(), rstd.as<float>(), N, C);
         }),
         NC * 2 * 4.0);

  const std::size_t P = 124'475'904;  // GPT-2 124M parameters (Vp = 50304)
  DeviceBuffer p = filled(P * 4), m = filled(P * 4), v = filled(P * 4), g = filled(P * 4);
  DeviceBuffer sq(8);
  const model::AdamWStep st{};
  report("sum_squares_forward (124M fp32)",
         time_ms([&] { sum_squares_forward(sq.as<double>(), g.as<float>(), P); }), P * 4.0);
  report("adamw_update (124M fp32)", time_ms([&] {
           adamw_update(p.as<float>(), m.as<float>(), v.as<float>(), g.as<float>(), P, st);
         }),
         P * 4.0 * 7);
}
