// The CPU backend's memory: host memory, 64-byte aligned (one cache line, the widest vector).
#pragma once

#include <memory>

#include "device/device_memory.hpp"

namespace holmes::model::cpu {

std::unique_ptr<device::DeviceMemory> make_host_memory();

}  // namespace holmes::model::cpu
