// gemm_self_test: one C = A * B^T per input type on odd sizes, checked against a host
// double-precision product. Small enough to run at start-up (about a millisecond of GPU time
// after the cuBLASLt handle is made).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/device.hpp"
#include "cuda/gemm.hpp"
#include "cuda/device_buffer.hpp"

namespace holmes::cuda {

namespace {

constexpr int kM = 17, kN = 19, kK = 23;

// Deterministic values in [-1, 1] that are exact in bf16 (multiples of 1/64), so the host
// reference and the GPU see identical inputs in both types.
float test_value(int i, int salt) { return float((i * 37 + salt * 11) % 129 - 64) / 64.0f; }

std::uint16_t to_bf16_bits(float x) {  // exact for the values above: truncation suffices
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16_bits(std::uint16_t b) {
  std::uint32_t u = std::uint32_t{b} << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

DeviceBuffer upload(const std::vector<float>& v, DType t) {
  if (t == DType::kF32) return to_device(v);
  std::vector<std::uint16_t> bits(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) bits[i] = to_bf16_bits(v[i]);
  return to_device(bits);
}

// Worst |gpu - host| / (1 + |host|) of C[M,N] = A[M,K] * B[N,K]^T stored as `t`.
double worst_error(GemmRunner& runner, DType t) {
  std::vector<float> a(kM * kK), b(kN * kK);
  for (int i = 0; i < kM * kK; ++i) a[i] = test_value(i, 1);
  for (int i = 0; i < kN * kK; ++i) b[i] = test_value(i, 2);
  DeviceBuffer da = upload(a, t), db = upload(b, t), dc(std::size_t(kM) * kN * dtype_bytes(t));
  GemmShape s;
  s.m = kM;
  s.n = kN;
  s.k = kK;
  s.ab_type = s.c_type = t;
  runner.run(dc.data(), da.data(), db.data(), nullptr, s, 1.0f, 0.0f);
  HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> c(kM * kN);
  if (t == DType::kF32) {
    c = to_host<float>(dc, c.size());
  } else {
    auto bits = to_host<std::uint16_t>(dc, c.size());
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = from_bf16_bits(bits[i]);
  }
  double worst = 0;
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      double want = 0;
      for (int p = 0; p < kK; ++p) want += double(a[i * kK + p]) * b[j * kK + p];
      worst = std::fmax(worst, std::fabs(c[i * kN + j] - want) / (1.0 + std::fabs(want)));
    }
  return worst;
}

}  // namespace

std::string gemm_self_test(int index) {
  std::string why;
  auto gpus = query_gpus(&why);
  if (gpus.empty()) return "no CUDA device: " + why;
  if (index < 0 || index >= int(gpus.size()))
    return fmt::format("GPU index {} out of range: {} GPU(s) found", index, gpus.size());
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = 0;
  // Put the caller's current device back on every path.
  struct Restore {
    int device;
    ~Restore() { (void)cudaSetDevice(device); }
  } restore{previous};
  try {
    HOLMES_CUDA_CHECK(cudaSetDevice(index));
    GemmRunner runner(std::size_t{4} << 20);
    // fp32: accumulation noise only. bf16 output: half an ulp (2^-9) plus noise.
    const struct {
      DType type;
      double tolerance;
    } runs[] = {{DType::kF32, 1e-5}, {DType::kBf16, 5e-3}};
    for (const auto& r : runs) {
      double err = worst_error(runner, r.type);
      if (!(err <= r.tolerance))
        return fmt::format("GPU {} GEMM {}: worst relative error {:.3g} > {:.3g}", index,
                           dtype_name(r.type), err, r.tolerance);
    }
  } catch (const std::exception& e) {
    return fmt::format("GPU {} GEMM self-test failed: {}", index, e.what());
  }
  return "";
}

}  // namespace holmes::cuda
