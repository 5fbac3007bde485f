// Placement: which global rank gets which (tp, pp, dp) coordinate.
//
// Both placements lay a RankGrid over an ordered list of devices: grid index v runs on the
// v-th device of the list. `naive` lists devices in topology order and uses the spec's order
// string (Megatron-LM). `holmes` lists devices island by island and uses tp-dp-pp, so a
// tensor group is tp consecutive devices of one node, a stage is tp*dp consecutive devices,
// and a stage lies inside one island whenever tp*dp divides every island's device count.
// When it does not, several island orders are tried and the planner keeps the least bad.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/links.hpp"
#include "engine/plan/rank_grid.hpp"

namespace holmes::plan {

// Global ranks numbered node by node (node 0's devices first).
struct DeviceTable {
  std::vector<int> node_of;   // rank -> node
  std::vector<int> local_of;  // rank -> device index on its node
  std::vector<int> first_rank;  // node -> its first rank
};
DeviceTable make_device_table(const Facts& f);

struct Layout {
  RankGrid grid{1, 1, 1, "tp-dp-pp"};
  std::vector<int> rank_at;   // grid index -> global rank
  std::vector<int> index_of;  // global rank -> grid index
  std::vector<int> island_order;
  int tp_groups_crossing_nodes = 0;
  int dp_groups_crossing_islands = 0;

  int rank(const Coords& c) const { return rank_at[grid.index(c)]; }
  Coords coords(int rank) const { return grid.coords(index_of[rank]); }
};

// Megatron-LM order over the devices in topology order.
Layout naive_layout(const Facts& f, const DeviceTable& d, int tp, int pp, int dp, const std::string& order);

// Candidate island orders for the holmes placement (deduplicated, deterministic): topology
// order, RDMA islands first (IB, RoCE, then Ethernet; larger first), largest first,
// smallest first, and islands that hold whole stages (device count a multiple of
// `stage_devices` = tp x dp) first with the rest largest-first or smallest-first, so only the
// leftover islands share stages. Islands with no node are left out.
std::vector<std::vector<int>> island_orders(const Facts& f, int stage_devices);
Layout holmes_layout(const Facts& f, const DeviceTable& d, int tp, int pp, int dp,
                     const std::vector<int>& island_order);

}  // namespace holmes::plan
