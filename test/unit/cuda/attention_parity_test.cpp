// holmes::cuda::Attention against the CPU twin (model/cpu attention), per method x precision x
// shape: odd (B=3, T=37, C=80, NH=5: HS=16), aligned (B=2, T=64, C=128, NH=2: HS=64), a
// GPT-2 124M layer (B=1, T=1024, C=768, NH=12), and grouped-query shapes (KVH < NH): odd with
// one key/value head (multi-query), aligned with 4 query heads on 2, and a Llama-3-like head
// layout (NH=8 on KVH=2, HS=64, T=256). Random inputs (bf16: rounded on the host first
// so the CPU sees the GPU's values), outputs poisoned with NaN before every run, guard regions
// around out and dqkv checked unchanged, and two backward runs compared bit for bit. Also the
// state each method keeps: probabilities (exact, fallback) or softmax statistics (cudnn).
// Skips without a GPU.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/attention.hpp"
#include "cuda/check.hpp"
#include "cuda/cudnn_api.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda_test_util.hpp"
#include "model/cpu/cpu_ops.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;
using holmes::DType;

namespace {

using Shape = AttentionShape;
constexpr Shape kShapes[] = {{3, 37, 80, 5, 5},   {2, 64, 128, 2, 2}, {1, 1024, 768, 12, 12},
                             {3, 37, 80, 5, 1},   {2, 64, 128, 4, 2}, {2, 256, 512, 8, 2}};

constexpr std::size_t kGuard = 256;        // bytes of canary on each side of an output
constexpr unsigned char kCanary = 0xA5;

// A device buffer of `bytes` with a canary region before and after it; the interior is
// poisoned with NaN (0xFF bytes are a NaN in fp32 and bf16) before every run.
struct Guarded {
  DeviceBuffer buf;
  std::size_t bytes;
  explicit Guarded(std::size_t n) : buf(n + 2 * kGuard), bytes(n) { poison(); }
  void* data() const { return static_cast<char*>(buf.data()) + kGuard; }
  void poison() {
    std::vector<unsigned char> host(bytes + 2 * kGuard, 0xFF);
    std::memset(host.data(), kCanary, kGuard);
    std::memset(host.data() + kGuard + bytes, kCanary, kGuard);
    buf.upload(host.data(), host.size());
  }
  // The interior as floats (fp32 storage, or bf16 widened); the guards must be intact.
  std::vector<float> read(bool bf16) const {
    HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> host(bytes + 2 * kGuard);
    buf.download(host.data(), host.size());
    for (std::size_t i = 0; i < kGuard; ++i) {
      INFO("guard byte " << i);
      REQUIRE(host[i] == kCanary);
      REQUIRE(host[kGuard + bytes + i] == kCanary);
    }
    const unsigned char* p = host.data() + kGuard;
    std::vector<float> out(bytes / (bf16 ? 2 : 4));
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (bf16) {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = bf16_value(b);
      } else {
        std::memcpy(&out[i], p + 4 * i, 4);
      }
    }
    return out;
  }
  std::vector<unsigned char> raw() const {
    HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> host(bytes);
    HOLMES_CUDA_CHECK(cudaMemcpy(host.data(), data(), bytes, cudaMemcpyDeviceToHost));
    return host;
  }
};

// Softmax statistics log(sum_j<=t exp(s_j)) of the scaled scores, double on the host.
std::vector<float> reference_stats(const std::vector<float>& qkv, const Shape& s) {
  const int HS = s.HS(), W = s.W(), G = s.NH / s.KVH;
  const double scale = 1.0 / std::sqrt(double(HS));
  std::vector<float> stats(std::size_t(s.B) * s.NH * s.T);
  std::vector<double> row(s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h)
      for (int t = 0; t < s.T; ++t) {
        const float* q = &qkv[(std::size_t(b) * s.T + t) * W + h * HS];
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          const float* k = &qkv[(std::size_t(b) * s.T + j) * W + s.C + (h / G) * HS];
          double dot = 0;
          for (int d = 0; d < HS; ++d) dot += double(q[d]) * k[d];
          row[j] = dot * scale;
          mx = std::fmax(mx, row[j]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += std::exp(row[j] - mx);
        stats[(std::size_t(b) * s.NH + h) * s.T + t] = float(mx + std::log(sum));
      }
  return stats;
}

std::vector<std::uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<std::uint16_t> bits(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) bits[i] = bf16_bits(v[i]);
  return bits;
}

