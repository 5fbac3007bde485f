// A compute backend: its kernels and its memory, which must be used together (every pointer
// a kernel gets is memory of the same backend). Made by backends/ (the composition root), the
// one place that knows which backends this build has.
#pragma once

#include <memory>
#include <string>

#include "device/device_memory.hpp"
#include "model/kernels.hpp"

namespace holmes::model {

struct Backend {
  // What memory and kernels run on (a CUDA stream): declared first, so destroyed last.
  std::shared_ptr<void> resources;
  std::string device;  // "cpu" or "cuda"
  std::unique_ptr<device::DeviceMemory> memory;
  std::unique_ptr<Kernels> kernels;
};

}  // namespace holmes::model
