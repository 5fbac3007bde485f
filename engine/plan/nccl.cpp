#include "engine/plan/nccl.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace holmes::plan {

namespace {

bool rdma_node(const NodeNet& n) {
  return (n.island_link == LinkKind::kIb || n.island_link == LinkKind::kRoce) && !n.hcas.empty();
}

}  // namespace

std::vector<EnvVar> nccl_env(const Plan& plan, int node) {
  const NodeNet& n = plan.node_nets.at(node);
  std::vector<EnvVar> out;
  if (plan.device_kind != "cuda") return out;
  if (rdma_node(n)) {
    // "=" makes NCCL match the names exactly (mlx5_1 would otherwise also select mlx5_10);
    // only the island's ports are listed, so a node with IB and RoCE ports never offers the
    // other link layer to a communicator.
    out.push_back({"NCCL_IB_HCA", "=" + fmt::format("{}", fmt::join(n.hcas, ",")),
                   fmt::format("the {} ports of this node's island", to_string(n.island_link))});
    if (n.island_link == LinkKind::kRoce && n.gid_index >= 0)
      out.push_back({"NCCL_IB_GID_INDEX", std::to_string(n.gid_index),
                     "the RoCE v2 GID with an IPv4 address that discovery found"});
  }
  // Bootstrap (every communicator) and the socket transport (groups across islands) bind
  // here. A job on one machine talks over loopback, as its Gloo groups do.
  const bool one_machine = plan.hostnames.size() <= 1;
  const std::string iface = one_machine || n.ethernet_if.empty() ? "lo" : n.ethernet_if;
  out.push_back({"NCCL_SOCKET_IFNAME", "=" + iface,
                 one_machine ? "one machine: bootstrap over loopback"
                             : "the Ethernet interface that reaches every node (bootstrap, socket transport)"});
  out.push_back({"NCCL_SOCKET_FAMILY", "AF_INET", "the topology and the rendezvous store know IPv4 addresses only"});
  return out;
}

std::string group_name(const Group& g) { return fmt::format("{}{}", to_string(g.kind), g.index); }

std::string nccl_net(const Plan& plan, const Group& g, int node) {
  switch (g.transport) {
    case Transport::kNcclIb:
    case Transport::kNcclRoce: return "IB";
    case Transport::kNcclSocket: return "Socket";
    case Transport::kIntraNode: return rdma_node(plan.node_nets.at(node)) ? "IB" : "Socket";
    case Transport::kGlooTcp: break;
  }
  throw std::invalid_argument(fmt::format("group {} uses {}, not an NCCL transport", group_name(g),
                                          to_string(g.transport)));
}

std::vector<NcclComm> nccl_communicators(const Plan& plan, int rank) {
  std::vector<NcclComm> out;
  if (plan.device_kind != "cuda") return out;
  const int node = plan.ranks.at(rank).node;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const Group& g = plan.groups[i];
    if (g.ranks.size() < 2 || g.transport == Transport::kGlooTcp) continue;
    if (std::find(g.ranks.begin(), g.ranks.end(), rank) == g.ranks.end()) continue;
    out.push_back(NcclComm{static_cast<int>(i), group_name(g), nccl_net(plan, g, node), g.ranks});
  }
  return out;
}

}  // namespace holmes::plan
