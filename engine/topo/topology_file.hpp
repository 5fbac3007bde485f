// Topology files (YAML): node reports written down, for offline planning and for clusters
// where discovery cannot run. Format in docs/topology.md; in short:
//
//   nodes:
//     - names: ib-node[0-3]            # Slurm hostlist expression
//       devices: {kind: cuda, count: 8, name: H100, memory_gb: 80, peak_tflops: 989}
//       nics:
//         - {kind: ib, rate_gbps: 200, count: 8, fabric: ib-a, name: "mlx5_[0-7]"}
//         - {kind: ethernet, rate_gbps: 25, name: eth0}
//
// `holmes-train discover --format yaml` writes the same format with every field spelled out.
#pragma once

#include <string>
#include <vector>

#include "engine/topo/topology.hpp"

namespace holmes::topo {

// One NodeReport per host name, in file order. Throws TopologyError (a UserError) listing
// every problem found, each with file:line:column, key path, the value seen and what is
// accepted: unknown keys, wrong types, values out of range, bad hostlists and duplicate hosts.
std::vector<NodeReport> load_topology_file(const std::string& path);
// The same from text; `source` names it in errors.
std::vector<NodeReport> parse_topology_yaml(const std::string& text, const std::string& source);

// Every report as its own node entry with all fields; load_topology_file reads it back to
// equal reports.
std::string dump_topology_yaml(const std::vector<NodeReport>& reports);

// One report as text for the start-up all-gather between ranks, and back. decode throws
// UserError naming `source` (e.g. "report of rank 3") unless the text holds exactly one node.
std::string encode_report(const NodeReport& report);
NodeReport decode_report(const std::string& text, const std::string& source);

}  // namespace holmes::topo
