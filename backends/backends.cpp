#include "backends/backends.hpp"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "common/errors.hpp"
#include "model/cpu/cpu_kernels.hpp"
#include "model/cpu/host_memory.hpp"

#ifdef HOLMES_WITH_CUDA
#include "comm/nccl/nccl_api.hpp"
#include "comm/nccl/nccl_group.hpp"
#include "cuda/backend.hpp"
#include "cuda/device.hpp"
#endif

namespace holmes::backends {

bool cuda_built() {
#ifdef HOLMES_WITH_CUDA
  return true;
#else
  return false;
#endif
}

GpuSummary local_gpus(std::string* why) {
  GpuSummary g;
#ifdef HOLMES_WITH_CUDA
  std::string none;
  const auto gpus = cuda::query_gpus(&none);
  if (!gpus.empty()) {
    g.count = static_cast<int>(gpus.size());
    g.name = gpus[0].name;
    g.memory_gb = static_cast<double>(gpus[0].memory_bytes) / (1024.0 * 1024.0 * 1024.0);
    g.nvlinks = cuda::active_nvlinks(0);
    g.cc_major = gpus[0].cc_major;
    g.cc_minor = gpus[0].cc_minor;
  } else if (why) {
    *why = "no CUDA GPU: " + none;
  }
#else
  if (why) *why = "built without CUDA";
#endif
  return g;
}

GpuVersions gpu_versions() {
  GpuVersions v;
#ifdef HOLMES_WITH_CUDA
  if (local_gpus().count == 0) return v;
  const cuda::StackVersions stack = cuda::stack_versions();
  v.cuda = stack.runtime;
  v.cublaslt = stack.cublaslt;
  v.cudnn = stack.cudnn;
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..." -> 550.54.15
  std::ifstream proc("/proc/driver/nvidia/version");
  std::string word, prev;
  while (proc >> word) {
    if (prev == "Module") {
      v.driver = word;
      break;
    }
    prev = word;
  }
  if (v.driver.empty() && !stack.driver_api.empty()) v.driver = "cuda api " + stack.driver_api;
  if (comm::nccl_available()) {
    const int n = comm::nccl_version();  // 22105 -> 2.21.5
    v.nccl = fmt::format("{}.{}.{}", n / 10000, n % 10000 / 100, n % 100);
  }
#endif
  return v;
}

const char* to_string(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

std::string unusable(Device d) {
  if (d == Device::kCpu) return "";
  if (!cuda_built()) return "this holmes-train was built without the CUDA toolkit";
  std::string why;
  return local_gpus(&why).count > 0 ? "" : why;
}

model::Backend make_backend(Device d, int local_rank) {
  if (const std::string why = unusable(d); !why.empty())
    throw std::invalid_argument(fmt::format("make_backend({}): {}", to_string(d), why));
#ifdef HOLMES_WITH_CUDA
  if (d == Device::kCuda) return cuda::make_cuda_backend(std::max(0, local_rank) % local_gpus().count);
#endif
  model::Backend b;
  b.device = to_string(Device::kCpu);
  b.memory = model::cpu::make_host_memory();
  b.kernels = model::cpu::make_cpu_kernels();
  return b;
}

bool nccl_usable(std::string* why) {
#ifdef HOLMES_WITH_CUDA
  return comm::nccl_available(why);
#else
  if (why) *why = "built without CUDA (no NCCL groups)";
  return false;
#endif
}

std::unique_ptr<comm::ProcessGroup> make_nccl_group(const std::shared_ptr<comm::Store>& store,
                                                    const comm::GroupSpec& spec, const std::string& net) {
#ifdef HOLMES_WITH_CUDA
  return comm::make_nccl_group(store, spec, net);
#else
  (void)store, (void)spec, (void)net;
  throw std::logic_error("make_nccl_group: this holmes-train was built without CUDA");
#endif
}

}  // namespace holmes::backends
