// NicKind names and the ClusterTopology queries (link, tcp_interface, ethernet_gbps).
#include "engine/topo/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "engine/topo/cluster.hpp"

namespace holmes::topo {

const char* to_string(NicKind kind) {
  switch (kind) {
    case NicKind::kIb: return "ib";
    case NicKind::kRoce: return "roce";
    case NicKind::kEthernet: return "ethernet";
    case NicKind::kIpoib: return "ipoib";
    case NicKind::kLoopback: return "loopback";
  }
  return "?";
}

std::optional<NicKind> nic_kind_from_string(const std::string& text) {
  for (NicKind k : {NicKind::kIb, NicKind::kRoce, NicKind::kEthernet, NicKind::kIpoib, NicKind::kLoopback})
    if (text == to_string(k)) return k;
  return std::nullopt;
}

namespace {

void check_node(const ClusterTopology& t, int node) {
  if (node < 0 || node >= static_cast<int>(t.nodes.size()))
    throw std::out_of_range(fmt::format("node index {} outside 0..{}", node, t.nodes.size()));
}

// Physical Ethernet-class port: plain Ethernet, or a RoCE port (its netdev is an Ethernet port).
bool carries_ethernet(const Nic& nic) {
  return nic.active && !nic.is_virtual && (nic.kind == NicKind::kEthernet || nic.kind == NicKind::kRoce);
}

// Interfaces that container runtimes and hypervisors create; never the way to another host
// (NCCL's socket transport skips docker* by default for the same reason).
bool container_noise(const std::string& name) {
  for (const char* prefix : {"docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "vxlan", "podman"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

double ClusterTopology::ethernet_gbps(int node) const {
  check_node(*this, node);
  double best = 0;
  for (const auto& nic : nodes[node].nics)
    if (carries_ethernet(nic) && nic.rate_gbps && *nic.rate_gbps > best) best = *nic.rate_gbps;
  return best > 0 ? best : kAssumedEthernetGbps;
}

std::string ClusterTopology::tcp_interface(int node, bool inside_island) const {
  check_node(*this, node);
  const auto& nics = nodes[node].nics;
  NicKind island_kind = node < static_cast<int>(island_of.size()) && island_of[node] < static_cast<int>(islands.size())
                            ? islands[island_of[node]].kind
                            : NicKind::kEthernet;
  // Rank of a candidate; lower is better. Interfaces with an IPv4 address come first since
  // TCP needs one; then by kind in the order that suits the traffic; then physical; then not
  // a container bridge; then rate.
  auto kind_rank = [&](const Nic& nic) {
    if (inside_island && island_kind == NicKind::kIb) return nic.kind == NicKind::kIpoib ? 0 : nic.kind == NicKind::kEthernet ? 1 : 2;
    if (inside_island && island_kind == NicKind::kRoce) return nic.kind == NicKind::kRoce ? 0 : nic.kind == NicKind::kEthernet ? 1 : 2;
    return nic.kind == NicKind::kEthernet ? 0 : nic.kind == NicKind::kRoce ? 1 : 2;
  };
  const Nic* best = nullptr;
  auto key = [&](const Nic& n) {
    return std::make_tuple(n.addresses.empty(), kind_rank(n), n.is_virtual, container_noise(n.name),
                           -n.rate_gbps.value_or(0));
  };
  for (const auto& nic : nics) {
    if (!nic.active || nic.kind == NicKind::kLoopback || nic.kind == NicKind::kIb) continue;
    if (nic.kind == NicKind::kRoce && nic.netdev.empty()) continue;
    if (!best || key(nic) < key(*best)) best = &nic;
  }
  if (!best) return "lo";
  return best->kind == NicKind::kRoce ? best->netdev : best->name;
}

}  // namespace holmes::topo
