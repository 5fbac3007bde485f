// The one place that knows which compute backends this build has (CPU always, CUDA when
// built with HOLMES_WITH_CUDA). Everything else asks here instead of using #ifdef.
#pragma once

#include <string>

#include "engine/topo/topology.hpp"

namespace holmes::cmd {

bool cuda_built();
// This machine's compute devices: the CUDA GPUs when the runtime finds any, else the CPU.
// `note` says why no GPU was used when the build has CUDA but none was found.
topo::Devices local_devices(std::string* note = nullptr);

}  // namespace holmes::cmd
