// Link and device facts the cost model needs, read from the topology (plus spec overrides),
// and the alpha-beta costs of the collectives over them. Pure functions of the data; the TCP
// interfaces are the ones ClusterTopology::tcp_interface picks, so the plan and the
// communicators agree on them.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "engine/plan/host_emulation.hpp"
#include "engine/plan/measured.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::plan {

// Link classes of the cost model and of the per-step traffic report.
enum class LinkKind { kIntraNode = 0, kIb = 1, kRoce = 2, kEthernet = 3 };
inline constexpr int kLinkKinds = 4;
const char* to_string(LinkKind kind);  // "intra-node", "ib", "roce", "ethernet"

// Defaults when neither the topology nor the spec gives a figure (docs/cost-model.md).
// Between the GPUs of a node, by its intra-node class (topo::intra_class_of): NVSwitch and
// NVLink at the model's NVLink rate (topo::known_nvlink_gbps: H100 and H200 3600, A100 2400),
// 2400 for a model not in the table; PCIe at a Gen4 x16 slot's usable rate, with a P2P
// message's longer latency. Per GPU and direction.
inline constexpr double kDefaultIntraGbpsCuda = 2400;
inline constexpr double kDefaultIntraGbpsPcie = 200;
inline constexpr double kDefaultIntraLatencyUsPcie = 8;
inline constexpr double kDefaultIntraGbpsCpu = 100;    // loopback TCP between GPU processes (staged groups)
// Between the processes of a CPU job on one node: Gloo over loopback, each sum waiting for the
// other process to finish its compute and be scheduled again on cores both share. Measured
// in the steps (cluster.calibrate's tensor-parallel sums, 2 processes, 1 thread each, 2-core
// VM at load 6-7; docs/results/cost-model-history.md): 2.8 ms per all-reduce of 96 KB, 6.5 ms of
// 256 KB, 6.7 ms of 1 MB, where the idle start-up probe sees 20-40 us and 0.4-3.7 Gb/s. Priced
// as 2 Gb/s (the loopback's own rate) plus 1.5 ms per ring step (the wait to be scheduled):
// 2 (1.5 ms + S / 2 / 2 Gb/s) = 3.4, 4.0, 7.1 ms for those sizes (100 Gb/s and 3 us priced
// 0.03-0.09 ms). A calibration replaces both.
inline constexpr double kDefaultIntraGbpsCpuProcesses = 2;
inline constexpr double kDefaultIntraLatencyUsCpuProcesses = 1500;
inline constexpr double kDefaultRdmaGbps = 100;        // per node when the island does not say
inline constexpr double kDefaultEthernetGbps = 10;     // per node when the NIC rate is unknown
inline constexpr double kDefaultLatencyUs[kLinkKinds] = {3, 5, 6, 30};
inline constexpr double kDefaultEfficiencyCuda = 0.45;  // GEMM-heavy sustained / peak
inline constexpr double kDefaultEfficiencyCpu = 0.5;
inline constexpr double kDefaultPeakTflopsCuda = 100;  // per GPU when the topology does not say
// FP32 (CUDA cores) over BF16 (tensor cores) peak for a GPU not in the table (H100: 67 / 989).
inline constexpr double kFp32PeakFractionCuda = 1.0 / 15;
inline constexpr double kDefaultPeakTflopsCpuCore = 0.05;

// What the plan needs to know about one node.
struct NodeFacts {
  int island = 0;
  LinkKind island_link = LinkKind::kEthernet;  // Ib / Roce for RDMA islands
  int devices = 1;
  bool cuda = false;
  double tflops = 0;        // sustained per device
  NodeEmulation emu;        // host emulation (host_emulation.hpp): CPU nodes that declare it only
  double memory_bytes = 0;  // per device; 0 = unknown (no fit check)
  double rdma_gbps = 0;     // aggregate per node
  double ethernet_gbps = 0;
  double intra_gbps = 0;
  double intra_latency_s = 0;  // between two processes of this node
  std::string intra_class;     // nvswitch, nvlink, pcie, shm (topo::intra_class_of)
  std::string device_name;     // the device model (topology devices.name)
  // The calibration table of this node's device for the job's model and precision (measured.hpp;
  // nullptr: none, the declared or job-calibrated rate prices it). Points into the topology.
  const topo::ComputeTable* table = nullptr;
  bool tflops_calibrated = false;  // `tflops` came from a job's calibration, not the declaration
  std::string ethernet_if;     // interface for TCP traffic that leaves the island
  std::string island_if;       // interface for TCP traffic inside the island
  // island_if is on the island's fabric (IPoIB in an IB island, the RoCE netdev in a RoCE
  // island). When it is not (no such interface with an address), TCP groups inside the
  // island run over Ethernet, and a plan with TCP groups (CPU) costs them so.
  bool island_tcp = false;
  std::vector<std::string> hcas;  // "mlx5_0:1" ports of the island's kind, sorted
  int gid_index = -1;             // RoCE GID index
};

