#include "engine/plan/nccl.hpp"

#include "common/errors.hpp"

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

NcclDecision decide_nccl(const spec::JobSpec& spec, const topo::ClusterTopology& topology, bool cuda) {
  NcclDecision d;
  if (!cuda) return d;
  const spec::NcclMode mode = spec.parallel.nccl;
  if (mode == spec::NcclMode::kOff) {
    d.why = "parallel.nccl is off: device buffers are staged through pinned host memory into Gloo";
    return d;
  }
  std::vector<std::string> without, shared;
  for (const auto& n : topology.nodes) {
    if (!n.devices.nccl) without.push_back(n.hostname);
    if (n.devices.per_gpu > 1) shared.push_back(fmt::format("{} ({} ranks per GPU)", n.hostname, n.devices.per_gpu));
  }
  if (!without.empty()) {
    const std::string nodes = fmt::format("{}", fmt::join(without, ", "));
    if (mode == spec::NcclMode::kOn)
      throw UserError(fmt::format("parallel.nccl: 'on', but libnccl cannot be loaded on {} (install NCCL 2.19 or "
                                  "newer there, or set LD_LIBRARY_PATH); accepted here: auto or off, which stage "
                                  "device buffers through Gloo", nodes));
    d.why = fmt::format("parallel.nccl auto: no libnccl on {}; device buffers are staged through Gloo", nodes);
    return d;
  }
  if (!shared.empty() && mode == spec::NcclMode::kAuto) {
    d.why = fmt::format("parallel.nccl auto: ranks share a GPU on {}, which NCCL does not support; device buffers are "
                        "staged through Gloo (parallel.nccl: on forces NCCL, a test set-up)",
                        fmt::join(shared, ", "));
    return d;
  }
  d.use = true;
  d.shared_gpu = !shared.empty();
  return d;
}

bool uses_nccl(const Plan& plan) {
  if (plan.device_kind != "cuda") return false;
  for (const Group& g : plan.groups)  // the world group carries host values only: Gloo
    if (g.kind != kWorldGroup && g.ranks.size() > 1 && g.transport != Transport::kGlooTcp) return true;
  return false;
}

std::vector<EnvVar> nccl_env(const Plan& plan, int node) {
  const NodeNet& n = plan.node_nets.at(node);
  std::vector<EnvVar> out;
  if (plan.device_kind != "cuda" || !uses_nccl(plan)) return out;
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
    // Inside one node NVLink, PCIe P2P or shared memory carry everything: no network is
    // named, so NCCL initialises no plugin a container may lack (/dev/infiniband, ports down).
    case Transport::kIntraNode: (void)node; return "";
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
