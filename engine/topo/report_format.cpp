#include "engine/topo/report_format.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

namespace holmes::topo {

namespace {

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{}", v);  // shortest text that reads back as the same double
}

std::string json_nic(const Nic& n) {
  std::vector<std::string> addrs;
  for (const auto& a : n.addresses) addrs.push_back(json_quote(a));
  return fmt::format(
      "{{\"name\": {}, \"kind\": \"{}\", \"state\": \"{}\", \"rate_gbps\": {}, \"port\": {}, \"netdev\": {}, "
      "\"fabric\": {}, \"numa_node\": {}, \"pci\": {}, \"virtual\": {}, \"roce_version\": {}, \"gid_index\": {}, "
      "\"addresses\": [{}]}}",
      json_quote(n.name), to_string(n.kind), n.active ? "active" : "down",
      n.rate_gbps ? json_number(*n.rate_gbps) : "null", n.port, json_quote(n.netdev), json_quote(n.fabric),
      n.numa_node, json_quote(n.pci), n.is_virtual ? "true" : "false", n.roce_version, n.gid_index,
      fmt::join(addrs, ", "));
}

}  // namespace


std::string report_json(const NodeReport& r) {
  const Devices& d = r.devices;
  std::string out = fmt::format(
      "{{\n  \"hostname\": {},\n  \"devices\": {{\"kind\": {}, \"count\": {}, \"name\": {}, \"memory_gb\": {}, "
      "\"peak_tflops\": {}, \"cores\": {}, \"intra_node\": {}}},\n  \"nics\": [",
      json_quote(r.hostname), json_quote(d.kind), d.count, json_quote(d.name), json_number(d.memory_gb),
      json_number(d.peak_tflops), d.cores, json_quote(intra_class_of(d)));
  for (size_t i = 0; i < r.nics.size(); ++i) out += (i ? ",\n    " : "\n    ") + json_nic(r.nics[i]);
  out += r.nics.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

std::string report_text(const NodeReport& r) {
  const Devices& d = r.devices;
  std::string out = fmt::format("host     {}\n", r.hostname);
  out += fmt::format("devices  {} x {} '{}', {:.1f} GB each", d.count, d.kind, d.name, d.memory_gb);
  if (d.cores > 0) out += fmt::format(", {} cores", d.cores);
  if (d.peak_tflops > 0) out += fmt::format(", {} TFLOP/s peak", d.peak_tflops);
  out += fmt::format(", intra-node {}{}", intra_class_of(d), d.intra_node.empty() ? " (the model's usual)" : "");
  out += fmt::format("\nnics     {}\n", r.nics.size());
  if (r.nics.empty()) return out;
  out += fmt::format("  {:<14} {:<9} {:<6} {:>9} {:<12} {:<20} {:>4} {:<13} {}\n", "NAME", "KIND", "STATE", "GBIT/S",
                     "NETDEV", "FABRIC", "NUMA", "PCI", "ADDRESSES");
  for (const auto& n : r.nics) {
    std::string name = n.port > 0 ? fmt::format("{}:{}", n.name, n.port) : n.name;
    std::string kind = to_string(n.kind);
    if (n.kind == NicKind::kRoce && n.roce_version > 0) kind += fmt::format(" v{}", n.roce_version);
    if (n.is_virtual) kind += "*";
    std::string rate = n.rate_gbps ? fmt::format("{}", *n.rate_gbps) : "?";
    out += fmt::format("  {:<14} {:<9} {:<6} {:>9} {:<12} {:<20} {:>4} {:<13} {}\n", name, kind,
                       n.active ? "active" : "down", rate, n.netdev.empty() ? "-" : n.netdev,
                       n.fabric.empty() ? "-" : n.fabric, n.numa_node, n.pci.empty() ? "-" : n.pci,
                       n.addresses.empty() ? "-" : fmt::format("{}", fmt::join(n.addresses, " ")));
  }
  out += "  (* virtual: no hardware device; ? rate not reported)\n";
  return out;
}

}  // namespace holmes::topo
