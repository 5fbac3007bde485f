// CUDA device facts and a self-test GEMM. Compiled only in CUDA builds (HOLMES_WITH_CUDA);
// callers reach it through backends/backends.cpp, the one file that knows whether it exists.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace holmes::cuda {

struct GpuInfo {
  int index = 0;
  std::string name;
  std::size_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;
};

// GPUs the CUDA runtime sees. Empty (and `why_none` says why: no driver, no device) on a
// machine without a usable GPU; never throws for that case.
std::vector<GpuInfo> query_gpus(std::string* why_none = nullptr);

// The versions of this process's GPU stack, for a calibration's record: the driver's CUDA API
// version and the statically linked runtime's ("12.4"), cuBLASLt's and cuDNN's as their
// libraries report them once loaded (loading them here if they can be; "" where not). Never
// throws.
struct StackVersions {
  std::string driver_api, runtime, cublaslt, cudnn;
};
StackVersions stack_versions();

// GPU `index`'s active NVLinks as the driver reports them (NVML, loaded at run time); 0 for a
// GPU on PCIe alone, -1 when the driver's library cannot be loaded or asked. Never throws.
int active_nvlinks(int index = 0);

// Runs small fp32 and bf16 cuBLASLt GEMMs (odd shapes) on GPU `index` and compares them with
// a host reference. Returns "" when they match, else what failed (no GPU, a CUDA error, the
// worst error seen). Never throws; for `discover`-style reports and smoke runs.
std::string gemm_self_test(int index = 0);

}  // namespace holmes::cuda