const char* name(Attention::Method m) { return attention_method_name(m); }

// One method, precision and shape: forward and backward against the CPU, the kept state,
// guards, and a bit-identical second backward.
void check_attention(Attention::Method method, holmes::DType p, const Shape& s) {
  const bool is_bf16 = p == holmes::DType::kBf16;
  const std::size_t elem = is_bf16 ? 2 : 4;
  INFO(name(method) << " " << holmes::dtype_name(p) << " B=" << s.B << " T=" << s.T
                    << " C=" << s.C << " NH=" << s.NH << " KVH=" << s.KVH);
  const std::size_t n_qkv = std::size_t(s.B) * s.T * s.W(), n_out = std::size_t(s.B) * s.T * s.C;
  const std::size_t n_att = std::size_t(s.B) * s.NH * s.T * s.T;
  // Uniform in [-1, 1]: scores stay within a few units, so rounding them to bf16 (the fallback
  // keeps bf16 scores) moves probabilities by well under the 1e-2 tolerance.
  auto qkv = random_floats(n_qkv, 1000 + s.T), dout = random_floats(n_out, 2000 + s.T);
  if (is_bf16) {
    round_to_bf16(qkv);
    round_to_bf16(dout);
  }
  // CPU twin on the same (rounded) values.
  std::vector<float> out(n_out), att(n_att), scratch(n_att), dqkv(n_qkv);
  holmes::model::cpu::attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH, s.KVH);
  holmes::model::cpu::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                                         att.data(), s.B, s.T, s.C, s.NH, s.KVH);

  Attention gpu(nullptr, method);
  const holmes::model::AttentionPlan plan = gpu.plan(p, s.B, s.T, s.C, s.NH, s.KVH);
  INFO("plan: " << plan.method);
  REQUIRE(gpu.method(p) == method);
  DeviceBuffer g_qkv = is_bf16 ? to_device(to_bf16_bits(qkv)) : to_device(qkv);
  DeviceBuffer g_dout = is_bf16 ? to_device(to_bf16_bits(dout)) : to_device(dout);
  Guarded g_out(n_out * elem), g_dqkv(n_qkv * elem);
  Guarded g_att(plan.state_floats * 4), g_scratch(std::max<std::size_t>(plan.scratch_floats, 1) * 4);

  auto forward = [&] {
    if (is_bf16)
      gpu.forward(static_cast<holmes::cuda::bf16*>(g_out.data()), static_cast<float*>(g_att.data()),
                  g_qkv.as<holmes::cuda::bf16>(), s.B, s.T, s.C, s.NH, s.KVH);
    else
      gpu.forward(static_cast<float*>(g_out.data()), static_cast<float*>(g_att.data()),
                  g_qkv.as<float>(), s.B, s.T, s.C, s.NH, s.KVH);
  };
  auto backward = [&] {
    g_dqkv.poison();
    g_scratch.poison();
    if (is_bf16)
      gpu.backward(static_cast<holmes::cuda::bf16*>(g_dqkv.data()),
                   static_cast<float*>(g_scratch.data()), g_dout.as<holmes::cuda::bf16>(),
                   g_qkv.as<holmes::cuda::bf16>(), static_cast<holmes::cuda::bf16*>(g_out.data()),
                   static_cast<float*>(g_att.data()), s.B, s.T, s.C, s.NH, s.KVH);
    else
      gpu.backward(static_cast<float*>(g_dqkv.data()), static_cast<float*>(g_scratch.data()),
                   g_dout.as<float>(), g_qkv.as<float>(), static_cast<float*>(g_out.data()),
                   static_cast<float*>(g_att.data()), s.B, s.T, s.C, s.NH, s.KVH);
  };

  forward();
  const std::vector<float> got_out = g_out.read(is_bf16);
  const double tol_fwd = is_bf16 ? 1e-2 : 1e-5, tol_bwd = is_bf16 ? 2e-2 : 1e-4;
  CHECK(normalized_error(got_out, out) <= tol_fwd);

  // The state: statistics for cudnn (fp32), probabilities otherwise (bf16 packed for bf16).
  if (method == Attention::Method::kCudnn) {
    CHECK(normalized_error(g_att.read(false), reference_stats(qkv, s)) <= 1e-3);
  } else {
    std::vector<float> got_att = g_att.read(is_bf16);
    got_att.resize(n_att);  // bf16: the last float may hold a padding half
    CHECK(normalized_error(got_att, att) <= (is_bf16 ? 1e-2 : 1e-5));
  }

  backward();
  const std::vector<float> got_dqkv = g_dqkv.read(is_bf16);
  CHECK(normalized_error(got_dqkv, dqkv) <= tol_bwd);
  const std::vector<unsigned char> first = g_dqkv.raw();
  backward();
  CHECK(g_dqkv.raw() == first);  // deterministic: the same bits on a second run
  (void)g_scratch.read(false);   // its guards too
}

}  // namespace

