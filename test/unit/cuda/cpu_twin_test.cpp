// Each CUDA op against its CPU twin (model/cpu, the backend the model runs today) on the same
// fp32 inputs, with the same write/accumulate contract of model/kernels.hpp. Skips without a GPU.
#include <catch2/catch.hpp>
#include <memory>

#include "cuda/check.hpp"
#include "cuda/pointwise.hpp"
#include "cuda/layernorm.hpp"
#include "cuda/matmul.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda_test_util.hpp"
#include "backends/backends.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;

namespace {

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// GPU result within fp32 noise of the CPU one (both accumulate in fp32, in different orders).
void check_close(const DeviceBuffer& gpu, const std::vector<float>& cpu, double atol = 1e-5) {
  HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(worst_ratio(to_host<float>(gpu, cpu.size()), as_double(cpu), atol, 1e-5) <= 1.0);
}

}  // namespace

TEST_CASE("CUDA gelu and residual ops match their CPU twins", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = cpu_backend.kernels;
  const std::size_t n = 2053;
  auto x = random_floats(n, 61, -5.f, 5.f), y = random_floats(n, 62), dout = random_floats(n, 63);
  DeviceBuffer dx = to_device(x), dy = to_device(y), ddout = to_device(dout);

  std::vector<float> out(n), dinp(n);
  DeviceBuffer g_out(n * 4), g_dinp(n * 4);
  cpu->gelu_forward(out.data(), x.data(), n);
  gelu_forward(g_out.as<float>(), dx.as<float>(), n);
  check_close(g_out, out);
  cpu->gelu_backward(dinp.data(), x.data(), dout.data(), n);
  gelu_backward(g_dinp.as<float>(), dx.as<float>(), ddout.as<float>(), n);
  check_close(g_dinp, dinp);

  cpu->residual_forward(out.data(), x.data(), y.data(), n);
  residual_forward(g_out.as<float>(), dx.as<float>(), dy.as<float>(), n);
  check_close(g_out, out);
  // Backward accumulates into both; db null leaves only da.
  std::vector<float> da = x, db = y;
  cpu->residual_backward(da.data(), db.data(), dout.data(), n);
  residual_backward(dx.as<float>(), dy.as<float>(), ddout.as<float>(), n);
  check_close(dx, da);
  check_close(dy, db);
  cpu->residual_backward(da.data(), nullptr, dout.data(), n);
  residual_backward(dx.as<float>(), nullptr, ddout.as<float>(), n);
  check_close(dx, da);
  check_close(dy, db);
}

TEST_CASE("CUDA matmul_forward / matmul_backward match their CPU twins", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = cpu_backend.kernels;
  GemmRunner gemm;
  const int n = 37, c = 24, oc = 19;
  auto inp = random_floats(n * c, 71), w = random_floats(oc * c, 72), bias = random_floats(oc, 73);
  auto dout = random_floats(n * oc, 74), dw = random_floats(oc * c, 75), db = random_floats(oc, 76);
  DeviceBuffer g_inp = to_device(inp), g_w = to_device(w), g_bias = to_device(bias);
  DeviceBuffer g_dout = to_device(dout), g_dw = to_device(dw), g_db = to_device(db);
  DeviceBuffer g_out(n * oc * 4), g_dinp(n * c * 4);

  std::vector<float> out(n * oc), dinp(n * c);
  cpu->matmul_forward(out.data(), inp.data(), w.data(), bias.data(), n, c, oc);
  matmul_forward(gemm, g_out.data(), g_inp.data(), g_w.data(), g_bias.data(), n, c, oc, DType::kF32);
  check_close(g_out, out, 1e-4);

  cpu->matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), n, c,
                       oc);
  matmul_backward(gemm, g_dinp.data(), g_dw.data(), g_db.data(), g_dout.data(), g_inp.data(),
                  g_w.data(), n, c, oc, DType::kF32);
  check_close(g_dinp, dinp, 1e-4);
  check_close(g_dw, dw, 1e-4);
  check_close(g_db, db, 1e-4);

  // dinp null (the first layer has no input gradient): weights still accumulate.
  cpu->matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), n, c, oc);
  matmul_backward(gemm, nullptr, g_dw.data(), nullptr, g_dout.data(), g_inp.data(), g_w.data(), n,
                  c, oc, DType::kF32);
  check_close(g_dw, dw, 1e-4);
}

TEST_CASE("CUDA layernorm_forward / layernorm_backward match their CPU twins", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  auto& cpu = cpu_backend.kernels;
  for (int c : {7, 32, 100}) {  // fewer channels than a warp, exactly one warp, a ragged tail
    INFO("C = " << c);
    const int n = 13;
    auto inp = random_floats(n * c, 81, -3.f, 3.f), w = random_floats(c, 82);
    auto b = random_floats(c, 83), dout = random_floats(n * c, 84);
    auto dinp = random_floats(n * c, 85), dw = random_floats(c, 86), db = random_floats(c, 87);
    DeviceBuffer g_inp = to_device(inp), g_w = to_device(w), g_b = to_device(b);
    DeviceBuffer g_dout = to_device(dout), g_dinp = to_device(dinp), g_dw = to_device(dw);
    DeviceBuffer g_db = to_device(db), g_out(n * c * 4), g_mean(n * 4), g_rstd(n * 4);

    std::vector<float> out(n * c), mean(n), rstd(n);
    cpu->layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), n,
                           c);
    layernorm_forward(g_out.as<float>(), g_mean.as<float>(), g_rstd.as<float>(), g_inp.as<float>(),
                      g_w.as<float>(), g_b.as<float>(), n, c);
    check_close(g_out, out, 1e-4);
    check_close(g_mean, mean);
    check_close(g_rstd, rstd, 1e-4);

    // Backward accumulates into dinp, dweight and dbias (all start non-zero here).
    cpu->layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                            mean.data(), rstd.data(), n, c);
    layernorm_backward(g_dinp.as<float>(), g_dw.as<float>(), g_db.as<float>(), g_dout.as<float>(),
                       g_inp.as<float>(), g_w.as<float>(), g_mean.as<float>(), g_rstd.as<float>(),
                       n, c);
    check_close(g_dinp, dinp, 1e-4);
    check_close(g_dw, dw, 1e-4);
    check_close(g_db, db, 1e-4);
  }
}
