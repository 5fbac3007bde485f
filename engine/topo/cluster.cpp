#include "engine/topo/cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/format.hpp"
#include "engine/topo/hostlist.hpp"
#include "engine/topo/report_format.hpp"

namespace holmes::topo {

namespace {

using FabricKey = std::pair<NicKind, std::string>;

std::string fabric_label(const FabricKey& key) {
  return fmt::format("{} fabric '{}'", to_string(key.first), key.second.empty() ? "?" : key.second);
}

// Names, device kind and count must agree: the rank layout puts the same number of ranks on
// every node and one backend runs everywhere.
// Every problem found is reported at once, as the topology file loader does.
void check_nodes(const std::vector<NodeReport>& nodes, std::vector<std::string>& warnings) {
  if (nodes.empty()) throw TopologyError("the topology has no nodes; give at least one node report or topology entry");
  std::vector<ConfigIssue> problems;
  auto problem = [&](std::string what) { problems.push_back({"", "", 0, 0, std::move(what)}); };
  std::set<std::string> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].hostname.empty())
      problem(fmt::format("node {} has an empty host name; accepted: a non-empty name", i));
    else if (!seen.insert(nodes[i].hostname).second)
      problem(fmt::format("node '{}' appears twice in the topology; host names must be unique", nodes[i].hostname));
  }
  std::map<std::string, std::vector<std::string>> by_devices;  // "8 cuda" -> hosts
  std::set<std::string> models;
  for (const auto& n : nodes) {
    by_devices[fmt::format("{} {}", n.devices.count, n.devices.kind)].push_back(n.hostname);
    models.insert(fmt::format("{} ({:.0f} GB)", n.devices.name, n.devices.memory_gb));
  }
  if (by_devices.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [what, hosts] : by_devices) parts.push_back(fmt::format("{}: {}", compress_hostlist(hosts), what));
    problem(fmt::format("nodes disagree on their compute devices ({}); every node must have the same number and kind "
                        "of devices", fmt::join(parts, "; ")));
  }
  if (!problems.empty()) throw TopologyError(format_issues("invalid topology", problems));
  if (models.size() > 1)
    warnings.push_back(fmt::format("nodes have different device models ({}); the planner uses each node's own figures",
                                   fmt::join(models, ", ")));
}

// The node's island fabric: highest aggregate rate, IB before RoCE on a tie. nullopt = none.
std::optional<FabricKey> primary_fabric(const NodeReport& n, std::vector<std::string>& warnings) {
  RdmaFabrics fabrics = rdma_fabrics(n);
  if (fabrics.empty()) return std::nullopt;
  const FabricKey* best = nullptr;
  double best_rate = -1;
  for (const auto& [key, rate] : fabrics)  // map order puts Ib before Roce
    if (rate > best_rate) {
      best = &key;
      best_rate = rate;
    }
  if (fabrics.size() > 1) {
    std::vector<std::string> all;
    for (const auto& [key, rate] : fabrics) all.push_back(fmt::format("{} ({} Gb/s)", fabric_label(key), rate));
    warnings.push_back(fmt::format("node '{}' has active RDMA ports on {}; it joins the island of {}", n.hostname,
                                   fmt::join(all, ", "), fabric_label(*best)));
  }
  return *best;
}

void warn_about_island(const ClusterTopology& t, const Island& isl, std::vector<std::string>& warnings) {
  std::vector<std::string> hosts;
  for (int i : isl.nodes) hosts.push_back(t.nodes[i].hostname);
  std::string who = compress_hostlist(hosts);
  FabricKey key{isl.kind, isl.fabric};
  if (isl.nodes.size() == 1 && t.nodes.size() > 1)
    warnings.push_back(fmt::format("node '{}' is the only node on {}; it is an island of one and reaches the other "
                                   "nodes over Ethernet",
                                   who, fabric_label(key)));
  if (isl.kind == NicKind::kRoce && isl.fabric.empty())
    warnings.push_back(fmt::format("{}: RoCE ports without an IPv4 address; assumed they all share one fabric", who));
  double lo = 1e300, hi = 0;
  for (int i : isl.nodes) {
    double r = rdma_fabrics(t.nodes[i]).at(key);
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  if (hi == 0)
    warnings.push_back(fmt::format("{}: no port on {} reports its rate; the planner assumes its default", who,
                                   fabric_label(key)));
  else if (lo != hi)
    warnings.push_back(fmt::format("{}: nodes on {} have {} to {} Gb/s of RDMA bandwidth; the island counts {} per node",
                                   who, fabric_label(key), lo, hi, lo));
}

}  // namespace

RdmaFabrics rdma_fabrics(const NodeReport& node) {
  RdmaFabrics out;
  for (const auto& nic : node.nics)
    if (nic.active && (nic.kind == NicKind::kIb || nic.kind == NicKind::kRoce))
      out[{nic.kind, nic.fabric}] += nic.rate_gbps.value_or(0);
  return out;
}

std::vector<NodeReport> unique_nodes(const std::vector<NodeReport>& per_rank) {
  std::vector<NodeReport> out;
  std::map<std::string, size_t> index;
  for (size_t rank = 0; rank < per_rank.size(); ++rank) {
    const NodeReport& r = per_rank[rank];
    auto [it, fresh] = index.emplace(r.hostname, out.size());
    if (fresh) {
      out.push_back(r);
      continue;
    }
    // Same host: the JSON form holds every field, so equal text means equal reports.
    if (report_json(out[it->second]) != report_json(r))
      throw TopologyError(fmt::format("rank {} reports host '{}' with other NICs or devices than an earlier rank of "
                                      "that host; are two machines using the same host name?",
                                      rank, r.hostname));
  }
  return out;
}