TEST_CASE("exact attention (fp32) matches the CPU twin, deterministic", "[cuda][attention]") {
  if (!gpu_or_skip()) return;
  for (const Shape& s : kShapes) check_attention(Attention::Method::kExact, holmes::DType::kF32, s);
}

TEST_CASE("fallback attention (cuBLASLt + softmax kernel) matches the CPU twin in fp32 and bf16",
          "[cuda][attention]") {
  if (!gpu_or_skip()) return;
  for (const Shape& s : kShapes) {
    check_attention(Attention::Method::kFallback, holmes::DType::kF32, s);
    check_attention(Attention::Method::kFallback, holmes::DType::kBf16, s);
  }
}

TEST_CASE("cuDNN attention (bf16) matches the CPU twin where cuDNN supports the shape",
          "[cuda][attention]") {
  if (!gpu_or_skip()) return;
  std::string why;
  if (!cudnn_available(&why)) {
    std::printf("HOLMES_SKIP: cuDNN not loadable (%s)\n", why.c_str());
    return;
  }
  int ran = 0;
  for (const Shape& s : kShapes) {
    const std::string limit = cudnn_attention_limits(cudnn_version(), s.T, s.C / s.NH);
    if (!limit.empty()) {
      WARN("cuDNN " << cudnn_version() << " skips T=" << s.T << ": " << limit);
      continue;
    }
    check_attention(Attention::Method::kCudnn, holmes::DType::kBf16, s);
    ++ran;
  }
  // The GPT-2 shape (T = 1024) and the grouped-query one (T = 256) run on every cuDNN 9
  // release but the two refused outright.
  const std::string gpt2 = cudnn_attention_limits(cudnn_version(), 1024, 64);
  if (gpt2.empty())
    CHECK(ran > 0);
  else
    std::printf("HOLMES_SKIP: %s\n", gpt2.c_str());
}

TEST_CASE("automatic attention plans: the fallback for fp32, cuDNN or the fallback for bf16",
          "[cuda][attention]") {
  if (!gpu_or_skip()) return;
  Attention a(nullptr);
  const char* env = std::getenv("HOLMES_ATTENTION");
  if (env && *env) {
    std::printf("HOLMES_SKIP: HOLMES_ATTENTION=%s overrides the automatic choice\n", env);
    return;
  }
  auto p32 = a.plan(holmes::DType::kF32, 2, 1024, 768, 12, 12);
  CHECK(a.method(holmes::DType::kF32) == Attention::Method::kFallback);
  auto p16 = a.plan(holmes::DType::kBf16, 2, 1024, 768, 12, 12);
  INFO(p16.method);
  // cuDNN serves bf16 unless it is missing or a release refused outright (9.10.0, 9.10.1).
  const bool cudnn_ok =
      cudnn_available() && cudnn_attention_limits(cudnn_version(), 1024, 64).empty();
  if (cudnn_ok) {
    CHECK(a.method(holmes::DType::kBf16) == Attention::Method::kCudnn);
    CHECK(p16.state_floats == std::size_t(2) * 12 * 1024);
  } else {
    CHECK(a.method(holmes::DType::kBf16) == Attention::Method::kFallback);
    CHECK_THAT(p16.method, Catch::Contains("cuDNN: "));
  }
  CHECK(p32.state_floats == std::size_t(2) * 12 * 1024 * 1024);
  // An odd head size cuDNN cannot take falls back with the reason in the plan's line.
  Attention odd(nullptr);
  auto p = odd.plan(holmes::DType::kBf16, 2, 128, 60, 5, 5);  // HS = 12
  CHECK(odd.method(holmes::DType::kBf16) == Attention::Method::kFallback);
  CHECK_THAT(p.method, Catch::Contains(cudnn_ok ? "head size 12" : "cuDNN: "));
}
