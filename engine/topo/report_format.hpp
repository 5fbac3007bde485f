// Printing a NodeReport: JSON (stable, documented in docs/topology.md), a text table for
// people, and (in topology_file.hpp) YAML in the topology-file format.
#pragma once

#include "common/format.hpp"

#include <string>

#include "engine/topo/topology.hpp"

namespace holmes::topo {

// {"hostname": ..., "devices": {...}, "nics": [{...}, ...]}; one NIC per line; unknown rates
// are null; ends with a newline.
std::string report_json(const NodeReport& report);

// Host, devices and one table row per NIC.
std::string report_text(const NodeReport& report);


}  // namespace holmes::topo
