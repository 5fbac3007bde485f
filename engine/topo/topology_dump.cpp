// NodeReports -> topology-file YAML (see topology_file.hpp), every field spelled out so that
// load_topology_file reads back equal reports.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/errors.hpp"

#include "engine/topo/topology_file.hpp"

namespace holmes::topo {

namespace {

void emit_nic(YAML::Emitter& out, const Nic& n) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << n.name;
  out << YAML::Key << "kind" << YAML::Value << to_string(n.kind);
  out << YAML::Key << "state" << YAML::Value << (n.active ? "active" : "down");
  out << YAML::Key << "rate_gbps" << YAML::Value;
  if (n.rate_gbps) out << *n.rate_gbps;
  else out << YAML::Null;
  out << YAML::Key << "port" << YAML::Value << n.port;
  out << YAML::Key << "netdev" << YAML::Value << n.netdev;
  out << YAML::Key << "fabric" << YAML::Value << n.fabric;
  out << YAML::Key << "numa_node" << YAML::Value << n.numa_node;
  out << YAML::Key << "pci" << YAML::Value << n.pci;
  out << YAML::Key << "virtual" << YAML::Value << n.is_virtual;
  out << YAML::Key << "roce_version" << YAML::Value << n.roce_version;
  out << YAML::Key << "gid_index" << YAML::Value << n.gid_index;
  out << YAML::Key << "addresses" << YAML::Value << YAML::Flow << n.addresses;
  out << YAML::EndMap;
}

}  // namespace

std::string dump_topology_yaml(const std::vector<NodeReport>& reports) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << YAML::Comment("holmes-train topology file (docs/topology.md)");
  out << YAML::BeginMap << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const auto& r : reports) {
    out << YAML::BeginMap;
    out << YAML::Key << "names" << YAML::Value << r.hostname;
    const Devices& d = r.devices;
    out << YAML::Key << "devices" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "kind" << YAML::Value << d.kind << YAML::Key << "count" << YAML::Value << d.count;
    out << YAML::Key << "name" << YAML::Value << d.name << YAML::Key << "memory_gb" << YAML::Value << d.memory_gb;
    out << YAML::Key << "peak_tflops" << YAML::Value << d.peak_tflops << YAML::Key << "cores" << YAML::Value << d.cores;
    if (d.kind == "cuda") out << YAML::Key << "nccl" << YAML::Value << d.nccl;
    if (d.per_gpu > 1) out << YAML::Key << "per_gpu" << YAML::Value << d.per_gpu;
    if (!d.intra_node.empty()) out << YAML::Key << "intra_node" << YAML::Value << d.intra_node;
    out << YAML::EndMap;
    out << YAML::Key << "nics" << YAML::Value << YAML::BeginSeq;
    for (const auto& n : r.nics) emit_nic(out, n);
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string encode_report(const NodeReport& report) { return dump_topology_yaml({report}); }

NodeReport decode_report(const std::string& text, const std::string& source) {
  auto nodes = parse_topology_yaml(text, source);
  if (nodes.size() != 1)
    throw UserError(fmt::format("{}: expected the report of one node, found {} nodes", source, nodes.size()));
  return nodes.front();
}

}  // namespace holmes::topo