struct LinkCost {
  LinkKind kind = LinkKind::kIntraNode;
  double gbps_per_rank = 0;  // bandwidth one rank gets (the node's NIC shared by its ranks)
  double latency_s = 0;
  bool crosses_island = false;
  // The calibration's efficiency by message size over the class's one figure (which
  // gbps_per_rank already carries): (message bytes, factor), ascending; empty = 1 at every size.
  std::vector<std::pair<double, double>> size_factor = {};
  // The calibrate run's curves of this link (measured.hpp): where they hold the op, they price
  // it instead of alpha + size / gbps_per_rank.
  LinkCurves curves;
  bool calibrated = false;  // gbps_per_rank and latency_s carry a job's calibration of the class
  // The class efficiency gbps_per_rank carries (measured over declared; 1 when not measured):
  // beyond the largest measured size a message's further bytes go at the declared rate,
  // gbps_per_rank / efficiency (topo::efficiency_at).
  double efficiency = 1;
  // Per-rank Gb/s for messages of `bytes` (gbps_per_rank x the size factor, interpolated in log
  // bytes, flat below the measured sizes, tending to the declared rate beyond them).
  double gbps_for(double message_bytes) const;
  // Seconds to move `bytes` once over this link: alpha + bytes / beta(bytes).
  double transfer_s(double bytes) const;
};

struct Facts {
  std::vector<NodeFacts> nodes;
  double latency_s[kLinkKinds] = {};
  // Measured bandwidth / declared, by link class (topology calibration; 1 when not measured).
  double efficiency[kLinkKinds] = {1, 1, 1, 1};
  // By link class, the calibration's efficiency at each measured message size over `efficiency`.
  std::vector<std::pair<double, double>> size_factor[kLinkKinds];
  // Host time per step and parameter a rank holds: optimizer update, gradient zeroing, norms
  // (topology calibration; 0 when not measured).
  double update_s_per_param = 0;
  // Host time per step and rank beside the update (topology calibration host_us_per_step; 0
  // when not measured, or in an older calibration where update_s_per_param carries it).
  double host_s_per_step = 0;
  int islands = 0;
  // Groups are TCP (Gloo, CPU jobs): inside an island they need island_tcp on both ends.
  bool tcp_groups = false;
  // What collect_facts left out and why (a calibration's figures of another device model), for
  // the plan's warnings.
  std::vector<std::string> notes;
  // The calibration's collective curves (topo::Calibration::collectives; null: none), which each
  // link picks its own from (link_between). Points into the topology.
  const std::vector<topo::CollectiveCurve>* collectives = nullptr;
  bool link_calibrated[kLinkKinds] = {};  // a job's calibration measured the class
  bool update_from_table = false;  // update_s_per_param is a calibrate table's optimizer figure
  // Every link between two nodes is Ethernet (the megatron baseline: one network, NCCL's
  // socket transport, for every group of a cluster whose islands cannot talk RDMA).
  bool ethernet_only = false;
};

// Throws UserError when the topology is empty or inconsistent (island_of size, ids).
// Precedence of every figure: the spec's cluster.* override, then the topology's calibration,
// then the topology (or the built-in default). Calibrated efficiencies scale the bandwidth
// whatever its source.
Facts collect_facts(const spec::JobSpec& spec, const topo::ClusterTopology& topo);

// With a calibrated device rate (the slowest stage's, TFLOP/s; 0 = none) and no explicit
// cluster.device_tflops: the slowest declared node gets the calibrated rate and every other node
// its declared multiple of it (collect_facts calls this last).
void calibrate_compute(const spec::JobSpec& spec, double calibrated, Facts& f);

// How many of each node's ranks send off the node over its Ethernet port and over its
// island's RDMA port in one kind of group (by node; nic_use). The groups of a kind talk in the
// same phase of the step (the tensor sums, the pipeline's sends, the data-parallel sync), so
// a hop of such a group gets each end's port over its node's count, not over every rank the
// node has: where two stages of a pipeline share a node and talk inside it, only one of them
// sends off the node, and it has the port to itself.
struct NicUse {
  std::vector<int> ethernet, island;
  // The ranks of `node` sharing the port a hop of `kind` leaves it by: at least 1; the node's
  // ranks (every one of them at once) where the count is not known.
  int sharing(const Facts& f, int node, LinkKind kind) const;
};
// The NIC use of one kind of group: `groups` lists each group's members' nodes (ring or path
// order). A member uses a port where one of its hops (ring: to the next member; path: to
// either neighbour) leaves its node, over the transport its group runs on (group_on_ethernet),
// or with `own_links` over each hop's own link (pipelines_on_own_links).
NicUse nic_use(const Facts& f, const std::vector<std::vector<int>>& groups, bool ring, bool own_links = false);

// Whether each hop of a pipeline takes its own link rather than the pipeline group's one
// transport: in a plan of TCP groups a pipeline that runs on Ethernet gives each hop between
// two nodes of one RDMA island a group of its own over the island (kHopGroup,
// build_groups); NCCL plans keep one communicator, and its one transport, per pipeline.
inline bool pipelines_on_own_links(const Facts& f) { return f.tcp_groups; }
// The link one hop of a pipeline over `nodes` (stage order) carries between two of its nodes:
// its own link where pipelines_on_own_links, else link_in_group's.
LinkCost pipeline_hop(const Facts& f, const std::vector<int>& nodes, int node_a, int node_b,
                      const NicUse* use = nullptr);

