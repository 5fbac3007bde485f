// Communicator groups of a layout and the transport each one uses: intra-node when all
// members share a node (Gloo over loopback on CPU), NCCL over the island's RDMA fabric when
// they share an IB / RoCE island, else TCP: NCCL's socket transport on GPUs, Gloo on CPUs,
// bound to the interface that reaches every member.
#pragma once

#include <vector>

#include "engine/plan/links.hpp"
#include "engine/plan/placement.hpp"
#include "engine/plan/plan.hpp"

namespace holmes::plan {

// tp, pp, dp groups (one per grid row, in grid order), embedding groups (first and last
// stage of each pipeline, only when pp > 1) and the world group.
std::vector<Group> build_groups(const Facts& f, const DeviceTable& d, const Layout& lay, bool cuda);

// Chooses the transport of a group from its members' nodes (ring order); fills transport,
// link, interface, hcas, gid_index and the crossing flags.
void choose_transport(const Facts& f, const std::vector<int>& nodes, bool cuda, bool ring, Group& g);

}  // namespace holmes::plan
