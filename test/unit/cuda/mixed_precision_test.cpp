// The bf16 mixed-precision pieces of the CUDA backend that the model's bf16 path needs
// besides attention, the vocabulary ops and LayerNorm (tested in their own files): the
// linear layer with bf16 operands and fp32 weight gradients, the GELU fused into cuBLASLt
// epilogues (and the unfused path it falls back to), the conversions, and the column-sum
// bias gradient. References: the CPU twins on the same bf16-rounded inputs. Outputs start
// as NaN so an unwritten element fails; accumulating outputs start from random values.
// Skips without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/matmul.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/pointwise.hpp"
#include "cuda_test_util.hpp"
#include "model/bf16.hpp"
#include "backends/backends.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;

namespace {

constexpr std::uint16_t kBf16NaN = 0x7fc0;

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// A bf16 device buffer of n NaNs (to be overwritten).
DeviceBuffer nan_bf16(std::size_t n) { return to_device(std::vector<std::uint16_t>(n, kBf16NaN)); }
DeviceBuffer nan_f32(std::size_t n) { return to_device(std::vector<float>(n, NAN)); }

std::vector<float> bf16_host(const DeviceBuffer& b, std::size_t n) {
  HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
  return from_bf16(to_host<std::uint16_t>(b, n));
}

std::vector<float> f32_host(const DeviceBuffer& b, std::size_t n) {
  HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
  return to_host<float>(b, n);
}

// bf16 storage: the output is rounded once, so about 2^-8 relative, plus accumulation-order
// noise on values near zero.
void check_bf16(const std::vector<float>& got, const std::vector<float>& want, double atol = 1e-2) {
  CHECK(worst_ratio(got, as_double(want), atol, 1e-2) <= 1.0);
}

}  // namespace

TEST_CASE("bf16 linear layer: bf16 out and input gradient, fp32 weight and bias gradients", "[cuda][bf16]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = *cpu_backend.kernels;
  GemmRunner gemm;
  for (auto [n, c, oc] : {std::tuple{37, 80, 24}, std::tuple{64, 128, 384}, std::tuple{3, 8, 5}}) {
    INFO("N=" << n << " C=" << c << " OC=" << oc);
    auto inp = random_floats(size_t(n) * c, 1), w = random_floats(size_t(oc) * c, 2), b = random_floats(oc, 3);
    auto dout = random_floats(size_t(n) * oc, 4);
    const auto inp16 = round_to_bf16(inp), w16 = round_to_bf16(w), b16 = round_to_bf16(b), dout16 = round_to_bf16(dout);
    auto dw = random_floats(size_t(oc) * c, 5), db = random_floats(oc, 6);  // accumulate onto these
    DeviceBuffer g_inp = to_device(inp16), g_w = to_device(w16), g_b = to_device(b16), g_dout = to_device(dout16);
    DeviceBuffer g_dw = to_device(dw), g_db = to_device(db);
    DeviceBuffer g_out = nan_bf16(size_t(n) * oc), g_dinp = nan_bf16(size_t(n) * c);

    std::vector<float> out(size_t(n) * oc), dinp(size_t(n) * c);
    cpu.matmul_forward(out.data(), inp.data(), w.data(), b.data(), n, c, oc);
    matmul_forward(gemm, g_out.data(), g_inp.data(), g_w.data(), g_b.data(), n, c, oc, DType::kBf16);
    check_bf16(bf16_host(g_out, out.size()), out);

    cpu.matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), n, c, oc);
    matmul_backward(gemm, g_dinp.data(), g_dw.data(), g_db.data(), g_dout.data(), g_inp.data(), g_w.data(), n, c, oc,
                    DType::kBf16, DType::kF32);
    check_bf16(bf16_host(g_dinp, dinp.size()), dinp);
    // fp32 gradients from bf16 operands: only the accumulation order differs.
    CHECK(worst_ratio(f32_host(g_dw, dw.size()), as_double(dw), 1e-4, 1e-4) <= 1.0);
    CHECK(worst_ratio(f32_host(g_db, db.size()), as_double(db), 1e-4, 1e-4) <= 1.0);
  }
}

