// make_cuda_kernels() against the registry's CPU kernels through the model::Kernels interface, for the
// ops with vocabulary sharding (embedding, cross-entropy) and attention. Odd T (crossing a
// warp), padded vocabulary shards and in-place cross-entropy backward. Skips without a GPU.
#include <catch2/catch.hpp>
#include <random>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda_test_util.hpp"
#include "backends/backends.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;

namespace {

// GPU buffer (after the GPU finished) close to the CPU result: fp32 sums in different orders
// and the CPU's polynomial exp (2e-7 relative) against expf.
void check_close(const DeviceBuffer& gpu, const std::vector<float>& cpu, double atol = 1e-5) {
  HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> want(cpu.begin(), cpu.end());
  CHECK(worst_ratio(to_host<float>(gpu, cpu.size()), want, atol, 1e-4) <= 1.0);
}

struct Shard {
  int vocab_begin, Vl;
};

}  // namespace

TEST_CASE("CUDA embedding ops match the CPU twin on each vocabulary shard", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = cpu_backend.kernels;
  auto gpu = make_cuda_kernels();
  const int B = 3, T = 5, C = 9, V = 50;
  auto tokens = random_ints(B * T, V, 91);
  tokens[0] = tokens[1] = tokens[7];  // repeated tokens: colliding dwte rows
  DeviceBuffer g_tokens = to_device(tokens);
  for (Shard s : {Shard{0, 50}, Shard{20, 24}, Shard{40, 16}}) {
    INFO("vocab_begin " << s.vocab_begin << " Vl " << s.Vl);
    auto wte = random_floats(s.Vl * C, 92), wpe = random_floats(T * C, 93);
    auto dout = random_floats(B * T * C, 94);
    auto dwte = random_floats(s.Vl * C, 95), dwpe = random_floats(T * C, 96);
    DeviceBuffer g_wte = to_device(wte), g_wpe = to_device(wpe), g_dout = to_device(dout);
    DeviceBuffer g_dwte = to_device(dwte), g_dwpe = to_device(dwpe), g_out(B * T * C * 4);

    std::vector<float> out(B * T * C);
    for (bool with_wpe : {true, false}) {
      cpu->embedding_forward(out.data(), tokens.data(), wte.data(), with_wpe ? wpe.data() : nullptr,
                             B, T, C, s.vocab_begin, s.Vl);
      gpu->embedding_forward(g_out.as<float>(), g_tokens.as<int>(), g_wte.as<float>(),
                             with_wpe ? g_wpe.as<float>() : nullptr, B, T, C, s.vocab_begin, s.Vl);
      check_close(g_out, out);
    }
    cpu->embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C,
                            s.vocab_begin, s.Vl);
    gpu->embedding_backward(g_dwte.as<float>(), g_dwpe.as<float>(), g_dout.as<float>(),
                            g_tokens.as<int>(), B, T, C, s.vocab_begin, s.Vl);
    check_close(g_dwte, dwte);
    check_close(g_dwpe, dwpe);
  }
}

TEST_CASE("CUDA attention matches the CPU twin", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = cpu_backend.kernels;
  auto gpu = make_cuda_kernels();
  const int B = 2, T = 37, C = 16, NH = 2;  // T > 32: rows span more than one warp pass
  auto qkv = random_floats(B * T * 3 * C, 101), dout = random_floats(B * T * C, 102);
  DeviceBuffer g_qkv = to_device(qkv), g_dout = to_device(dout);
  DeviceBuffer g_out(B * T * C * 4), g_att(B * NH * T * T * 4), g_scratch(B * NH * T * T * 4);
  DeviceBuffer g_dqkv(B * T * 3 * C * 4);

  std::vector<float> out(B * T * C), att(B * NH * T * T), scratch(att.size()), dqkv(qkv.size());
  cpu->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH, NH);
  gpu->attention_forward(g_out.as<float>(), g_att.as<float>(), g_qkv.as<float>(), B, T, C, NH, NH);
  check_close(g_out, out);
  check_close(g_att, att);
  cpu->attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(),
                          att.data(), B, T, C, NH, NH);
  gpu->attention_backward(g_dqkv.as<float>(), g_scratch.as<float>(), g_dout.as<float>(),
                          g_qkv.as<float>(), g_out.as<float>(), g_att.as<float>(), B, T, C, NH, NH);
  check_close(g_dqkv, dqkv, 1e-4);
}

TEST_CASE("CUDA cross-entropy passes match the CPU twin, padded shard and in place",
          "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = cpu_backend.kernels;
  auto gpu = make_cuda_kernels();
  const int N = 11, V = 50;
  auto targets = random_ints(N, V, 111);
  DeviceBuffer g_targets = to_device(targets);
  for (Shard s : {Shard{0, 50}, Shard{20, 24}, Shard{40, 16}}) {
    INFO("vocab_begin " << s.vocab_begin << " Vl " << s.Vl);
    auto logits = random_floats(N * s.Vl, 112, -4.f, 4.f);
    DeviceBuffer g_logits = to_device(logits), g_max(N * 4), g_stats(N * 2 * 4), g_loss(N * 4);
    std::vector<float> row_max(N), stats(2 * N), losses(N), dlogits(N * s.Vl);
    cpu->crossentropy_max_forward(row_max.data(), logits.data(), N, s.Vl, s.vocab_begin, V);
    gpu->crossentropy_max_forward(g_max.as<float>(), g_logits.as<float>(), N, s.Vl, s.vocab_begin,
                                  V);
    check_close(g_max, row_max);
    cpu->crossentropy_stats_forward(stats.data(), logits.data(), row_max.data(), targets.data(), N,
                                    s.Vl, s.vocab_begin, V);
    gpu->crossentropy_stats_forward(g_stats.as<float>(), g_logits.as<float>(), g_max.as<float>(),
                                    g_targets.as<int>(), N, s.Vl, s.vocab_begin, V);
    check_close(g_stats, stats);
    cpu->crossentropy_forward(losses.data(), stats.data(), row_max.data(), N);
    gpu->crossentropy_forward(g_loss.as<float>(), g_stats.as<float>(), g_max.as<float>(), N);
    check_close(g_loss, losses);
    const float dloss = 1.0f / N;
    cpu->crossentropy_backward(dlogits.data(), logits.data(), row_max.data(), stats.data(),
                               targets.data(), dloss, N, s.Vl, s.vocab_begin, V);
    // In place on the GPU: dlogits aliases logits, as the model does to save memory.
    gpu->crossentropy_backward(g_logits.as<float>(), g_logits.as<float>(), g_max.as<float>(),
                               g_stats.as<float>(), g_targets.as<int>(), dloss, N, s.Vl,
                               s.vocab_begin, V);
    check_close(g_logits, dlogits);
  }
}

TEST_CASE("make_cuda_kernels needs no GPU to construct and names itself", "[cuda]") {
  auto k = make_cuda_kernels();
  REQUIRE(k != nullptr);
  CHECK(std::string(k->name()) == "cuda");
}
