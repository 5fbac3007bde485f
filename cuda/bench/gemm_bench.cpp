// holmes_gemm_bench: times GemmRunner on the GEMMs of one GPT layer and prints TFLOP/s per
// shape and type. For a session with a GPU (scripts/gpu_smoke.sh runs it); speed is
// measured here, never in unit tests.
//
//   holmes_gemm_bench [BT] [C] [iters]     defaults: 8192 768 50 (GPT-2 small, B*T = 8*1024)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/gemm.hpp"
#include "cuda/device_buffer.hpp"

using namespace holmes::cuda;

namespace {

// Mean seconds per call of one GEMM after one warm-up call (which also builds the plan).
double time_gemm(GemmRunner& runner, const GemmShape& s, int iters) {
  std::size_t ab = dtype_bytes(s.ab_type), cb = dtype_bytes(s.c_type);
  DeviceBuffer a(std::size_t(s.m) * s.k * ab), b(std::size_t(s.k) * s.n * ab),
      c(std::size_t(s.m) * s.n * cb);
  a.zero();
  b.zero();
  c.zero();
  runner.run(c.data(), a.data(), b.data(), nullptr, s, 1.f, 0.f);
  cudaEvent_t start, stop;
  HOLMES_CUDA_CHECK(cudaEventCreate(&start));
  HOLMES_CUDA_CHECK(cudaEventCreate(&stop));
  HOLMES_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) runner.run(c.data(), a.data(), b.data(), nullptr, s, 1.f, 0.f);
  HOLMES_CUDA_CHECK(cudaEventRecord(stop));
  HOLMES_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  HOLMES_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / iters;
}

GemmShape shape(int m, int n, int k, bool ta, bool tb, DType ab, DType c, bool tf32 = false) {
  GemmShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.trans_a = ta;
  s.trans_b = tb;
  s.ab_type = ab;
  s.c_type = c;
  s.fast_tf32 = tf32;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int bt = argc > 1 ? std::atoi(argv[1]) : 8192;
  int ch = argc > 2 ? std::atoi(argv[2]) : 768;
  int iters = argc > 3 ? std::atoi(argv[3]) : 50;
  if (bt <= 0 || ch <= 0 || iters <= 0) {
    std::fprintf(stderr, "usage: holmes_gemm_bench [BT>0] [C>0] [iters>0]\n");
    return 2;
  }
  std::string why;
  auto gpus = query_gpus(&why);
  if (gpus.empty()) {
    std::printf("HOLMES_SKIP: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  std::printf("GPU 0: %s, %d SMs, sm_%d%d\n", gpus[0].name.c_str(), gpus[0].sm_count,
              gpus[0].cc_major, gpus[0].cc_minor);
  try {
    GemmRunner runner;
    struct Row {
      const char* what;
      DType ab, c;
      bool tf32;
    };
    const Row types[] = {{"f32", DType::kF32, DType::kF32, false},
                         {"tf32", DType::kF32, DType::kF32, true},
                         {"bf16", DType::kBf16, DType::kBf16, false}};
    for (const Row& t : types) {
      // The four GEMMs of a GPT MLP block (fc: C -> 4C, proj: 4C -> C) and a backward one.
      const GemmShape shapes[] = {shape(bt, 3 * ch, ch, false, true, t.ab, t.c, t.tf32),
                                  shape(bt, 4 * ch, ch, false, true, t.ab, t.c, t.tf32),
                                  shape(bt, ch, 4 * ch, false, true, t.ab, t.c, t.tf32),
                                  shape(4 * ch, ch, bt, true, false, t.ab, t.c, t.tf32)};
      for (const GemmShape& s : shapes) {
        double sec = time_gemm(runner, s, iters);
        double tflops = 2.0 * s.m * s.n * s.k / sec / 1e12;
        std::printf("%-5s %-40s %9.3f ms %8.1f TFLOP/s\n", t.what, describe(s).c_str(), sec * 1e3,
                    tflops);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "holmes_gemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
