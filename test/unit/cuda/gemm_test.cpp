// GemmRunner parity against a double-precision CPU GEMM computed here, over odd and aligned
// shapes, every transpose combination and the fp32 / bf16 type pairs. Skips without a GPU.
#include "cuda/gemm.hpp"

#include <catch2/catch.hpp>
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda_test_util.hpp"
#include "gemm_reference.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;

namespace {

// Uploads in the shape's storage types (rounding the host copies to bf16 first where the
// GPU sees bf16, so the reference uses identical inputs), runs, downloads as float.
// `offset` elements of padding in front of every matrix test unaligned pointers.
std::vector<float> run_gpu(GemmRunner& runner, const GemmShape& s, std::vector<float>& a,
                           std::vector<float>& b, std::vector<float>& bias, std::vector<float>& c0,
                           float alpha, float beta, std::size_t offset = 0) {
  auto upload = [&](std::vector<float>& v, DType t) {
    std::size_t elem = dtype_bytes(t);
    DeviceBuffer buf((v.size() + offset) * elem);
    if (t == DType::kBf16) {
      auto bits = round_to_bf16(v);
      HOLMES_CUDA_CHECK(cudaMemcpy(buf.as<std::uint16_t>() + offset, bits.data(), bits.size() * 2,
                                   cudaMemcpyHostToDevice));
    } else {
      HOLMES_CUDA_CHECK(
          cudaMemcpy(buf.as<float>() + offset, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    }
    return buf;
  };
  DeviceBuffer da = upload(a, s.ab_type), db = upload(b, s.ab_type);
  DeviceBuffer dc = upload(c0, s.c_type), dbias = upload(bias, s.c_type);
  std::size_t ab = dtype_bytes(s.ab_type), cb = dtype_bytes(s.c_type);
  runner.run(static_cast<char*>(dc.data()) + offset * cb,
             static_cast<char*>(da.data()) + offset * ab,
             static_cast<char*>(db.data()) + offset * ab,
             s.bias ? static_cast<char*>(dbias.data()) + offset * cb : nullptr, s, alpha, beta);
  HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
  if (s.c_type == DType::kF32) {
    std::vector<float> out(c0.size());
    HOLMES_CUDA_CHECK(
        cudaMemcpy(out.data(), dc.as<float>() + offset, out.size() * 4, cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<std::uint16_t> bits(c0.size());
  HOLMES_CUDA_CHECK(cudaMemcpy(bits.data(), dc.as<std::uint16_t>() + offset, bits.size() * 2,
                               cudaMemcpyDeviceToHost));
  return from_bf16(bits);
}

struct Case {
  GemmShape shape;
  float alpha = 1.f, beta = 0.f;
  std::size_t offset = 0;
};

// Runs one case with random data and returns the worst error ratio (<= 1 passes).
double check_case(GemmRunner& runner, const Case& cs, unsigned seed) {
  const GemmShape& s = cs.shape;
  std::size_t na = s.stride_a * (s.batch - 1) + std::size_t(s.m) * s.k;
  std::size_t nb = s.stride_b * (s.batch - 1) + std::size_t(s.k) * s.n;
  std::size_t nc = s.batch > 1 ? s.stride_c * s.batch : std::size_t(s.m) * s.n;
  auto a = random_floats(na, seed), b = random_floats(nb, seed + 1);
  auto c0 = random_floats(nc, seed + 2), bias = random_floats(s.n, seed + 3);
  auto got = run_gpu(runner, s, a, b, bias, c0, cs.alpha, cs.beta, cs.offset);
  auto want = reference(s, a, b, bias, c0, cs.alpha, cs.beta);
  bool bf16_out = s.c_type == DType::kBf16;
  // fp32: accumulation-order noise of ~k * 6e-8 * |terms|; bf16 out: half an ulp is 2^-9.
  return worst_ratio(got, want, bf16_out ? 1e-2 : 2e-4, bf16_out ? 8e-3 : 1e-4);
}

}  // namespace

TEST_CASE("GEMM matches the CPU reference: shapes x transposes x types", "[cuda][gemm]") {
  if (!gpu_or_skip()) return;
  GemmRunner runner;
  const int shapes[][3] = {{1, 1, 1}, {5, 7, 11}, {13, 5, 7}, {33, 17, 64}, {64, 128, 96}};
  const DType types[][2] = {
      {DType::kF32, DType::kF32}, {DType::kBf16, DType::kF32}, {DType::kBf16, DType::kBf16}};
  unsigned seed = 1;
  for (auto& mnk : shapes)
    for (int t = 0; t < 4; ++t)
      for (auto& ty : types) {
        Case cs;
        cs.shape.m = mnk[0];
        cs.shape.n = mnk[1];
        cs.shape.k = mnk[2];
        cs.shape.trans_a = t & 1;
        cs.shape.trans_b = t & 2;
        cs.shape.ab_type = ty[0];
        cs.shape.c_type = ty[1];
        INFO(describe(cs.shape));
        CHECK(check_case(runner, cs, seed++) <= 1.0);
      }
}

TEST_CASE("GEMM bias epilogue, alpha/beta accumulate and fast TF32", "[cuda][gemm]") {
  if (!gpu_or_skip()) return;
  GemmRunner runner;
  for (DType ty : {DType::kF32, DType::kBf16}) {
    Case cs;
    cs.shape.m = 9;
    cs.shape.n = 24;
    cs.shape.k = 40;
    cs.shape.ab_type = cs.shape.c_type = ty;
    cs.shape.bias = true;
    INFO(describe(cs.shape));
    CHECK(check_case(runner, cs, 100) <= 1.0);
    cs.shape.bias = false;
    cs.alpha = 0.5f;
    cs.beta = 1.0f;  // dweight += ... as in the backward pass
    CHECK(check_case(runner, cs, 200) <= 1.0);
  }
  Case tf32;
  tf32.shape.m = tf32.shape.n = tf32.shape.k = 32;
  tf32.shape.fast_tf32 = true;
  auto a = random_floats(32 * 32, 7), b = random_floats(32 * 32, 8), c0 = random_floats(32 * 32, 9);
  std::vector<float> bias(32, 0.f);
  auto got = run_gpu(runner, tf32.shape, a, b, bias, c0, 1.f, 0.f);
  // TF32 keeps 10 mantissa bits: about 1e-3 relative per product.
  CHECK(worst_ratio(got, reference(tf32.shape, a, b, bias, c0, 1.f, 0.f), 2e-2, 1e-2) <= 1.0);
}

TEST_CASE("GEMM strided batches, broadcast operand and unaligned pointers", "[cuda][gemm]") {
  if (!gpu_or_skip()) return;
  GemmRunner runner;
  Case batched;
  batched.shape.m = 6;
  batched.shape.n = 10;
  batched.shape.k = 12;
  batched.shape.batch = 3;
  batched.shape.stride_a = 6 * 12;
  batched.shape.stride_b = 0;           // one B shared by every batch
  batched.shape.stride_c = 6 * 10 + 4;  // padded rows between outputs stay untouched by design
  INFO(describe(batched.shape));
  CHECK(check_case(runner, batched, 300) <= 1.0);

  for (DType ty : {DType::kF32, DType::kBf16}) {
    Case odd;
    odd.shape.m = 7;
    odd.shape.n = 9;
    odd.shape.k = 13;
    odd.shape.ab_type = odd.shape.c_type = ty;
    odd.offset = 1;  // 4- or 2-byte aligned pointers: the heuristic must be told
    INFO(describe(odd.shape));
    CHECK(check_case(runner, odd, 400) <= 1.0);
  }
}

TEST_CASE("GEMM plans are cached per shape and alignment", "[cuda][gemm]") {
  if (!gpu_or_skip()) return;
  GemmRunner runner;
  Case cs;
  cs.shape.m = 8;
  cs.shape.n = 8;
  cs.shape.k = 8;
  CHECK(check_case(runner, cs, 1) <= 1.0);
  CHECK(runner.cached_plans() == 1);
  CHECK(check_case(runner, cs, 2) <= 1.0);  // same shape, fresh 256-aligned buffers
  CHECK(runner.cached_plans() == 1);
  cs.shape.k = 9;
  CHECK(check_case(runner, cs, 3) <= 1.0);
  CHECK(runner.cached_plans() == 2);
}

// The attention fallback's GEMMs: heads read in place from rows wider than the matrix (lda,
// ldb = 3C) and written side by side (ldc = C, stride_c = HS), in every transpose it uses.
TEST_CASE("GEMM with leading dimensions reads and writes interleaved heads", "[cuda][gemm]") {
  if (!gpu_or_skip()) return;
  GemmRunner runner;
  const int T = 37, HS = 16, NH = 5, C = NH * HS;
  unsigned seed = 900;
  for (DType ab : {DType::kF32, DType::kBf16})
    for (DType ct : {DType::kF32, DType::kBf16})
      for (int variant = 0; variant < 3; ++variant) {
        if (ab == DType::kF32 && ct == DType::kBf16) continue;  // refused by validate_gemm
        GemmShape s;
        s.ab_type = ab;
        s.c_type = ct;
        s.batch = NH;
        if (variant == 0) {  // scores: Q [T,HS] x K^T, both in (T, 3C)
          s.m = T, s.n = T, s.k = HS, s.trans_b = true;
          s.lda = s.ldb = 3 * C, s.stride_a = s.stride_b = HS, s.stride_c = T * T;
        } else {  // P V (variant 1) and P^T dO (variant 2) into (T, C) side by side
          s.m = T, s.n = HS, s.k = T, s.trans_a = variant == 2, s.trans_b = false;
          s.ldb = 3 * C, s.ldc = C, s.stride_a = T * T, s.stride_b = HS, s.stride_c = HS;
        }
        INFO(describe(s));
        const std::size_t rows_a = s.trans_a ? s.k : s.m, rows_b = s.trans_b ? s.n : s.k;
        const std::size_t na = s.lda ? rows_a * s.lda : std::size_t(s.stride_a) * NH;
        const std::size_t nb = rows_b * s.ldb;
        const std::size_t nc = s.ldc ? std::size_t(s.m) * s.ldc : std::size_t(s.stride_c) * NH;
        auto a = random_floats(na, seed++), b = random_floats(nb, seed++);
        auto c0 = random_floats(nc, seed++), bias = random_floats(s.n, seed++);
        auto got = run_gpu(runner, s, a, b, bias, c0, 0.5f, 0.0f);
        auto want = reference(s, a, b, bias, c0, 0.5f, 0.0f);
        const bool bf16_out = ct == DType::kBf16;
        CHECK(worst_ratio(got, want, bf16_out ? 1e-2 : 2e-4, bf16_out ? 8e-3 : 1e-4) <= 1.0);
      }
}
