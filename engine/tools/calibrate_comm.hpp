// `holmes-train calibrate`'s collective curves (engine/topo/calibration_tables.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/runtime/startup.hpp"
#include "engine/topo/calibration_tables.hpp"
#include "model/backend.hpp"

namespace holmes::tools {

// Collective over the job (every rank calls it): all-reduce, reduce-scatter, all-gather and
// (two members) send/recv at 4 KiB to 64 MiB per rank (16 MiB on CPUs) through the project's
// own groups, NCCL on the backend's device memory on GPUs, Gloo otherwise: inside node 0 for
// groups of 2, 4, ... up to its ranks, and one rank per node for each link class between the
// nodes (an RDMA island's, Ethernet's). Returns the curves this rank recorded (a group's first
// member records it), each fitted (alpha, bus bandwidth).
std::vector<topo::CollectiveCurve> measure_collectives(runtime::Runtime& rt, const spec::JobSpec& spec,
                                                       model::Backend& backend,
                                                       const std::function<void(const std::string&)>& say);

}  // namespace holmes::tools