TEST_CASE("GELU in the GEMM: fused and unfused agree with the CPU, fp32 and bf16", "[cuda][bf16]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = *cpu_backend.kernels;
  GemmRunner gemm;
  const int n = 64, c = 96, oc = 384;  // the MLP: C -> 4C
  auto inp = random_floats(size_t(n) * c, 11), w = random_floats(size_t(oc) * c, 12, -0.3f, 0.3f);
  auto b = random_floats(oc, 13);
  auto dout = random_floats(size_t(n) * oc, 14);
  const auto inp16 = round_to_bf16(inp), w16 = round_to_bf16(w), b16 = round_to_bf16(b), dout16 = round_to_bf16(dout);
  // CPU: pre = inp W^T + b, out = gelu(pre); then the second layer's backward into dpre
  // with W2 (c x oc) and dout2 (n x c).
  std::vector<float> pre(size_t(n) * oc), out(pre.size());
  cpu.matmul_gelu_forward(out.data(), pre.data(), inp.data(), w.data(), b.data(), n, c, oc);
  auto w2 = random_floats(size_t(c) * oc, 15, -0.3f, 0.3f), dout2 = random_floats(size_t(n) * c, 16);
  const auto w2_16 = round_to_bf16(w2), dout2_16 = round_to_bf16(dout2);
  for (bool fuse : {true, false}) {
    for (DType t : {DType::kF32, DType::kBf16}) {
      const bool half = t == DType::kBf16;
      INFO((fuse ? "fused" : "unfused") << " " << dtype_name(t));
      // fp32 runs use the (already bf16-representable) same inputs, so one CPU reference serves.
      DeviceBuffer g_inp = half ? to_device(inp16) : to_device(inp), g_w = half ? to_device(w16) : to_device(w);
      DeviceBuffer g_b = half ? to_device(b16) : to_device(b);
      const size_t no = size_t(n) * oc;
      DeviceBuffer g_out = half ? nan_bf16(no) : nan_f32(no), g_pre = half ? nan_bf16(no) : nan_f32(no);
      const bool fused_fwd =
          matmul_gelu_forward(gemm, g_out.data(), g_pre.data(), g_inp.data(), g_w.data(), g_b.data(), n, c, oc, t, fuse);
      CHECK((fuse || !fused_fwd));  // fuse = false must take the separate kernels
      const auto got_out = half ? bf16_host(g_out, no) : f32_host(g_out, no);
      const auto got_pre = half ? bf16_host(g_pre, no) : f32_host(g_pre, no);
      if (half) {
        check_bf16(got_pre, pre);
        check_bf16(got_out, out);
      } else {
        CHECK(worst_ratio(got_pre, as_double(pre), 1e-4, 1e-4) <= 1.0);
        CHECK(worst_ratio(got_out, as_double(out), 1e-4, 1e-4) <= 1.0);
        // Which GELU did the GPU apply to its own pre-activation? GPT-2's tanh form and the
        // erf form differ by up to 4.7e-4 (near |x| = 2): printed so a failure above says
        // whether cuBLASLt's epilogue uses the other formula or only a coarser tanh.
        double tanh_err = 0, erf_err = 0;
        for (size_t i = 0; i < no; ++i) {
          const double x = got_pre[i];
          const double g_tanh = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
          const double g_erf = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
          tanh_err = std::max(tanh_err, std::fabs(got_out[i] - g_tanh));
          erf_err = std::max(erf_err, std::fabs(got_out[i] - g_erf));
        }
        std::printf("GELU fp32 %s: max |out - gelu_tanh(pre)| = %.2e, max |out - gelu_erf(pre)| = %.2e\n",
                    fused_fwd ? "fused" : "unfused", tanh_err, erf_err);
      }
      // Backward of layer 2 (input = gelu(pre), weight W2 [c, oc]) through the DGELU epilogue,
      // from the GPU's own pre-activation (as the model does).
      std::vector<float> dpre(no), dw2 = random_floats(size_t(c) * oc, 17), db2 = random_floats(c, 18);
      DeviceBuffer g_dw2 = to_device(dw2), g_db2 = to_device(db2);
      DeviceBuffer g_w2 = half ? to_device(w2_16) : to_device(w2), g_dout2 = half ? to_device(dout2_16) : to_device(dout2);
      DeviceBuffer g_dpre = half ? nan_bf16(no) : nan_f32(no);
      const bool fused_bwd =
          matmul_dgelu_backward(gemm, g_dpre.data(), g_dw2.data(), g_db2.data(), g_dout2.data(), g_out.data(),
                                g_w2.data(), g_pre.data(), n, oc, c, t, DType::kF32, fuse);
      CHECK((fuse || !fused_bwd));
      // A "fused" case that cuBLASLt refused ran the separate kernels: say so, or the fused
      // epilogues would pass untested.
      if (fuse)
        std::printf("GELU epilogues %s: forward %s, backward %s\n", dtype_name(t), fused_fwd ? "fused" : "REFUSED (unfused)",
                    fused_bwd ? "fused" : "REFUSED (unfused)");
      cpu.matmul_dgelu_backward(dpre.data(), dw2.data(), db2.data(), dout2.data(), got_out.data(), w2.data(),
                                got_pre.data(), n, oc, c);
      const auto got_dpre = half ? bf16_host(g_dpre, no) : f32_host(g_dpre, no);
      if (half)
        check_bf16(got_dpre, dpre, 2e-2);
      else
        CHECK(worst_ratio(got_dpre, as_double(dpre), 1e-4, 1e-4) <= 1.0);
      CHECK(worst_ratio(f32_host(g_dw2, dw2.size()), as_double(dw2), 1e-3, 1e-3) <= 1.0);
      CHECK(worst_ratio(f32_host(g_db2, db2.size()), as_double(db2), 1e-3, 1e-3) <= 1.0);
    }
  }
}

