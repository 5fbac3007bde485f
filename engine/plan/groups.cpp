#include "engine/plan/groups.hpp"

#include "engine/plan/cost_model.hpp"

#include <algorithm>
#include <set>

namespace holmes::plan {

namespace {

std::string join_unique(std::set<std::string> names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

Transport ethernet_transport(const EthernetChoice& choice, const LinkCost& link) {
  if (choice.mode == spec::CrossIsland::kNcclSocket) return Transport::kNcclSocket;
  if (choice.mode == spec::CrossIsland::kGloo) return Transport::kGlooTcp;
  const double nccl = ethernet_transfer_s(Transport::kNcclSocket, choice.message_bytes, link);
  const double gloo = ethernet_transfer_s(Transport::kGlooTcp, choice.message_bytes, link);
  return gloo < nccl ? Transport::kGlooTcp : Transport::kNcclSocket;
}

LinkCost slowest_hop(const Facts& f, const std::vector<int>& nodes, bool ring, const NicUse* use) {
  // The ring wraps around, a pipeline is a path.
  LinkCost worst;
  const size_t hops = ring ? nodes.size() : nodes.size() - 1;
  for (size_t i = 0; i < hops && nodes.size() > 1; ++i) {
    LinkCost l = link_between(f, nodes[i], nodes[(i + 1) % nodes.size()], false, use);
    const bool slower = i == 0 || static_cast<int>(l.kind) > static_cast<int>(worst.kind) ||
                        (l.kind == worst.kind && l.gbps_per_rank < worst.gbps_per_rank);
    if (slower) worst = l;
  }
  return worst;
}

double log_exchange_s(const Facts& f, const std::vector<int>& node_of, int log_interval) {
  if (node_of.size() < 2) return 0;
  return 2.0 * (node_of.size() - 1) * slowest_hop(f, node_of, true).latency_s / std::max(1, log_interval);
}

void choose_transport(const Facts& f, const std::vector<int>& nodes, bool cuda, bool ring, Group& g,
                      const EthernetChoice& ethernet, const NicUse* use) {
  g.crosses_nodes = false;
  g.crosses_islands = false;
  for (int n : nodes) {
    g.crosses_nodes |= n != nodes[0];
    g.crosses_islands |= f.nodes[n].island != f.nodes[nodes[0]].island;
  }
  const LinkCost worst = slowest_hop(f, nodes, ring, use);
  g.link = worst.kind;
  g.gbps_per_rank = worst.gbps_per_rank;
  g.latency_s = worst.latency_s;
  g.hcas.clear();
  g.gid_index = -1;
  g.interface.clear();
  const NodeFacts& first = f.nodes[nodes[0]];
  if (!g.crosses_nodes) {
    g.transport = cuda ? Transport::kIntraNode : Transport::kGlooTcp;
    if (!cuda) g.interface = "lo";
    return;
  }
  std::set<std::string> ifaces;
  // Every hop on the island's RDMA fabric (the link model says when a TCP group could not use it).
  if (worst.kind == LinkKind::kIb || worst.kind == LinkKind::kRoce) {
    if (!cuda) {
      for (int n : nodes) ifaces.insert(f.nodes[n].island_if);
      g.transport = Transport::kGlooTcp;
      g.interface = join_unique(std::move(ifaces));
      return;
    }
    std::set<std::string> hcas;
    for (int n : nodes) {
      hcas.insert(f.nodes[n].hcas.begin(), f.nodes[n].hcas.end());
      int gid = f.nodes[n].gid_index;
      if (gid >= 0 && (g.gid_index < 0 || gid < g.gid_index)) g.gid_index = gid;
    }
    g.hcas.assign(hcas.begin(), hcas.end());
    g.transport = first.island_link == LinkKind::kIb ? Transport::kNcclIb : Transport::kNcclRoce;
    return;
  }
  for (int n : nodes) ifaces.insert(f.nodes[n].ethernet_if);
  g.transport = cuda ? ethernet_transport(ethernet, worst) : Transport::kGlooTcp;
  g.interface = join_unique(std::move(ifaces));
}

std::vector<Group> build_groups(const Facts& f, const DeviceTable& d, const Layout& lay, bool cuda,
                                const EthernetChoice& ethernet) {
  std::vector<Group> out;
  // Every group of a kind at once: its members' NIC use is the kind's (nic_use).
  auto add_all = [&](GroupKind kind, const std::vector<std::vector<int>>& groups, bool ring, bool own_links = false) {
    std::vector<std::vector<int>> nodes(groups.size());
    for (size_t i = 0; i < groups.size(); ++i)
      for (int r : groups[i]) nodes[i].push_back(d.node_of[r]);
    const NicUse use = nic_use(f, nodes, ring, own_links);
    for (size_t i = 0; i < groups.size(); ++i) {
      Group g;
      g.kind = kind;
      g.index = static_cast<int>(i);
      g.ranks = groups[i];
      choose_transport(f, nodes[i], cuda, ring, g, ethernet, kind == kWorldGroup ? nullptr : &use);
      out.push_back(std::move(g));
    }
  };
  const RankGrid& grid = lay.grid;
  // The groups spanning `axes`, as global ranks.
  auto groups_of = [&](AxisSet axes) {
    std::vector<std::vector<int>> all = grid.groups(axes);
    for (auto& members : all)
      for (int& v : members) v = lay.rank_at[v];
    return all;
  };
  add_all(kTpGroup, groups_of(Axis::kTp), true);
  const std::vector<std::vector<int>> pipes = groups_of(Axis::kPp);
  // The pipelines' ports as their hops use them (the hop groups below carry the island hops).
  add_all(kPpGroup, pipes, false, pipelines_on_own_links(f));
  add_all(kDpGroup, groups_of(Axis::kDp), true);
  if (grid.degree(Axis::kPp) > 1) {
    std::vector<std::vector<int>> ends;
    for (const auto& members : pipes) ends.push_back({members.front(), members.back()});
    add_all(kEmbeddingGroup, ends, false);
  }
  // A pipeline group that crosses islands runs on Ethernet (one Gloo device, bound to one
  // interface); a TCP plan gives each of its hops between two nodes of one RDMA island a group
  // of its own over the island (pipelines_on_own_links), so that the activations between two
  // stages of one island do not take the slow link. Lower stage first.
  if (pipelines_on_own_links(f)) {
    std::vector<std::vector<int>> hops;
    std::vector<int> nodes;
    for (const auto& members : pipes) {
      nodes.clear();
      for (int r : members) nodes.push_back(d.node_of[r]);
      if (!group_on_ethernet(f, nodes, false)) continue;
      for (size_t s = 0; s + 1 < members.size(); ++s)
        if (nodes[s] != nodes[s + 1] && link_between(f, nodes[s], nodes[s + 1]).kind != LinkKind::kEthernet)
          hops.push_back({members[s], members[s + 1]});
    }
    add_all(kHopGroup, hops, false);
  }
  std::vector<int> all(d.node_of.size());
  for (int r = 0; r < static_cast<int>(all.size()); ++r) all[r] = r;
  add_all(kWorldGroup, {all}, true);
  return out;
}

}  // namespace holmes::plan