std::vector<NodeReport> overlay_reports(std::vector<NodeReport> discovered, const std::vector<NodeReport>& file,
                                        std::vector<std::string>* notes) {
  std::map<std::string, const NodeReport*> by_name;
  for (const auto& r : file) by_name[r.hostname] = &r;
  std::vector<std::string> replaced;
  for (auto& r : discovered) {
    auto it = by_name.find(r.hostname);
    if (it == by_name.end()) continue;
    // What the processes found at run time stays: whether libnccl loads, how many share a GPU.
    const bool nccl = r.devices.nccl;
    const int per_gpu = r.devices.per_gpu;
    const bool found_gpus = r.devices.kind == "cuda";
    r = *it->second;
    if (found_gpus && r.devices.kind == "cuda") {
      r.devices.nccl = r.devices.nccl && nccl;
      r.devices.per_gpu = per_gpu;
    }
    replaced.push_back(r.hostname);
    by_name.erase(it);
  }
  if (notes && !replaced.empty())
    notes->push_back(fmt::format("the topology file replaces what discovery found on {}", compress_hostlist(replaced)));
  if (notes && !by_name.empty()) {
    std::vector<std::string> unused;
    for (const auto& [name, r] : by_name) unused.push_back(name);
    notes->push_back(fmt::format("the topology file lists {} which are not in this job; ignored", compress_hostlist(unused)));
  }
  return discovered;
}

std::vector<NodeReport> order_nodes(const std::vector<NodeReport>& reports, const std::vector<std::string>& names,
                                    const std::string& source) {
  std::map<std::string, const NodeReport*> by_name;
  for (const auto& r : reports) by_name[r.hostname] = &r;
  std::vector<NodeReport> out;
  std::vector<std::string> unknown, twice;
  std::set<std::string> seen;
  for (const auto& n : names) {
    if (!seen.insert(n).second) twice.push_back(n);
    else if (auto it = by_name.find(n); it == by_name.end()) unknown.push_back(n);
    else out.push_back(*it->second);
  }
  if (!twice.empty())
    throw TopologyError(fmt::format("{} names {} more than once; every node of a job is listed once", source,
                                    compress_hostlist(twice)));
  if (!unknown.empty()) {
    std::vector<std::string> known;
    for (const auto& r : reports) known.push_back(r.hostname);
    throw TopologyError(fmt::format("{} names {} which the topology does not describe; it has {}", source,
                                    compress_hostlist(unknown), compress_hostlist(known)));
  }
  return out;
}

ClusterTopology build_cluster(std::vector<NodeReport> nodes) {
  ClusterTopology t;
  check_nodes(nodes, t.warnings);
  t.nodes = std::move(nodes);
  t.island_of.assign(t.nodes.size(), -1);
  std::map<FabricKey, int> island_by_fabric;
  for (int i = 0; i < static_cast<int>(t.nodes.size()); ++i) {
    auto key = primary_fabric(t.nodes[i], t.warnings);
    int id = static_cast<int>(t.islands.size());
    if (key) {
      auto [it, fresh] = island_by_fabric.emplace(*key, id);
      if (!fresh) id = it->second;
    }
    if (id == static_cast<int>(t.islands.size())) {
      Island isl;
      isl.id = id;
      isl.kind = key ? key->first : NicKind::kEthernet;
      isl.fabric = key ? key->second : "";
      t.islands.push_back(isl);
    }
    t.islands[id].nodes.push_back(i);
    t.island_of[i] = id;
  }
  for (auto& isl : t.islands) {
    if (isl.kind == NicKind::kEthernet) continue;
    double lo = -1;
    for (int i : isl.nodes) {
      double r = rdma_fabrics(t.nodes[i]).at({isl.kind, isl.fabric});
      lo = lo < 0 ? r : std::min(lo, r);
    }
    isl.rdma_gbps_per_node = lo;
    warn_about_island(t, isl, t.warnings);
  }
  for (int i = 0; i < static_cast<int>(t.nodes.size()); ++i) {
    bool known = false;
    for (const auto& nic : t.nodes[i].nics)
      known |= nic.active && !nic.is_virtual && (nic.kind == NicKind::kEthernet || nic.kind == NicKind::kRoce) &&
               nic.rate_gbps.has_value();
    if (!known && t.nodes.size() > 1)
      t.warnings.push_back(fmt::format("node '{}': no active physical Ethernet port reports its speed; assumed {} Gb/s",
                                       t.nodes[i].hostname, kAssumedEthernetGbps));
  }
  return t;
}

std::string describe_cluster(const ClusterTopology& t) {
  std::string out = fmt::format("{}, {}\n", count_of(t.nodes.size(), "node"), count_of(t.islands.size(), "island"));
  for (const auto& isl : t.islands) {
    std::vector<std::string> hosts;
    for (int i : isl.nodes) hosts.push_back(t.nodes[i].hostname);
    std::string size = fmt::format("{} node{}", isl.nodes.size(), isl.nodes.size() == 1 ? "" : "s");
    std::string rdma = isl.kind == NicKind::kEthernet ? "no RDMA" : fmt::format("{} Gb/s RDMA per node", isl.rdma_gbps_per_node);
    out += fmt::format("  island {}: {}{} {} ({}, {})\n", isl.id, to_string(isl.kind),
                       isl.fabric.empty() ? "" : " " + isl.fabric, compress_hostlist(hosts), size, rdma);
  }
  for (const auto& w : t.warnings) out += "  warning: " + w + "\n";
  return out;
}

}  // namespace holmes::topo
