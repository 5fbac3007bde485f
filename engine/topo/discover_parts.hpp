// Internal pieces of discover_node, one per sysfs class. Not for use outside engine/topo.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "engine/topo/discover.hpp"

namespace holmes::topo::detail {

// RDMA ports under <root>/sys/class/infiniband, devices and ports in natural order.
// `roce_netdevs` receives every interface that carries a RoCE port's GID, so the interface
// scan does not list those again as plain Ethernet.
std::vector<Nic> discover_rdma_ports(const std::filesystem::path& root, const AddressMap& addresses,
                                     std::set<std::string>& roce_netdevs);

// Network interfaces under <root>/sys/class/net of type Ethernet, IPoIB or loopback, minus
// `skip` (the RoCE netdevs).
std::vector<Nic> discover_interfaces(const std::filesystem::path& root, const AddressMap& addresses,
                                     const std::set<std::string>& skip);

// IPv4 subnet of the first address of `netdev` (or "" when it has none).
std::string subnet_of(const AddressMap& addresses, const std::string& netdev);

}  // namespace holmes::topo::detail
