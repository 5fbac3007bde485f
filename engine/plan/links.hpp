// Link and device facts the cost model needs, read from the topology (plus spec overrides),
// and the alpha-beta costs of the collectives over them. Pure functions of the data; the TCP
// interfaces are the ones ClusterTopology::tcp_interface picks, so the plan and the
// communicators agree on them.
#pragma once

#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::plan {

// Link classes of the cost model and of the per-step traffic report.
enum class LinkKind { kIntraNode = 0, kIb = 1, kRoce = 2, kEthernet = 3 };
inline constexpr int kLinkKinds = 4;
const char* to_string(LinkKind kind);  // "intra-node", "ib", "roce", "ethernet"

// Defaults when neither the topology nor the spec gives a figure (docs/cost-model.md).
inline constexpr double kDefaultIntraGbpsCuda = 2400;  // NVLink-class, per GPU and direction
inline constexpr double kDefaultIntraGbpsCpu = 100;    // shared memory between processes
inline constexpr double kDefaultRdmaGbps = 100;        // per node when the island does not say
inline constexpr double kDefaultEthernetGbps = 10;     // per node when the NIC rate is unknown
inline constexpr double kDefaultLatencyUs[kLinkKinds] = {3, 5, 6, 30};
inline constexpr double kDefaultEfficiencyCuda = 0.45;  // GEMM-heavy sustained / peak
inline constexpr double kDefaultEfficiencyCpu = 0.5;
inline constexpr double kDefaultPeakTflopsCuda = 100;  // per GPU when the topology does not say
inline constexpr double kDefaultPeakTflopsCpuCore = 0.05;

// What the plan needs to know about one node.
struct NodeFacts {
  int island = 0;
  LinkKind island_link = LinkKind::kEthernet;  // Ib / Roce for RDMA islands
  int devices = 1;
  bool cuda = false;
  double tflops = 0;        // sustained per device
  double memory_bytes = 0;  // per device; 0 = unknown (no fit check)
  double rdma_gbps = 0;     // aggregate per node
  double ethernet_gbps = 0;
  double intra_gbps = 0;
  std::string ethernet_if;     // interface for TCP traffic that leaves the island
  std::string island_if;       // interface for TCP traffic inside the island
  std::vector<std::string> hcas;  // "mlx5_0:1" ports of the island's kind, sorted
  int gid_index = -1;             // RoCE GID index
};

struct LinkCost {
  LinkKind kind = LinkKind::kIntraNode;
  double gbps_per_rank = 0;  // bandwidth one rank gets (the node's NIC shared by its ranks)
  double latency_s = 0;
  bool crosses_island = false;
  // Seconds to move `bytes` once over this link: alpha + bytes / beta.
  double transfer_s(double bytes) const;
};

struct Facts {
  std::vector<NodeFacts> nodes;
  double latency_s[kLinkKinds] = {};
  int islands = 0;
};

// Throws UserError when the topology is empty or inconsistent (island_of size, ids).
Facts collect_facts(const spec::JobSpec& spec, const topo::ClusterTopology& topo);

// The link between the nodes of two ranks (a == b is intra-node).
LinkCost link_between(const Facts& f, int node_a, int node_b);
// The slowest link a ring over `nodes` (in ring order) uses; a single member is intra-node
// with zero cost.
LinkCost ring_bottleneck(const Facts& f, const std::vector<int>& nodes);

// Ring collectives over d ranks of `bytes` each (the full buffer size per rank):
// all-reduce 2(d-1)(alpha + bytes/(d beta)), reduce-scatter and all-gather half of that.
double ring_all_reduce_s(const LinkCost& l, int d, double bytes);
double ring_reduce_scatter_s(const LinkCost& l, int d, double bytes);
double ring_all_gather_s(const LinkCost& l, int d, double bytes);

}  // namespace holmes::plan