TEST_CASE("fp32 <-> bf16 conversion on the GPU rounds like the host", "[cuda][bf16]") {
  if (!gpu_or_skip()) return;
  auto x = random_floats(4099, 21, -100.f, 100.f);
  x[0] = 1.00390625f;  // a tie: rounds to even
  x[1] = 1.01171875f;
  DeviceBuffer g_x = to_device(x), g_h = nan_bf16(x.size()), g_back = nan_f32(x.size());
  convert(g_h.as<bf16>(), g_x.as<float>(), x.size());
  convert(g_back.as<float>(), g_h.as<bf16>(), x.size());
  const auto bits = to_host<std::uint16_t>(g_h, x.size());
  const auto back = f32_host(g_back, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    REQUIRE(bits[i] == holmes::model::float_to_bf16(x[i]).bits);
    REQUIRE(back[i] == holmes::model::bf16_to_float(holmes::model::bf16{bits[i]}));
  }
}

TEST_CASE("bias gradient: fixed-order column sums, bf16 rows into fp32, bit-identical when repeated", "[cuda][bf16]") {
  if (!gpu_or_skip()) return;
  for (auto [rows, oc] : {std::pair{16384, 768}, std::pair{37, 33}, std::pair{5, 1}}) {
    INFO("rows=" << rows << " OC=" << oc);
    auto dout = random_floats(size_t(rows) * oc, 31);
    const auto dout16 = round_to_bf16(dout);
    auto db = random_floats(oc, 32);
    std::vector<double> want(db.begin(), db.end());
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < oc; ++j) want[j] += dout[size_t(r) * oc + j];
    DeviceBuffer g_dout = to_device(dout16), g_a = to_device(db), g_b = to_device(db);
    bias_backward(g_a.as<float>(), g_dout.as<bf16>(), rows, oc);
    bias_backward(g_b.as<float>(), g_dout.as<bf16>(), rows, oc);
    const auto a = f32_host(g_a, oc), b = f32_host(g_b, oc);
    CHECK(a == b);
    CHECK(worst_ratio(a, want, 1e-3, 1e-4) <= 1.0);
  }
}
