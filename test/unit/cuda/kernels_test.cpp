// Element-wise kernels and the linear layer (matmul_forward / matmul_backward) against CPU
// references computed here in double precision. Odd sizes catch tail handling. Skips
// without a GPU.
#include "cuda/pointwise.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "cuda/check.hpp"
#include "cuda/matmul.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda_test_util.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;

namespace {

double gelu_ref(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
}

// Central finite difference of gelu_ref: checks the analytic backward independently.
double gelu_grad_ref(double x) {
  const double h = 1e-6;
  return (gelu_ref(x + h) - gelu_ref(x - h)) / (2 * h);
}

// Host copy of `v` on the device in the type `t` (rounding `v` to bf16 first if needed).
DeviceBuffer upload(std::vector<float>& v, DType t) {
  if (t == DType::kF32) return to_device(v);
  return to_device(round_to_bf16(v));
}

std::vector<float> download(const DeviceBuffer& buf, std::size_t n, DType t) {
  if (t == DType::kF32) return to_host<float>(buf, n);
  return from_bf16(to_host<std::uint16_t>(buf, n));
}

double tol_abs(DType t) { return t == DType::kF32 ? 1e-5 : 1e-2; }
double tol_rel(DType t) { return t == DType::kF32 ? 1e-5 : 8e-3; }

}  // namespace

TEST_CASE("gelu_forward / gelu_backward match the CPU reference", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  const std::size_t n = 1037;
  for (DType t : {DType::kF32, DType::kBf16}) {
    INFO(dtype_name(t));
    auto x = random_floats(n, 11, -4.f, 4.f), dout = random_floats(n, 12);
    DeviceBuffer dx = upload(x, t), ddout = upload(dout, t), dy(n * dtype_bytes(t)),
                 ddx(n * dtype_bytes(t));
    if (t == DType::kF32) {
      gelu_forward(dy.as<float>(), dx.as<float>(), n);
      gelu_backward(ddx.as<float>(), dx.as<float>(), ddout.as<float>(), n);
    } else {
      gelu_forward(dy.as<bf16>(), dx.as<bf16>(), n);
      gelu_backward(ddx.as<bf16>(), dx.as<bf16>(), ddout.as<bf16>(), n);
    }
    HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> y_ref(n), dx_ref(n);
    for (std::size_t i = 0; i < n; ++i) {
      y_ref[i] = gelu_ref(x[i]);
      dx_ref[i] = gelu_grad_ref(x[i]) * dout[i];
    }
    CHECK(worst_ratio(download(dy, n, t), y_ref, tol_abs(t), tol_rel(t)) <= 1.0);
    CHECK(worst_ratio(download(ddx, n, t), dx_ref, tol_abs(t) * 10, tol_rel(t)) <= 1.0);
  }
}

TEST_CASE("residual_forward adds, also in place", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  const std::size_t n = 517;
  for (DType t : {DType::kF32, DType::kBf16}) {
    INFO(dtype_name(t));
    auto a = random_floats(n, 21), b = random_floats(n, 22);
    DeviceBuffer da = upload(a, t), db = upload(b, t);
    if (t == DType::kF32)
      residual_forward(da.as<float>(), da.as<float>(), db.as<float>(), n);
    else
      residual_forward(da.as<bf16>(), da.as<bf16>(), db.as<bf16>(), n);
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = double(a[i]) + b[i];
    CHECK(worst_ratio(download(da, n, t), want, tol_abs(t), tol_rel(t)) <= 1.0);
  }
}

TEST_CASE("matmul_forward / matmul_backward match the CPU linear layer", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  const int bt = 10, c = 12, oc = 7;  // odd OC and BT on purpose
  GemmRunner gemm;
  for (DType t : {DType::kF32, DType::kBf16}) {
    INFO(dtype_name(t));
    auto inp = random_floats(bt * c, 31), w = random_floats(oc * c, 32),
         bias = random_floats(oc, 33);
    auto dout = random_floats(bt * oc, 34), dw0 = random_floats(oc * c, 35),
         db0 = random_floats(oc, 36);
    DeviceBuffer d_inp = upload(inp, t), d_w = upload(w, t), d_bias = upload(bias, t);
    DeviceBuffer d_dout = upload(dout, t), d_dw = upload(dw0, t), d_db = upload(db0, t);
    std::size_t eb = dtype_bytes(t);
    DeviceBuffer d_out(bt * oc * eb), d_dinp(bt * c * eb);
    matmul_forward(gemm, d_out.data(), d_inp.data(), d_w.data(), d_bias.data(), bt, c, oc, t);
    matmul_backward(gemm, d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(),
                    d_w.data(), bt, c, oc, t);
    HOLMES_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<double> out(bt * oc), dinp(bt * c, 0.0), dw(dw0.begin(), dw0.end()),
        db(db0.begin(), db0.end());
    for (int r = 0; r < bt; ++r)
      for (int o = 0; o < oc; ++o) {
        double s = bias[o];
        for (int i = 0; i < c; ++i) s += double(inp[r * c + i]) * w[o * c + i];
        out[r * oc + o] = s;
        double g = dout[r * oc + o];
        db[o] += g;
        for (int i = 0; i < c; ++i) {
          dinp[r * c + i] += g * w[o * c + i];
          dw[o * c + i] += g * inp[r * c + i];
        }
      }
    CHECK(worst_ratio(download(d_out, out.size(), t), out, tol_abs(t) * 10, tol_rel(t)) <= 1.0);
    CHECK(worst_ratio(download(d_dinp, dinp.size(), t), dinp, tol_abs(t) * 10, tol_rel(t)) <= 1.0);
    CHECK(worst_ratio(download(d_dw, dw.size(), t), dw, tol_abs(t) * 10, tol_rel(t)) <= 1.0);
    CHECK(worst_ratio(download(d_db, db.size(), t), db, tol_abs(t) * 10, tol_rel(t)) <= 1.0);
  }
}
