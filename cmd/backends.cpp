#include "cmd/backends.hpp"

#include "engine/topo/discover.hpp"

#ifdef HOLMES_WITH_CUDA
#include "cuda/device.hpp"
#endif

namespace holmes::cmd {

bool cuda_built() {
#ifdef HOLMES_WITH_CUDA
  return true;
#else
  return false;
#endif
}

topo::Devices local_devices(std::string* note) {
#ifdef HOLMES_WITH_CUDA
  std::string why;
  auto gpus = cuda::query_gpus(&why);
  if (!gpus.empty()) {
    topo::Devices d;
    d.kind = "cuda";
    d.count = static_cast<int>(gpus.size());
    d.name = gpus[0].name;
    d.memory_gb = static_cast<double>(gpus[0].memory_bytes) / (1024.0 * 1024.0 * 1024.0);
    return d;
  }
  if (note) *note = "no CUDA GPU: " + why;
#else
  if (note) *note = "built without CUDA";
#endif
  return topo::detect_cpu_devices();
}

}  // namespace holmes::cmd
