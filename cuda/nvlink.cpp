// GPU 0's active NVLinks through NVML (libnvidia-ml.so.1, the driver's management library),
// opened at run time like cuBLASLt and cuDNN. Only the handful of entry points used here are
// declared, with NVML's documented C signatures: nvmlReturn_t is an int (0 = NVML_SUCCESS),
// devices are opaque handles, a link's state an int (1 = enabled).
#include "cuda/device.hpp"

#include <string>

#include "common/dl_library.hpp"

namespace holmes::cuda {

namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlApi {
  int (*init)() = nullptr;                                      // nvmlInit_v2
  int (*shutdown)() = nullptr;                                  // nvmlShutdown
  int (*by_index)(unsigned, NvmlDevice*) = nullptr;             // nvmlDeviceGetHandleByIndex_v2
  int (*link_state)(NvmlDevice, unsigned, int*) = nullptr;      // nvmlDeviceGetNvLinkState
};
// NVML_NVLINK_MAX_LINKS of current drivers; a link index past the GPU's last answers an error.
constexpr unsigned kMaxLinks = 18;

}  // namespace

int active_nvlinks(int index) {
  std::string tried;
  void* lib = holmes::open_first(holmes::library_candidates("libnvidia-ml.so.1", nullptr, ""), tried);
  if (!lib) return -1;  // no driver library: the driver cannot be asked
  NvmlApi api;
  std::string error;
  bind_symbol(lib, "nvmlInit_v2", api.init, error);
  bind_symbol(lib, "nvmlShutdown", api.shutdown, error);
  bind_symbol(lib, "nvmlDeviceGetHandleByIndex_v2", api.by_index, error);
  bind_symbol(lib, "nvmlDeviceGetNvLinkState", api.link_state, error);
  int active = -1;
  if (error.empty() && api.init() == 0) {
    NvmlDevice dev = nullptr;
    if (api.by_index(static_cast<unsigned>(index), &dev) == 0) {
      active = 0;
      for (unsigned link = 0; link < kMaxLinks; ++link) {
        int enabled = 0;
        if (api.link_state(dev, link, &enabled) == 0 && enabled == 1) ++active;
      }
    }
    api.shutdown();
  }
  dlclose(lib);
  return active;
}

}  // namespace holmes::cuda
