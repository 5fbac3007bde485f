// Communicator groups of a layout and the transport each one uses: intra-node when all
// members share a node (Gloo over loopback on CPU), NCCL over the island's RDMA fabric when
// they share an IB / RoCE island, else TCP: NCCL's socket transport or Gloo on GPUs
// (parallel.cross_island), Gloo on CPUs, bound to the interface that reaches every member.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/links.hpp"
#include "engine/plan/placement.hpp"
#include "engine/plan/plan.hpp"

namespace holmes::plan {

// How a CUDA plan's groups over Ethernet (across islands, or between nodes without RDMA)
// move data: parallel.cross_island ("auto", "nccl-socket" or "gloo") and, for auto, the
// message the choice is made for (bytes of the pipeline's activation per micro-batch).
struct EthernetChoice {
  spec::CrossIsland mode = spec::CrossIsland::kAuto;
  double message_bytes = 0;
};

// The transport for one Ethernet group of a CUDA plan whose slowest hop is `link`: the mode
// when it names one, else whichever ethernet_transfer_s (cost_model.hpp) finds faster for the
// message (NCCL sockets on a tie).
Transport ethernet_transport(const EthernetChoice& choice, const LinkCost& link);

// tp, pp, dp groups (one per grid row, in grid order), embedding groups (first and last
// stage of each pipeline, only when pp > 1) and the world group.
std::vector<Group> build_groups(const Facts& f, const DeviceTable& d, const Layout& lay, bool cuda,
                                const EthernetChoice& ethernet = {});

// Chooses the transport of a group from its members' nodes (ring order); fills transport,
// link, interface, hcas, gid_index and the crossing flags.
void choose_transport(const Facts& f, const std::vector<int>& nodes, bool cuda, bool ring, Group& g,
                      const EthernetChoice& ethernet = {}, const NicUse* use = nullptr);

// The slowest hop of a group over `nodes` (ring order; `ring` false: a path): the hop of the
// highest link class (Ethernet over RDMA over intra-node), the slowest of that class. The
// group's link, bandwidth and latency (choose_transport) are this hop's; its ends' ports are
// shared as `use` says (the group's kind, nic_use), by all of the node's ranks without it.
LinkCost slowest_hop(const Facts& f, const std::vector<int>& nodes, bool ring, const NicUse* use = nullptr);

// The log steps' job-wide maximum (memory, communication share, stop signal and a slot per
// rank, a few floats) is a ring all-reduce over the world group (ranks 0..W-1, `node_of` their
// nodes) every `log_interval` steps: 2 (W - 1) latencies of its slowest hop, per step
// amortized. The same for every layout of one cluster (the world group is in rank order). The
// loop blocks on it only in diloco jobs (engine/train/run.cpp); callers price it there only.
double log_exchange_s(const Facts& f, const std::vector<int>& node_of, int log_interval);

}  // namespace holmes::plan