// The link between the nodes of two ranks (a == b is intra-node); over Ethernet also inside
// one RDMA island where `over_ethernet` (a hop of a group on Ethernet, group_on_ethernet).
// Each end's port is shared by the node's ranks that `use` counts for it (NicUse), by all of
// its ranks without it.
LinkCost link_between(const Facts& f, int node_a, int node_b, bool over_ethernet = false, const NicUse* use = nullptr);
// Whether a group over `nodes` (in ring or path order) runs on Ethernet: a group runs on one
// transport (groups.cpp, choose_transport: its slowest kind of hop), so one hop over Ethernet
// (across islands) puts every hop between two nodes on it, also inside one RDMA island; a hop
// inside a node stays intra-node.
bool group_on_ethernet(const Facts& f, const std::vector<int>& nodes, bool ring);
// The link such a group carries between two of its nodes: link_between(f, a, b,
// group_on_ethernet(f, nodes, ring)).
LinkCost link_in_group(const Facts& f, const std::vector<int>& nodes, bool ring, int node_a, int node_b,
                       const NicUse* use = nullptr);
// The slowest link a ring over `nodes` (in ring order) uses (link_in_group, ports shared as
// `use` says); a single member is intra-node with zero cost.
LinkCost ring_bottleneck(const Facts& f, const std::vector<int>& nodes, const NicUse* use = nullptr);
// The bytes a group's members send, split by the class of link each send takes (LinkKind
// index; the shares sum to 1 for a group that sends, 0 for one that does not).
using LinkShares = std::array<double, kLinkKinds>;
// A ring over `nodes` (group-rank order): every member sends the same bytes to the next one,
// so each hop carries 1/d of the ring's bytes over its own link (link_in_group's class).
// Members on one node pass theirs inside it: a ring over nodes A A B puts 1/3 of its bytes
// inside A and 2/3 on the links between A and B. Gloo's rings (TCP plans) go in group-rank
// order; NCCL's visit a node's ranks together (nodes in the order they first appear), so a
// ring over A B A B leaves each node once. Empty for one member.
LinkShares ring_shares(const Facts& f, std::vector<int> nodes);
// Every member sends the same bytes to each other member (the outer sync's owner-slice
// exchange): each ordered pair carries 1 / (d (d - 1)) of them over its own link. Two
// replicas' members on one node exchange inside it. Empty for one member.
LinkShares pair_shares(const Facts& f, const std::vector<int>& nodes);

// Ring collectives over d ranks of `bytes` each (the full buffer size per rank):
// all-reduce 2(d-1)(alpha + bytes/(d beta)), reduce-scatter and all-gather half of that; beta
// is the link's rate for the messages of a ring step, bytes/d.
double ring_all_reduce_s(const LinkCost& l, int d, double bytes);
double ring_reduce_scatter_s(const LinkCost& l, int d, double bytes);
double ring_all_gather_s(const LinkCost& l, int d, double bytes);

// A group over several nodes with several of its ranks on each (`per_node` on each of `nodes`):
// NCCL reduces inside each node first, then across the nodes (each local rank a ring of its own
// carrying 1/per_node of the buffer over the node's port), then gathers inside the node. The
// inter-node part over `inter` (the nodes' ring bottleneck with the port whole: the local rings
// share it, each with its share of the bytes), the others over `intra` (the node's intra-node
// link). Gloo's rings do not: TCP plans leave it empty.
struct GroupSpan {
  int nodes = 1, per_node = 1;
  LinkCost intra, inter;
  bool hierarchical() const { return nodes > 1 && per_node > 1; }
};
// The group's collective: the flat ring over `ring` (its bottleneck), or with a hierarchical
// span the faster of that and the hierarchical form (NCCL picks its algorithm by size).
double group_all_reduce_s(const LinkCost& ring, const GroupSpan& span, int d, double bytes);
double group_reduce_scatter_s(const LinkCost& ring, const GroupSpan& span, int d, double bytes);
double group_all_gather_s(const LinkCost& ring, const GroupSpan& span, int d, double bytes);
// The span of a group whose members sit on `nodes` (one entry per member): empty (flat) for
// TCP plans, for a group inside one node, and with one member per node. `use`: the ports of
// every group of its kind, which talk in the same phase of the step (span_use): a node's port
// is shared by those that leave it, each group's local rings taking it in turn; without it the
// group has the port to itself.
GroupSpan group_span(const Facts& f, const std::vector<int>& nodes, const NicUse* use = nullptr);
// The ports the hierarchical forms of `groups` use: NCCL's rings visit a node's ranks together,
// so each group that spans nodes leaves each of its nodes once (nic_use over each group's nodes
// in node order).
NicUse span_use(const Facts& f, std::vector<std::vector<int>> groups);

}  // namespace holmes::plan
