// query_gpus through the statically linked CUDA runtime. On a machine without the driver
// the runtime fails to load libcuda.so.1 and answers cudaErrorInsufficientDriver; without a
// GPU it answers cudaErrorNoDevice. Both mean "no GPU here", not a failure of holmes-train.
#include "cuda/device.hpp"

#include <fmt/format.h>

#include "cuda/check.hpp"
#include "cuda/cublaslt_api.hpp"
#include "cuda/cudnn_api.hpp"

namespace holmes::cuda {

namespace {

std::string why_no_gpu(cudaError_t code) {
  switch (code) {
    case cudaErrorInsufficientDriver:
      return "no usable NVIDIA driver (libcuda.so.1 missing or older than the CUDA runtime)";
    case cudaErrorNoDevice:
      return "the NVIDIA driver sees no GPU";
    default:
      return fmt::format("CUDA runtime cannot enumerate GPUs: {} ({})", cudaGetErrorName(code),
                         cudaGetErrorString(code));
  }
}

}  // namespace

std::vector<GpuInfo> query_gpus(std::string* why_none) {
  std::vector<GpuInfo> gpus;
  int count = 0;
  cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // not sticky: forget it so later checks start clean
    if (why_none)
      *why_none = code != cudaSuccess ? why_no_gpu(code) : why_no_gpu(cudaErrorNoDevice);
    return gpus;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    code = cudaGetDeviceProperties(&prop, i);
    if (code != cudaSuccess) {
      // A GPU that cannot be queried (fallen off the bus, ECC lockout) is left out; the
      // reason is kept in case none remains.
      (void)cudaGetLastError();
      if (why_none) *why_none = fmt::format("GPU {}: {}", i, why_no_gpu(code));
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.name = prop.name;
    g.memory_bytes = prop.totalGlobalMem;
    g.cc_major = prop.major;
    g.cc_minor = prop.minor;
    g.sm_count = prop.multiProcessorCount;
    gpus.push_back(std::move(g));
  }
  if (!gpus.empty() && why_none) why_none->clear();
  return gpus;
}

StackVersions stack_versions() {
  StackVersions v;
  auto api = [](int code) { return code > 0 ? fmt::format("{}.{}", code / 1000, code % 1000 / 10) : std::string(); };
  int code = 0;
  if (cudaDriverGetVersion(&code) == cudaSuccess) v.driver_api = api(code);
  (void)cudaGetLastError();
  code = 0;
  if (cudaRuntimeGetVersion(&code) == cudaSuccess) v.runtime = api(code);
  (void)cudaGetLastError();
  if (cublaslt_available()) v.cublaslt = std::to_string(cublaslt().get_version());
  if (cudnn_available()) v.cudnn = std::to_string(cudnn_version());
  return v;
}

}  // namespace holmes::cuda
