// Helpers of the topology tests: expected NICs written compactly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/topo/topology.hpp"

namespace holmes::test {

inline topo::Nic ib_nic(const std::string& name, bool active, double rate, const std::string& fabric,
                        const std::string& pci, int numa) {
  topo::Nic n;
  n.name = name;
  n.kind = topo::NicKind::kIb;
  n.active = active;
  n.rate_gbps = rate;
  n.port = 1;
  n.fabric = fabric;
  n.pci = pci;
  n.numa_node = numa;
  return n;
}

inline topo::Nic if_nic(const std::string& name, topo::NicKind kind, bool active, std::optional<double> rate,
                        const std::string& pci, int numa, std::vector<std::string> addresses,
                        const std::string& fabric) {
  topo::Nic n;
  n.name = name;
  n.netdev = name;
  n.kind = kind;
  n.active = active;
  n.rate_gbps = rate;
  n.pci = pci;
  n.numa_node = numa;
  n.is_virtual = pci.empty();
  n.addresses = std::move(addresses);
  n.fabric = fabric;
  return n;
}

inline topo::Nic loopback_nic() {
  return if_nic("lo", topo::NicKind::kLoopback, true, std::nullopt, "", -1, {"127.0.0.1/8"}, "127.0.0.0/8");
}

inline topo::Devices gpus(int count) {
  topo::Devices d;
  d.kind = "cuda";
  d.count = count;
  d.name = "H100";
  d.memory_gb = 80;
  d.peak_tflops = 989;
  return d;
}

}  // namespace holmes::test
